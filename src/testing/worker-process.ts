// A subagent worker in its own process, for fault tests and benchmarks that SIGKILL it (start it
// with `spawnWorkerProcess`). Connects to TEMPORAL_TEST_ADDRESS with the prebuilt workflow bundle
// TEMPORAL_TEST_BUNDLE and hosts, under PROVIDER_NAME, the `scripted` test double (appending every
// turn event to EVENTS_FILE synchronously, so an event is on disk before the process can be
// killed), with PROVIDER_KIND=spawn the spawn provider against OPENAI_BASE_URL, or with
// PROVIDER_KIND=acp the acp provider running ACP_COMMAND (a JSON argv). SUBAGENT_WORKER_CACHED_RUNS
// caps its workflow cache, as for the standalone worker; MEMORY_FILE receives its memory use twice
// a second. Prints "ready".
import { appendFileSync } from 'node:fs';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createAcpProvider } from '../providers/acp';
import { createSpawnProvider } from '../providers/llm';
import { createSubagentWorker } from '../worker/worker';
import { createScriptedProvider } from '../providers/scripted';
import { workerCachedRunsFromEnv } from '../temporal/config';
import { serveWorker } from './processes';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const { TEMPORAL_TEST_ADDRESS, TEMPORAL_TEST_BUNDLE, PROVIDER_NAME, PROVIDER_KIND, EVENTS_FILE } = process.env;
  const connection = await NativeConnection.connect({ address: TEMPORAL_TEST_ADDRESS! });
  const [command, ...args] = JSON.parse(process.env.ACP_COMMAND ?? '[""]') as string[];
  const provider =
    PROVIDER_KIND === 'spawn'
      ? createSpawnProvider({ name: PROVIDER_NAME! })
      : PROVIDER_KIND === 'acp'
        ? createAcpProvider({
            name: PROVIDER_NAME!,
            command: command!,
            args,
            env: {
              ACP_AGENT_SCRIPT: process.env.ACP_AGENT_SCRIPT ?? '{}',
              ACP_AGENT_LOG: process.env.ACP_AGENT_LOG ?? '',
            },
            killGraceMs: 500,
          })
        : createScriptedProvider({
            name: PROVIDER_NAME!,
            observer: (event) =>
              appendFileSync(
                EVENTS_FILE!,
                `${JSON.stringify({ ...event, pid: process.pid, host: process.env.HOST_NAME })}\n`,
              ),
          });
  const cachedRuns = workerCachedRunsFromEnv();
  const worker = await createSubagentWorker({
    connection,
    providers: [provider],
    workflowBundle: { codePath: TEMPORAL_TEST_BUNDLE! },
    heartbeatIntervalMs: 200,
    ...(cachedRuns === undefined ? {} : { workerOptions: { maxCachedWorkflows: cachedRuns } }),
  });
  await serveWorker(worker, connection);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
