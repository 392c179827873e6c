// Workers as real child processes, for tests that kill them.
import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

export interface WorkerProcess {
  readonly child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Spawns `test/fixtures/<fixture>.ts` under node with tsx; resolves once it prints "ready". */
export async function spawnWorkerProcess(fixture: string, env: Record<string, string>): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(__dirname, '../fixtures', `${fixture}.ts`)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await new Promise<void>((ready, fail) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => chunk.includes('ready') && ready());
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
