// What a caller asks for when it delegates (`SubagentStartRequest`), and the same request once the
// facade has checked and serialised it (`ResolvedSubagentRequest`), as a run carries it.
import type { ContentBlock, JsonObject, ToolResultBlock } from './content';
import type { SubagentStopReason } from './result';

/**
 * The parent agent, in the seam's `Agent` shape reduced to what a durable run reads: a harness
 * agent object can be passed as is. Only `id` is required.
 */
export interface SubagentParent {
  readonly id: string;
  readonly options?: { readonly model?: string; readonly subagentDepth?: number };
  readonly session?: {
    readonly header: { readonly id: string; readonly cwd?: string };
    /** The parent's session log; a provider that inherits context (fork) is seeded from it. */
    readonly events?: readonly SubagentSessionEvent[];
  };
  /** The parent's own run id when it is itself a durable subagent run. */
  readonly runId?: string;
  /** The run at the top of the parent's tree, when the parent is itself a nested run. */
  readonly rootRunId?: string;
}

/**
 * One event of the parent's session log, in the seam's shape. Fork reads `user/message`,
 * `assistant/message` and `tool/result` (their `data.content`, and `data.callId` / `data.isError`
 * for results) up to the last `turn/end`; other types are skipped. Results are paired with calls
 * as a model endpoint takes them: a call with none gets an error result, a stray one is left out.
 */
export interface SubagentSessionEvent {
  readonly type: string;
  readonly seq?: number;
  readonly data?: unknown;
}

/** Per-child options; `model` is the one every provider reads, others are provider-specific JSON. */
export interface SubagentAgentOptions {
  model?: string;
  [option: string]: unknown;
}

export interface SubagentToolFilter {
  allow?: string[];
  deny?: string[];
}

export interface SubagentStartRequest {
  /** Becomes the child's first user message. */
  prompt: ContentBlock[];
  /** Required: the agent whose delegation starts the run. */
  parent: SubagentParent;
  /** Cancellation from the spawning context: aborting it cancels the run. */
  signal?: AbortSignal;
  agentOptions?: SubagentAgentOptions;
  /** Needs `capabilities.outputSchema`. */
  outputSchema?: Record<string, unknown>;
  /** Needs `capabilities.depthLimit`; refuses a child whose absolute depth would exceed it. */
  maxDepth?: number;
  /** Needs `capabilities.toolFilter`. */
  toolFilter?: SubagentToolFilter;
  /**
   * The caller's key for this delegation: starting again with the same key returns the same run
   * (never a second workflow), even from another process or after the run closed. The same key
   * with a different request rejects `result` with `IDEMPOTENCY_CONFLICT`.
   */
  idempotencyKey?: string;
  /**
   * Limits on what the run and every run below it may spend; a nested run inherits what remains
   * of its parent's (its own can only narrow it). Exhausting one ends the run `max-tokens` (a
   * deadline: `aborted`) with a diagnostic naming the limit.
   */
  budget?: SubagentBudget;
}

export interface SubagentBudget {
  /** Turns begun, the run's and its descendants'. */
  maxTurns?: number;
  /** Model calls answered. */
  maxModelCalls?: number;
  /** Prompt and completion tokens together. */
  maxTokens?: number;
  /** Priced by the workers' `modelPrices`. */
  maxCostUsd?: number;
  /** When the run is cut off: a Date, an ISO 8601 time, or epoch milliseconds. */
  deadline?: Date | string | number;
}

/** A budget as a run carries it: the deadline in epoch milliseconds. */
export interface ResolvedSubagentBudget {
  maxTurns?: number;
  maxModelCalls?: number;
  maxTokens?: number;
  maxCostUsd?: number;
  deadline?: number;
}

/** A start request from inside a run: the parent is the run itself. */
export type SubagentNestedStartRequest = Omit<SubagentStartRequest, 'parent'>;

/** The live parent agent reduced to what crosses the wire. */
export interface SubagentParentRef {
  agentId: string;
  sessionId?: string;
  cwd?: string;
  /** The parent's own delegation depth (0 for a top-level agent). */
  depth: number;
  model?: string;
  /** The run id when the parent is itself a durable subagent run. */
  runId?: string;
  /** The run at the top of the tree, when the parent is itself a nested run. */
  rootRunId?: string;
}

/** A start request after validation: every field checked, defaults applied, the parent serialised. */
export interface ResolvedSubagentRequest {
  prompt: ContentBlock[];
  parent: SubagentParentRef;
  /**
   * For providers that inherit the parent's context (fork): the parent's balanced completed-turn
   * prefix as conversation entries, and how many parent session events it came from.
   */
  seed?: { entries: TranscriptEntry[]; events: number };
  /** This child's depth: parent depth + 1. */
  depth: number;
  agentOptions?: JsonObject;
  outputSchema?: JsonObject;
  maxDepth?: number;
  toolFilter?: SubagentToolFilter;
  budget?: ResolvedSubagentBudget;
}

/** One entry of a child's conversation as the run workflow keeps it. Append-only. */
export type TranscriptEntry =
  | { kind: 'user'; content: ContentBlock[] }
  | { kind: 'assistant'; id: string; content: ContentBlock[]; stopReason: SubagentStopReason }
  /** The results of one assistant message's tool calls, in call order. */
  | { kind: 'tool'; results: ToolResultBlock[] };
