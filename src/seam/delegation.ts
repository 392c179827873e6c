// What a run passes down to the runs it delegates: its depth, its depth cap, its model and what
// remains of its budget. Pure,
// so the workflow (for tool activities) and the turn activity compute it the same way.
import { remainingBudget } from './budget';
import type { ResolvedSubagentBudget, ResolvedSubagentRequest, SubagentNestedStartRequest } from './request';
import type { SubagentSpend } from './result';
import type { SubagentRun } from './run';

/** A run as the parent of nested runs: the depth, cap and model a child inherits. */
export interface SubagentDelegation {
  depth: number;
  maxDepth?: number;
  model?: string;
  /** What remains of the run's budget: a nested run gets this, narrowed by its own. */
  budget?: ResolvedSubagentBudget;
  /** The run at the top of the tree, when this run is itself nested (else the run is the top). */
  rootRunId?: string;
}

/** The running child, as the parent of the runs it delegates. */
export interface SubagentDelegatingRun extends SubagentDelegation {
  runId: string;
  cwd?: string;
  /** The turn's or tool call's cancellation: it cancels the nested run. */
  signal: AbortSignal;
}

/** What the worker hands activities so a running child can delegate further. */
export type SubagentDelegate = (
  provider: string,
  request: SubagentNestedStartRequest,
  parent: SubagentDelegatingRun,
) => SubagentRun;

/** The model a run asked for: its own non-empty `agentOptions.model`, else its parent's. */
export function requestedModel(request: ResolvedSubagentRequest): string | undefined {
  const own = request.agentOptions?.model;
  return typeof own === 'string' && own !== '' ? own : request.parent.model;
}

/**
 * This run as the parent of a nested run: the depth, cap and model a child inherits, and what
 * remains of its budget after `spend` (the run's and its descendants' so far).
 */
export function delegationOf(request: ResolvedSubagentRequest, spend?: SubagentSpend): SubagentDelegation {
  const model = requestedModel(request);
  const budget = request.budget && spend ? remainingBudget(request.budget, spend) : request.budget;
  return {
    depth: request.depth,
    ...(request.maxDepth === undefined ? {} : { maxDepth: request.maxDepth }),
    ...(model === undefined ? {} : { model }),
    ...(budget === undefined ? {} : { budget }),
    ...(request.parent.runId === undefined ? {} : { rootRunId: request.parent.rootRunId ?? request.parent.runId }),
  };
}
