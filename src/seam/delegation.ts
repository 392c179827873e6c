// What a run passes down to the runs it delegates: its depth, its depth cap, its model and what
// remains of its budget; and which delegation tools a run at its depth is offered. Pure, so the
// workflow (for tool activities) and the activities compute it the same way.
import { remainingBudget } from './budget';
import { STRUCTURED_OUTPUT_TOOL } from './structured';
import type {
  ResolvedSubagentBudget,
  ResolvedSubagentRequest,
  SubagentNestedStartRequest,
  SubagentSessionEvent,
  TranscriptEntry,
} from './request';
import type { SubagentSpend } from './result';
import type { SubagentRun } from './run';
import type { SubagentTool } from './tool';

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
  /**
   * The run's completed turns as a session log (`sessionLogOf`), when the delegation hands them
   * down: a provider that inherits its parent's context (fork) is seeded from them.
   */
  events?: readonly SubagentSessionEvent[];
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

/**
 * Conversation entries as a parent's session log, in the seam's shape a fork is seeded from: each
 * message an event (a tool entry one `tool/result` per result), closed by a `turn/end`, so the
 * whole of them counts as completed turns. No entries, no events.
 */
export function sessionLogOf(entries: readonly TranscriptEntry[]): SubagentSessionEvent[] {
  if (entries.length === 0) return [];
  const events = entries.flatMap((entry): SubagentSessionEvent[] => {
    if (entry.kind === 'user') return [{ type: 'user/message', data: { content: entry.content } }];
    if (entry.kind === 'assistant') return [{ type: 'assistant/message', data: { content: entry.content } }];
    return entry.results.map((result) => ({
      type: 'tool/result',
      data: { callId: result.toolCallId, content: result.content, isError: result.isError },
    }));
  });
  events.push({ type: 'turn/end', data: { reason: { kind: 'completed' } } });
  return events;
}

/**
 * Where the agent-loop turn in flight begins in a run's conversation `entries`, whose first
 * `seedLength` entries are its seed (completed turns all). A turn ends with an assistant message
 * that calls no tool or stopped otherwise than `completed`, or with the tool entry of a
 * `structured_output` capture. A turn that ended right after its tools ran (it failed, ran out of
 * steps or budget, was cancelled) cannot be told from messages that came within the next one,
 * so it counts as part of that one: the turn in flight may begin earlier than it did, never later.
 */
export function turnInFlightStart(entries: readonly TranscriptEntry[], seedLength: number): number {
  let start = entries.length;
  while (start > seedLength && !endsTurn(entries, start - 1)) start--;
  return start;
}

function endsTurn(entries: readonly TranscriptEntry[], index: number): boolean {
  const entry = entries[index]!;
  if (entry.kind === 'assistant') {
    return entry.stopReason !== 'completed' || !entry.content.some((block) => block.type === 'tool-call');
  }
  if (entry.kind !== 'tool') return false;
  const before = entries[index - 1];
  if (before?.kind !== 'assistant') return false;
  const captures = new Set(
    before.content.flatMap((block) =>
      block.type === 'tool-call' && block.name === STRUCTURED_OUTPUT_TOOL ? [block.id] : [],
    ),
  );
  return entry.results.some((result) => captures.has(result.toolCallId) && !result.isError);
}

/** The key of a delegation tool's config; a copy made of the tool (`{ ...tool }`) keeps it. */
export const DELEGATION_CONFIG = Symbol('subagent.delegationTool');

/**
 * Whether `tool` is a delegation tool every call of which is refused in a run at `depth` under
 * `maxDepth`: the run it would start (at `depth + 1`) is deeper than the lower of its own
 * `maxDepth` and the run's. False for any other tool.
 */
export function delegatesPastDepth(tool: SubagentTool, depth: number, maxDepth: number | undefined): boolean {
  const config = (tool as { [DELEGATION_CONFIG]?: { maxDepth?: number } })[DELEGATION_CONFIG];
  if (!config) return false;
  const caps = [config.maxDepth, maxDepth].filter((cap): cap is number => cap !== undefined);
  return caps.length > 0 && depth + 1 > Math.min(...caps);
}

/**
 * The key of what a worker binds to a background delegation tool whose answer a result tool of its
 * provider collects: that tool's name, and the same delegation tool worded for a run that may not
 * call it (see `offeredTools`).
 */
export const WITHOUT_COLLECTOR = Symbol('subagent.withoutCollector');

/**
 * The tools among `tools` (a hosted provider's) that a run offers its model, by their names in
 * `allowed`: a background delegation tool whose result tool is left out (a run's `toolFilter`
 * denied it) is offered as one whose answer does not come back, in its description and in what
 * its calls answer, instead of naming a tool the model cannot call.
 */
export function offeredTools(tools: readonly SubagentTool[], allowed: ReadonlySet<string>): SubagentTool[] {
  return tools
    .filter((tool) => allowed.has(tool.name))
    .map((tool) => {
      const bound = (tool as { [WITHOUT_COLLECTOR]?: { collector: string; tool: SubagentTool } })[WITHOUT_COLLECTOR];
      return bound && !allowed.has(bound.collector) ? bound.tool : tool;
    });
}
