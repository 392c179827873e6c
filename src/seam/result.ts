// How a child's work ends: its stop reason, its result, and what one turn of a provider produces.
import type { ContentBlock, JsonValue } from './content';

/** Merge-extensible; consumers treat a reason they do not know as a failure. */
export interface SubagentStopReasonMap {
  completed: 'completed';
  aborted: 'aborted';
  error: 'error';
  'max-tokens': 'max-tokens';
  refusal: 'refusal';
}
export type SubagentStopReason = SubagentStopReasonMap[keyof SubagentStopReasonMap];

export interface SubagentResult {
  /** The child's final assistant output in this segment; may be partial unless `completed`. */
  output: ContentBlock[];
  /** Present only when the request carried an `outputSchema` and the provider honoured it. */
  structured?: unknown;
  stopReason: SubagentStopReason;
  /** Failure detail that is not assistant output (an error message, a stderr tail). */
  diagnostic?: string;
}

/** Token counts reported by the model endpoint. */
export interface SubagentUsage {
  promptTokens: number;
  completionTokens: number;
}

/**
 * What a run and every run below it spent, in the measures a budget limits: turns begun, model
 * calls answered, tokens (prompt and completion) and their cost in USD (priced by the worker's
 * `modelPrices`; 0 for a model it has no price for).
 */
export interface SubagentSpend {
  turns: number;
  modelCalls: number;
  tokens: number;
  costUsd: number;
}

/** What a provider's turn produces. */
export interface SubagentTurnResult {
  output: ContentBlock[];
  stopReason: SubagentStopReason;
  diagnostic?: string;
  /** The captured structured value; set by the host from the capture runtime, validated. */
  structured?: unknown;
  /** Opaque provider state the run keeps for its next turns and segments (an ACP session id). */
  providerState?: JsonValue;
  /** Permission decisions the provider made for the child, kept in history for audit. */
  permissions?: SubagentPermissionDecision[];
}

export interface SubagentPermissionDecision {
  toolCall: string;
  /** The kind the agent gave its tool call: a label it chose, recorded, never trusted alone. */
  kind?: string;
  /** Every path the request names (its locations, and path-like fields of its input). */
  paths?: string[];
  decision: 'allowed' | 'rejected';
  /** Why, in words. */
  reason?: string;
  optionId?: string;
}

/** A tool call parked until it is approved or denied (see `SubagentRun.approve`). */
export interface SubagentApprovalRequest {
  /** Names the request everywhere: `<run id>/<request>`, so the root of a tree can answer it. */
  requestId: string;
  tool: string;
  /** The call's arguments as the model or agent gave them (JSON text). */
  arguments: string;
  /** The kind an ACP agent gave its tool call (`edit`, `execute`, ...). */
  kind?: string;
  /** Epoch ms when the request is denied if nobody answered it. */
  deadline: number;
}

export interface SubagentApprovalDecision {
  requestId: string;
  decision: 'allow' | 'deny';
  /** `caller`: answered by `approve`; `timeout`: nobody answered in time; `turn-ended`: the turn that asked stopped first. */
  by: 'caller' | 'timeout' | 'turn-ended';
  reason?: string;
}
