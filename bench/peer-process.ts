// The peer the agent-loop figure compares against: the same task on Temporal's own AI SDK
// integration, run by bench/peer/run.ts in a process of its own (its package pins other versions
// of the SDK), on the same server and fake model. Installed on first use.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const PEER_DIR = join(__dirname, 'peer');

export interface PeerRun {
  steps: number;
  wall_ms: number;
  history_bytes: number;
  history_events: number;
  model_calls: number;
}

export interface Peer {
  /** Runs the task once with `steps` model calls, eagerly started; its wall time and history. */
  run(steps: number): Promise<PeerRun>;
  close(): Promise<void>;
}

function install(): void {
  if (existsSync(join(PEER_DIR, 'node_modules', '@temporalio', 'ai-sdk'))) return;
  const installed = spawnSync('npm', ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund', '--loglevel=error'], {
    stdio: 'inherit',
  });
  if (installed.status !== 0) throw new Error(`npm ci --prefix ${PEER_DIR} failed`);
}

export async function startPeer(options: {
  address: string;
  namespace: string;
  baseURL: string;
  model: string;
  dir: string;
}): Promise<Peer> {
  install();
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(PEER_DIR, 'run.ts'),
      ...['--address', options.address, '--namespace', options.namespace],
      ...['--base-url', options.baseURL, '--model', options.model, '--dir', options.dir],
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown>> => {
    const line = await lines.next();
    if (line.done) throw new Error('the peer process exited');
    const reply = JSON.parse(line.value) as Record<string, unknown>;
    if (typeof reply.error === 'string') throw new Error(`peer: ${reply.error}`);
    return reply;
  };
  await next();
  return {
    async run(steps) {
      child.stdin.write(`${JSON.stringify({ steps })}\n`);
      return (await next()) as unknown as PeerRun;
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin.end();
      await exited;
    },
  };
}
