// Workers as real child processes, for tests that kill them.
import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

export interface WorkerProcess {
  readonly child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Spawns `test/fixtures/<fixture>.ts` under node with tsx; resolves once it prints "ready".
 * `onLine` sees every line it prints on stdout.
 */
export async function spawnWorkerProcess(
  fixture: string,
  env: Record<string, string>,
  onLine: (line: string) => void = () => undefined,
  /** A command that execs the process in place, e.g. `['ip', 'netns', 'exec', 'host-a']`. */
  wrap: string[] = [],
): Promise<WorkerProcess> {
  const argv = [...wrap, process.execPath, '--import', 'tsx', resolve(__dirname, '../fixtures', `${fixture}.ts`)];
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
    child.once('exit', (code) => fail(new Error(`worker process exited with ${code} before it was ready:\n${stderr}`)));
  });
  return {
    child,
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
