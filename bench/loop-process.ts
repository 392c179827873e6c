// The two sides of the agent-loop figure, each in a process of its own with its worker and its
// client, on the same server and against the bench's fake model (which runs in the bench's own
// process): ours (bench/ours.ts), and the peer, the same task on Temporal's own AI SDK integration
// (bench/peer/run.ts, a package of its own since it pins other versions of the SDK; installed on
// first use). Both speak the same JSON-lines protocol, described in bench/peer/run.ts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const PEER_DIR = join(__dirname, 'peer');

export interface LoopRun {
  steps: number;
  wall_ms: number;
  history_bytes: number;
  model_calls: number;
}

export interface LoopProcess {
  /** Runs the task once with `steps` model calls, eagerly started; its wall time and history. */
  run(steps: number): Promise<LoopRun>;
  close(): Promise<void>;
}

export interface LoopOptions {
  address: string;
  namespace: string;
  baseURL: string;
  model: string;
  /** The directory the task's tool lists. */
  dir: string;
}

/** Our agent loop: the spawn provider's runs through the service, in a process of its own. */
export function startOurs(options: LoopOptions & { payloadDir: string }): Promise<LoopProcess> {
  return startLoopProcess('ours', join(__dirname, 'ours.ts'), [
    ...loopArgs(options),
    '--payload-dir',
    options.payloadDir,
  ]);
}

/** The peer's agent loop (`@temporalio/ai-sdk`), installed on first use. */
export function startPeer(options: LoopOptions): Promise<LoopProcess> {
  if (!existsSync(join(PEER_DIR, 'node_modules', '@temporalio', 'ai-sdk'))) {
    const installed = spawnSync('npm', ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund', '--loglevel=error'], {
      stdio: 'inherit',
    });
    if (installed.status !== 0) throw new Error(`npm ci --prefix ${PEER_DIR} failed`);
  }
  return startLoopProcess('peer', join(PEER_DIR, 'run.ts'), loopArgs(options));
}

function loopArgs({ address, namespace, baseURL, model, dir }: LoopOptions): string[] {
  return ['--address', address, '--namespace', namespace, '--base-url', baseURL, '--model', model, '--dir', dir];
}

async function startLoopProcess(label: string, script: string, args: string[]): Promise<LoopProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown>> => {
    const line = await lines.next();
    if (line.done) throw new Error(`the ${label} process exited`);
    const reply = JSON.parse(line.value) as Record<string, unknown>;
    if (typeof reply.error === 'string') throw new Error(`${label}: ${reply.error}`);
    return reply;
  };
  await next();
  return {
    async run(steps) {
      child.stdin.write(`${JSON.stringify({ steps })}\n`);
      const reply = (await next()) as unknown as LoopRun;
      if (reply.model_calls !== steps) throw new Error(`${label} made ${reply.model_calls} model calls, not ${steps}`);
      return reply;
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin.end();
      await exited;
    },
  };
}
