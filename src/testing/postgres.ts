// A real PostgreSQL server for tests: the machine's binaries (Debian's `postgresql` package, or
// PG_BIN), a fresh cluster in a temporary directory, listening on a free loopback port. As root it
// runs as the `postgres` user, since PostgreSQL refuses to run as root.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '../temporal/dev-server';

export interface TestPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: trust authentication, loopback only. */
  readonly url: string;
  readonly port: number;
  /** Stops the server (fast shutdown) and deletes its cluster. */
  stop(): Promise<void>;
}

/** The directory of the machine's PostgreSQL binaries: PG_BIN, else the newest under /usr/lib/postgresql. */
function binDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((version) => join(root, version, 'bin')).find((dir) => existsSync(join(dir, 'initdb')));
  if (!found) throw new Error('no PostgreSQL server binaries: install Debian\'s "postgresql" package or set PG_BIN');
  return found;
}

/** Starts a PostgreSQL server of its own; the caller must `stop()` it. */
export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'subagent-postgres-'));
  const asRoot = process.getuid?.() === 0;
  // PostgreSQL will not run as root: hand the cluster to the `postgres` user and run as it.
  const as = (command: string): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, command)]] : [join(bin, command), []];
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = join(dir, 'data');
  const [initdb, initdbPrefix] = as('initdb');
  execFileSync(initdb, [...initdbPrefix, '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'], {
    stdio: 'ignore',
  });
  const port = await freePort();
  const [postgres, prefix] = as('postgres');
  const child: ChildProcess = spawn(
    postgres,
    [...prefix, '-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-k', dir, '-c', 'fsync=off'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      // The postmaster itself, not `runuser` in front of it: SIGINT is its fast shutdown.
      const pidFile = join(data, 'postmaster.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : child.pid!;
      process.kill(pid, 'SIGINT');
    }
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  // Ready once it takes a connection.
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`PostgreSQL exited before it was ready:\n${stderr}`);
    }
    const client = new Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (attempt > 200) {
        await stop();
        throw new Error(`PostgreSQL did not accept connections on port ${port}:\n${stderr}`, { cause: err });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return { url, port, stop };
}
