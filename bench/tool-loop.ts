// One run of the benchmark's tool task on our side: an LLM child whose one turn makes `calls` model
// calls, all but the last asking for a tool (the fake model reads the task from the prompt; see
// `toolTask` in bench/index.ts). Used in the bench's process and in bench/ours.ts.
import type { Client } from '@temporalio/client';
import type { TemporalSubagentService } from '../src';
import { EventType, runHistory } from '../src/temporal/run-history';
import { MODEL_CALL_ACTIVITY } from '../activities/types';

export interface ToolLoopRun {
  id: string;
  /** Start to result. */
  ms: number;
  /** History bytes over every Temporal run of the subagent run (it may continue as new). */
  bytes: number;
  runs: number;
  bytesPerCall: number;
}

export async function toolLoop(
  service: TemporalSubagentService,
  client: Client,
  { provider, calls, cwd, tool = 'list_directory', args = {} }: ToolLoopTask,
): Promise<ToolLoopRun> {
  const started = performance.now();
  const run = service.start(provider, {
    prompt: [{ type: 'text', text: `steps=${calls} tool=${tool} args=${JSON.stringify(args)}` }],
    parent: { id: 'bench', session: { header: { id: 's', cwd } } },
  });
  const outcome = await run.result;
  const ms = performance.now() - started;
  // A run that stopped short would make its history per call look small.
  if (outcome.stopReason !== 'completed') {
    throw new Error(`${provider} run ${run.id} stopped with ${outcome.stopReason}: ${outcome.diagnostic ?? ''}`);
  }
  let bytes = 0;
  const runs = await temporalRuns(client, run.id);
  for (const runId of runs) {
    const { raw } = await client.workflow.getHandle(run.id, runId).describe();
    bytes += Number(raw.workflowExecutionInfo?.historySizeBytes ?? 0);
  }
  await run.dispose();
  return { id: run.id, bytes, runs: runs.length, ms, bytesPerCall: Math.round(bytes / calls) };
}

export interface ToolLoopTask {
  provider: string;
  calls: number;
  /** The directory the tool works in. */
  cwd: string;
  tool?: string;
  args?: object;
}

/** How many model calls a run made, over all its Temporal runs. */
export async function modelCalls(client: Client, runId: string): Promise<number> {
  let calls = 0;
  for await (const { event } of runHistory(client, runId, { follow: false })) {
    const scheduled = event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED;
    if (scheduled && event.activityTaskScheduledEventAttributes?.activityType?.name === MODEL_CALL_ACTIVITY) calls++;
  }
  return calls;
}

/**
 * A run's Temporal runs, oldest first, along its continue-as-new chain in history. Not from
 * visibility (`list`): on a cluster it can lag behind a run that has just continued as new.
 */
async function temporalRuns(client: Client, runId: string): Promise<string[]> {
  const runs: string[] = [];
  for await (const { temporalRunId } of runHistory(client, runId, { follow: false })) {
    if (runs.at(-1) !== temporalRunId) runs.push(temporalRunId);
  }
  return runs;
}
