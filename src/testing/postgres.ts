// A real PostgreSQL server for tests and the local cluster: the machine's binaries (Debian's
// `postgresql` package, or PG_BIN), a cluster in a directory of the caller's, listening on a
// loopback port. As root it runs as the `postgres` user, since PostgreSQL refuses to run as root.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePortBelowEphemeral } from '../temporal/dev-server';

export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: trust authentication, loopback only. */
  readonly url: string;
  readonly port: number;
  /** The postmaster's pid while it runs. */
  pid(): number | undefined;
  /** Starts it again on the same data and port; resolves once it takes connections. */
  start(): Promise<void>;
  /** Stops it: SIGINT, PostgreSQL's fast shutdown, unless `signal` says otherwise (SIGKILL: a crash). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface TestPostgres extends PostgresServer {
  /** Stops the server and deletes its cluster. */
  stop(): Promise<void>;
}

/** The directory of the machine's PostgreSQL binaries: PG_BIN, else the newest under /usr/lib/postgresql. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((version) => join(root, version, 'bin')).find((dir) => existsSync(join(dir, 'initdb')));
  if (!found) throw new Error('no PostgreSQL server binaries: install Debian\'s "postgresql" package or set PG_BIN');
  return found;
}

/**
 * Starts PostgreSQL on the cluster in `dir` (made with initdb when there is none) on `port` (a
 * free one by default), logging to `dir/postgres.log`. With `detached`, the server outlives this
 * process. The caller stops it.
 */
export async function startPostgres(options: {
  dir: string;
  port?: number;
  detached?: boolean;
}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const { dir } = options;
  const asRoot = process.getuid?.() === 0;
  // PostgreSQL will not run as root: the cluster belongs to the `postgres` user, which runs it.
  const as = (command: string): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, command)]] : [join(bin, command), []];
  const data = join(dir, 'data');
  if (!existsSync(join(data, 'PG_VERSION'))) {
    mkdirSync(dir, { recursive: true });
    if (asRoot) {
      const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
      chownSync(dir, id('-u'), id('-g'));
    }
    const [initdb, prefix] = as('initdb');
    execFileSync(initdb, [...prefix, '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'], {
      stdio: 'ignore',
    });
  }
  const port = options.port ?? (await freePortBelowEphemeral());
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const postmasterPid = () => {
    const pidFile = join(data, 'postmaster.pid');
    return existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
  };

  const start = async () => {
    const [postgres, prefix] = as('postgres');
    const log = openSync(join(dir, 'postgres.log'), 'a');
    child = spawn(
      postgres,
      [...prefix, '-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-k', dir, '-c', 'fsync=off'],
      { stdio: ['ignore', log, log], detached: options.detached ?? false },
    );
    if (options.detached) child.unref();
    const running = child;
    exited = new Promise<void>((done) => running.once('exit', () => done()));
    // Ready once it takes a connection.
    for (let attempt = 0; ; attempt++) {
      if (running.exitCode !== null) throw new Error(`PostgreSQL exited before it was ready (see ${dir}/postgres.log)`);
      const client = new Client({ connectionString: url });
      try {
        await client.connect();
        await client.end();
        return;
      } catch (err) {
        await client.end().catch(() => undefined);
        if (attempt > 300) {
          throw new Error(`PostgreSQL did not accept connections on port ${port} (see ${dir}/postgres.log)`, {
            cause: err,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };

  const stop = async (signal: NodeJS.Signals = 'SIGINT') => {
    // The postmaster itself, not `runuser` in front of it: SIGINT is its fast shutdown.
    const pid = postmasterPid() ?? child?.pid;
    if (pid !== undefined) {
      try {
        process.kill(pid, signal);
      } catch {
        // Already gone.
      }
    }
    if (child && child.exitCode === null && child.signalCode === null) {
      // A detached child does not keep this process alive: waiting on it must, or Node exits here.
      child.ref();
      await exited;
    } else await waitForExit(pid);
    // A crashed postmaster leaves its pid file; the next start checks that pid and finds it gone.
  };

  await start();
  return { url, port, pid: postmasterPid, start, stop };
}

/** Resolves once no process has `pid` (one this process did not spawn). */
async function waitForExit(pid: number | undefined): Promise<void> {
  if (pid === undefined) return;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A PostgreSQL server of its own in a temporary directory; `stop()` deletes it. */
export async function startTestPostgres(): Promise<TestPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-postgres-'));
  const server = await startPostgres({ dir });
  return {
    ...server,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
