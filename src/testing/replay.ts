// Determinism checks over recorded histories: a history saved as JSON (as the Web UI, the
// Temporal CLI and `historyToJSON` write it) replayed against the current workflow code.
import { readFileSync } from 'node:fs';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { bundleSubagentWorkflows, subagentSinks } from '../worker/worker';

/**
 * Replays the history in `file` against the run workflow. Resolves when the code reproduces
 * every command the history holds; rejects with the SDK's `DeterminismViolationError` (a change
 * that needs `patched()`) or `ReplayError`. `workflowBundle` defaults to this package's workflows.
 */
export async function replayHistoryFile(
  file: string,
  options: { workflowBundle?: WorkerOptions['workflowBundle'] } = {},
): Promise<void> {
  const history = historyFromJSON(JSON.parse(readFileSync(file, 'utf8')));
  const workflowBundle = options.workflowBundle ?? (await bundleSubagentWorkflows());
  await Worker.runReplayHistory({ workflowBundle, sinks: subagentSinks() }, history);
}
