// `node dist/src/worker-main.js`: a standalone worker process, as the Docker image runs it.
// Connects to TEMPORAL_ADDRESS (or starts the embedded server when unset) and hosts the
// providers named in SUBAGENT_PROVIDERS (comma-separated; default: spawn,fork, which read
// OPENAI_BASE_URL, OPENAI_API_KEY and SUBAGENT_MODEL; acp runs SUBAGENT_ACP_COMMAND, e.g.
// "npx @zed-industries/claude-code-acp"). Stops on SIGTERM.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import type { SubagentHostedProvider } from '../activities/provider';
import { connectTemporal } from './config';
import { SubagentError } from './errors';
import { createAcpProvider } from './providers/acp';
import { createForkProvider, createSpawnProvider } from './providers/llm';
import { createScriptedProvider } from './providers/scripted';
import { createSubagentWorker } from './worker';

const AVAILABLE: Record<string, () => SubagentHostedProvider> = {
  spawn: () => createSpawnProvider(),
  fork: () => createForkProvider(),
  scripted: () => createScriptedProvider(),
  acp: () => {
    const [command, ...args] = (process.env.SUBAGENT_ACP_COMMAND ?? '').split(/\s+/).filter(Boolean);
    if (!command) throw new SubagentError('SUBAGENT_PROVIDERS names acp, so SUBAGENT_ACP_COMMAND must give its command line', 'INVALID_CONFIG');
    return createAcpProvider({ command, args, resumable: process.env.SUBAGENT_ACP_RESUMABLE === 'true' });
  },
};

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger((process.env.SUBAGENT_LOG_LEVEL as 'INFO') ?? 'INFO') });
  const names = (process.env.SUBAGENT_PROVIDERS ?? 'spawn,fork').split(',').map((name) => name.trim()).filter(Boolean);
  const providers = names.map((name) => {
    const create = AVAILABLE[name];
    if (!create) {
      throw new SubagentError(
        `SUBAGENT_PROVIDERS names "${name}", which this worker cannot host (available: ${Object.keys(AVAILABLE).join(', ')})`,
        'INVALID_CONFIG',
      );
    }
    return create();
  });
  const temporal = await connectTemporal({ dataDir: process.env.SUBAGENTS_DATA_DIR });
  const worker = await createSubagentWorker({ connection: temporal.connection, namespace: temporal.namespace, providers });
  console.log(`subagent worker on ${temporal.address} (${temporal.namespace}) polling ${worker.taskQueues.join(', ')}`);
  try {
    await worker.run();
  } finally {
    await temporal.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
