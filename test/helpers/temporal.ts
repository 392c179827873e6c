// The one place tests set up Temporal: connections to the real dev server that globalSetup
// started (or a server of a test's own), workers on unique task queues, and services, so test
// files can run in parallel without sharing anything but the server.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import {
  type SubagentHostedProvider,
  type SubagentLogger,
  TemporalSubagentService,
  type TemporalSubagentServiceOptions,
} from '../../src';
import { type DevServer, type DevServerOptions, startDevServer } from '../../src/testing';
import { createSubagentWorker, type SubagentWorkerOptions } from '../../src/worker';
import { type SubagentRunOutcome, type SubagentRunStatus, statusQuery } from '../../workflows/definitions';

export function installQuietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch {
    // Already installed in this module registry.
  }
}

export interface TestTemporal {
  address: string;
  namespace: string;
  connection: NativeConnection;
  client: Client;
  close(): Promise<void>;
}

/** A client and connection to the shared dev server (or `address`); `close()` closes the connection. */
export async function connectTestTemporal(
  namespace = 'default',
  options: { address?: string; dataConverter?: DataConverter } = {},
): Promise<TestTemporal> {
  installQuietRuntime();
  const address = options.address ?? process.env.TEMPORAL_TEST_ADDRESS;
  if (!address) {
    throw new Error('TEMPORAL_TEST_ADDRESS is unset: run the tests through jest (globalSetup starts the server)');
  }
  const connection = await NativeConnection.connect({ address });
  const client = new Client({
    connection,
    namespace,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
  return { address, namespace, connection, client, close: () => connection.close() };
}

export interface TestServer extends TestTemporal {
  readonly server: DevServer;
}

/** A dev server of the test's own (dynamic config, a database file, the Web UI), connected; `close()` stops it too. */
export async function startTestServer(
  options: DevServerOptions & { dataConverter?: DataConverter } = {},
): Promise<TestServer> {
  const { dataConverter, ...serverOptions } = options;
  const server = await startDevServer(serverOptions);
  try {
    const temporal = await connectTestTemporal(server.namespace, {
      address: server.address,
      ...(dataConverter ? { dataConverter } : {}),
    });
    return {
      ...temporal,
      server,
      async close() {
        await temporal.close();
        await server.stop();
      },
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

export function workflowBundle(): { codePath: string } {
  return { codePath: process.env.TEMPORAL_TEST_BUNDLE! };
}

/** A name no other test uses, so its task queue is its own. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export function recordingLogger(): SubagentLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, warn: (message) => warnings.push(message) };
}

/** Starts a worker hosting `providers`; the returned function stops it. */
export async function startWorker(
  temporal: TestTemporal,
  providers: SubagentHostedProvider[],
  options: Partial<SubagentWorkerOptions> = {},
): Promise<() => Promise<void>> {
  const worker = await createSubagentWorker({
    connection: temporal.connection,
    namespace: temporal.namespace,
    providers,
    workflowBundle: workflowBundle(),
    ...options,
  });
  const running = worker.run();
  return async () => {
    await worker.shutdown();
    await running;
  };
}

export function newService(temporal: TestTemporal, options: Partial<TemporalSubagentServiceOptions> = {}) {
  return new TemporalSubagentService({ client: temporal.client, logger: recordingLogger(), ...options });
}

export const text = (value: string) => [{ type: 'text' as const, text: value }];

/**
 * How long a test waits for a process it has just started (a CLI invocation, an ACP agent) to print
 * or log its first events: the process loads its runtime first, which took over 10 s beside CI's
 * parallel suites.
 */
export const FRESH_PROCESS_WITHIN_MS = 30_000;

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A script of test/fixtures/, to run with `spawnReadyProcess`. */
export const fixture = (name: string) => join(__dirname, '..', 'fixtures', `${name}.ts`);

export interface TestRuns {
  /** Set before the file's first test. */
  readonly temporal: TestTemporal;
  /** A service with `providers` registered; set before the file's first test. */
  readonly service: TemporalSubagentService;
  /** What the run's status query answers now. */
  status(runId: string): Promise<SubagentRunStatus>;
  /** The run's outcome, once its workflow has closed. */
  closed(runId: string): Promise<SubagentRunOutcome>;
}

export interface TestRunsOptions {
  namespace?: string;
  worker?: Partial<SubagentWorkerOptions>;
  dataConverter?: DataConverter;
}

/**
 * For the whole test file: a connection to the shared server, a worker hosting `providers` and
 * a service that knows them (all with `dataConverter`, if given), set up before the first test
 * and stopped after the last. `providers` may be a function, for providers that an earlier
 * `beforeAll` makes.
 */
export function testRuns(
  providers: SubagentHostedProvider[] | (() => SubagentHostedProvider[]),
  options: TestRunsOptions = {},
): TestRuns {
  const runs = {} as { temporal: TestTemporal; service: TemporalSubagentService; stop?: () => Promise<void> };
  const { dataConverter } = options;
  beforeAll(async () => {
    const hosted = typeof providers === 'function' ? providers() : providers;
    runs.temporal = await connectTestTemporal(options.namespace, dataConverter ? { dataConverter } : {});
    runs.stop = await startWorker(runs.temporal, hosted, {
      ...(dataConverter ? { dataConverter } : {}),
      ...options.worker,
    });
    runs.service = newService(runs.temporal);
    for (const provider of hosted) runs.service.registerProvider(provider);
  });
  afterAll(async () => {
    await runs.stop?.();
    await runs.temporal?.close();
  });
  const handle = (runId: string) => runs.temporal.client.workflow.getHandle(runId);
  return Object.assign(runs, {
    status: (runId: string) => handle(runId).query(statusQuery),
    closed: (runId: string) => handle(runId).result() as Promise<SubagentRunOutcome>,
  });
}

/**
 * Gates that hold scripted turns (their `waitFor`) until the test opens them, in this process or
 * in a worker process: a turn waits for what it must see (a queued message, an outage) as an
 * event, never for a length of time.
 */
export function turnGates() {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-gates-'));
  return {
    /** The `waitFor` of a scripted turn: its run's gate for that turn. */
    waitFor: join(dir, '{run}.{turn}'),
    open: (runId: string, turn: number) => writeFileSync(join(dir, `${runId}.${turn}`), ''),
  };
}
