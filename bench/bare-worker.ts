// The baseline workflows' worker in a process of its own, for figure 6's reference: the same
// memory readings as the subagent worker process (src/testing/worker-process.ts), of a worker that
// parks the bare parked workflow. Connects to TEMPORAL_TEST_ADDRESS with the prebuilt bundle of
// bench/baseline-workflows.ts at TEMPORAL_TEST_BUNDLE and polls TASK_QUEUE, with the worker
// settings of createSubagentWorker's; SUBAGENT_WORKER_CACHED_RUNS caps its workflow cache and
// MEMORY_FILE receives its memory use twice a second, as for that process. Prints "ready".
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { workerCachedRunsFromEnv } from '../src/temporal/config';
import { serveWorker } from '../src/testing/processes';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const { TEMPORAL_TEST_ADDRESS, TEMPORAL_TEST_BUNDLE, TASK_QUEUE } = process.env;
  const connection = await NativeConnection.connect({ address: TEMPORAL_TEST_ADDRESS! });
  const cachedRuns = workerCachedRunsFromEnv();
  const worker = await Worker.create({
    connection,
    taskQueue: TASK_QUEUE!,
    workflowBundle: { codePath: TEMPORAL_TEST_BUNDLE! },
    activities: { async noop() {}, async parkedTurn() {} },
    maxHeartbeatThrottleInterval: 1000,
    defaultHeartbeatThrottleInterval: 1000,
    stickyQueueScheduleToStartTimeout: 1000,
    ...(cachedRuns === undefined ? {} : { maxCachedWorkflows: cachedRuns }),
  });
  await serveWorker(worker, connection);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
