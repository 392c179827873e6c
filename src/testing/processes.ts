// Processes for tests that kill them: a script under Node (through tsx when it is TypeScript)
// that prints "ready" once it serves, a subagent worker in a process of its own, and the body
// such a worker process runs.
import { ChildProcess, spawn } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface ReadyProcess {
  readonly child: ChildProcess;
  /** Sends `signal` (default SIGKILL) unless it has exited; resolves once it has. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** The worker process entry (worker-process.ts beside this file, or its build). */
export const WORKER_PROCESS_ENTRY = join(__dirname, `worker-process${__filename.endsWith('.ts') ? '.ts' : '.js'}`);

export interface SpawnOptions {
  /** A command that execs the process in place, e.g. `['ip', 'netns', 'exec', 'host-a']`. */
  wrap?: string[];
  /** Node's own options, before the script: V8 flags that NODE_OPTIONS refuses, e.g. `--optimize-for-size`. */
  nodeArgs?: string[];
}

/**
 * Spawns `entry` under this Node with `env` added to this process's environment; resolves once
 * it prints the line "ready", rejects (with its stderr) if it exits first. `onLine` sees every
 * line it prints on stdout. The caller must `kill()` it.
 */
export async function spawnReadyProcess(
  entry: string,
  env: Record<string, string>,
  onLine: (line: string) => void = () => undefined,
  { wrap = [], nodeArgs = [] }: SpawnOptions = {},
): Promise<ReadyProcess> {
  // tsx by its path, so the script runs from any working directory.
  const loader = entry.endsWith('.ts') ? ['--import', pathToFileURL(require.resolve('tsx')).href] : [];
  const argv = [...wrap, process.execPath, ...nodeArgs, ...loader, entry];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await new Promise<void>((ready, fail) => {
    let buffered = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        onLine(line);
        if (line === 'ready') ready();
      }
    });
    child.once('exit', (code) => fail(new Error(`${entry} exited with ${code} before it was ready:\n${stderr}`)));
  });
  return {
    child,
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** A subagent worker in its own process, configured by `env` (see worker-process.ts). */
export function spawnWorkerProcess(
  env: Record<string, string>,
  onLine?: (line: string) => void,
  options?: SpawnOptions,
): Promise<ReadyProcess> {
  return spawnReadyProcess(WORKER_PROCESS_ENTRY, env, onLine, options);
}

/**
 * The body of a worker process: runs `worker`, writing its memory use to MEMORY_FILE when set (for
 * the memory benchmark: twice a second, whole, after a full collection of the main thread's heap
 * when Node runs with `--expose-gc`), prints "ready", and closes `connection` once it has stopped.
 */
export async function serveWorker(
  worker: { run(): Promise<void> },
  connection: { close(): Promise<void> },
): Promise<void> {
  const running = worker.run();
  const file = process.env.MEMORY_FILE;
  if (file) {
    const gc = (globalThis as { gc?: () => void }).gc;
    setInterval(() => {
      gc?.();
      // Whole or not at all: the bench may read it at any moment.
      writeFileSync(`${file}.new`, JSON.stringify(process.memoryUsage()));
      renameSync(`${file}.new`, file);
    }, 500).unref();
  }
  console.log('ready');
  await running;
  await connection.close();
}
