// `node dist/src/worker/main.js`: a standalone worker process, as the Docker image runs it.
// Connects to the configured server (TEMPORAL_ADDRESS or a Temporal CLI profile; the embedded one
// when there is none) and hosts the providers named in SUBAGENT_PROVIDERS (comma-separated;
// default: spawn,fork, which read OPENAI_BASE_URL, OPENAI_API_KEY and SUBAGENT_MODEL; acp runs
// SUBAGENT_ACP_COMMAND, e.g. "npx @zed-industries/claude-code-acp"). SUBAGENT_ENCRYPTION_KEYS
// turns encryption on; SUBAGENT_WORKER_CACHED_RUNS bounds the runs held in memory. Stops on SIGTERM.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { providersFromEnv } from '../providers/from-env';
import { workerCachedRunsFromEnv } from '../temporal/config';
import { connectTemporal } from './connect';
import { createSubagentWorker } from './worker';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger((process.env.SUBAGENT_LOG_LEVEL as 'INFO') ?? 'INFO') });
  const providers = providersFromEnv();
  const cachedRuns = workerCachedRunsFromEnv();
  const temporal = await connectTemporal({ dataDir: process.env.SUBAGENTS_DATA_DIR });
  const worker = await createSubagentWorker({
    connection: temporal.connection,
    namespace: temporal.namespace,
    providers,
    ...(temporal.dataConverter ? { dataConverter: temporal.dataConverter } : {}),
    ...(cachedRuns === undefined ? {} : { workerOptions: { maxCachedWorkflows: cachedRuns } }),
  });
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
