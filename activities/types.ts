// The activities' contract with the run workflow: each activity's input and output, and the names
// they take in history. Plain data only; the workflow imports this module by type.
import type { ContentBlock, JsonValue } from '../src/seam/content';
import type { SubagentDelegation } from '../src/seam/delegation';
import type { ResolvedSubagentRequest, SubagentToolFilter, TranscriptEntry } from '../src/seam/request';
import type { SubagentSpend, SubagentStopReason, SubagentTurnResult, SubagentUsage } from '../src/seam/result';
import type { ToolCallOutcome } from '../src/seam/tool';

/** The activity that runs one turn of a turn-based provider. */
export const TURN_ACTIVITY = 'subagentTurn';
/** The activity that runs one model call of an agent-loop provider. */
export const MODEL_CALL_ACTIVITY = 'subagentModelCall';
/**
 * The local activity that records a settled segment's outcome in history: it returns its input,
 * and its marker is the settle point observers and the audit read.
 */
export const SETTLED_ACTIVITY = 'subagentSegmentSettled';
/** Names the activities take in history besides the tools' own; no tool may take one. */
export const RESERVED_ACTIVITY_NAMES: readonly string[] = [TURN_ACTIVITY, MODEL_CALL_ACTIVITY, SETTLED_ACTIVITY];

/**
 * Failure types no retry can fix: an activity that fails with one fails for good, whoever threw
 * it (activities/host.ts). Runs from before 2026-12 also list them in their retry policy.
 */
export const FINAL_FAILURE_TYPES: readonly string[] = ['NO_PROVIDER', 'PAYLOAD_TOO_LARGE', 'INVALID_REQUEST'];

/** Input of the `subagentTurn` activity: one turn of a turn-based provider. */
export interface TurnActivityInput {
  provider: string;
  /** Inputs from before 2026-12 only: the run is the activity's workflow (`runOf`). */
  runId?: string;
  segment: number;
  /** Turn number over the child's whole life (resumes continue the count). */
  turn: number;
  /**
   * The user messages this turn answers: the prompt, steering messages or resume content, in
   * order. Runs from before store-once only; since, `inputLength`.
   */
  input?: ContentBlock[][];
  /**
   * How many user messages this turn answers. They follow `transcript` in the conversation and are
   * in history already (the start, a signal, the resume), so the worker takes them from the
   * request (a run's first prompt) or the workflow instead of from here.
   */
  inputLength?: number;
  /**
   * The conversation recorded before this turn, by reference: its length and the id of its last
   * assistant entry. A worker whose cache does not match exactly fetches it from the workflow.
   */
  transcript: { length: number; lastAssistantId?: string };
  /** Sent with a run's first turn only; later turns read it from the worker's cache or the workflow. */
  request?: ResolvedSubagentRequest;
  /** What the provider's previous turn left for it (`providerState`). */
  providerState?: JsonValue;
  /** Runs with a budget: what the run and its descendants had spent when the turn began. */
  spent?: SubagentSpend;
}

export interface TurnActivityResult extends SubagentTurnResult {
  /** Names this output in the conversation, so a worker can tell whether its cache is current. */
  outputId: string;
  /** How many waiting messages the turn took mid-turn (`takeMessages`), oldest first. */
  consumedMessages: number;
  /** What the runs the turn delegated to spent, each with the runs below it, by run id. */
  nestedSpend?: Record<string, SubagentSpend>;
}

/** Input of the `subagentModelCall` activity: one model call of an agent-loop provider. */
export interface ModelCallInput {
  provider: string;
  /** Inputs from before 2026-12 only: the run is the activity's workflow (`runOf`). */
  runId?: string;
  segment: number;
  turn: number;
  /** The conversation up to the last assistant message, by reference (see `TurnActivityInput`). */
  transcript: { length: number; lastAssistantId?: string };
  /** What came after it: tool results and user messages, in order. Runs from before store-once only. */
  delta?: TranscriptEntry[];
  /**
   * Since store-once: how many entries come after `transcript` (a tool entry, then user
   * messages). They are in history already (the tool activities' results, signals), so the worker
   * takes the tool results it produced from its cache, and the rest from the workflow.
   */
  deltaLength?: number;
  /** The ids of the tool results that make the first of those entries, in call order (`resultId`). */
  toolResultIds?: string[];
  /**
   * The workflow reads the result's tool calls from its `content` (`answers` for those the
   * activity answered), so the result lists them only there. Workflow code from before 2026-12
   * sends no such flag and gets `toolCalls`, as it expects.
   */
  callsInContent?: true;
  /**
   * The workflow parks the calls the provider's policy holds for approval (`approvals` in the
   * result). Workflow code from before approvals sends no such flag: such calls are denied there.
   */
  asksApproval?: true;
  /** Sent with the run's first model call only. */
  request?: ResolvedSubagentRequest;
}

/** A tool call the model made; `answer` is set when the model-call activity already answered it. */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
  answer?: ToolActivityResult;
}

export interface ModelCallResult {
  outputId: string;
  /** The assistant message: text blocks, then one tool-call block per call. */
  content: ContentBlock[];
  /** `completed` when the model stopped or called tools; `max-tokens`, `refusal` or `error` otherwise. */
  stopReason: SubagentStopReason;
  diagnostic?: string;
  /** For a workflow that did not ask for `callsInContent`: the calls in `content` again, each with its answer. */
  toolCalls?: ModelToolCall[];
  /** With `callsInContent`: the calls the activity answered itself (`structured_output`, an inline tool, a denied or unknown tool), by call id. */
  answers?: Record<string, ToolActivityResult>;
  /** With `asksApproval`: the ids of the calls the provider's policy holds for approval. */
  approvals?: string[];
  /** A value captured by `structured_output` in this response; it ends the turn. */
  structured?: unknown;
  usage?: SubagentUsage;
  /** What `usage` cost in USD, when the worker has a price for the model (`modelPrices`). */
  costUsd?: number;
}

/** What a tool activity returns: the outcome, and an id its worker caches it under for the next model call. */
export interface ToolActivityResult extends ToolCallOutcome {
  /** Names this attempt's result: a retried call that ran elsewhere has another id, so no cache mistakes one for the other. */
  resultId?: string;
  /** An answer the model call gave by running an inline tool (not a refusal or a capture). */
  ranInline?: true;
}

/** Input of a tool activity (its type is the tool's name). */
export interface ToolActivityInput {
  provider: string;
  /** Inputs from before 2026-12 only: the run is the activity's workflow (`runOf`). */
  runId?: string;
  callId: string;
  arguments: string;
  cwd?: string;
  /** The run as a parent, for tools that delegate: its depth, its cap, its model. */
  delegation: SubagentDelegation;
  /** The run's tool filter, if it has one: a delegation tool's answer names no tool it denies. */
  toolFilter?: SubagentToolFilter;
}

/** A batch of the text a streaming model call has generated (the `textDelta` signal), for the run's observers. */
export interface TextDeltaArgs {
  turn: number;
  /** The model call's attempt: a retried call streams its text again from the start. */
  attempt: number;
  /** The text since the last batch ('' when only reasoning came). */
  text: string;
  /** The reasoning since the last batch, which came before the text (batches from before 2026-12-03 have none). */
  reasoning?: string;
}

/** A turn's provider asks its run for an approval (`requestApprovalUpdate`). */
export interface RequestApprovalArgs {
  turn: number;
  /** Names the request within its turn: the same key (the same call asked again) is the same request. */
  key: string;
  tool: string;
  arguments: string;
  kind?: string;
}

/**
 * An endpoint's token quota as a reserving worker declares it: `tokensPerMinute` refill a bucket of
 * `burst` tokens (the token limiter's `reserveTokensUpdate` and `chargeTokensSignal`).
 */
export interface TokenQuota {
  tokensPerMinute: number;
  burst: number;
}

/** One model call's estimated tokens, reserved from its endpoint's bucket before it is sent. */
export interface ReserveTokensArgs extends TokenQuota {
  tokens: number;
}

/** What `runContextQuery` returns: the run's request and its whole conversation. */
export interface RunContextSnapshot {
  request: ResolvedSubagentRequest;
  entries: TranscriptEntry[];
}
