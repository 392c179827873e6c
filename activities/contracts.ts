// The serialisable contracts that cross the workflow/activity boundary: the seam's content
// vocabulary, the resolved request a run carries, and each activity's input and output.
// Plain data only (no classes, functions, Maps or Dates), so history and continue-as-new stay simple.
// Workflows import this module by type; it imports nothing.

export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ReasoningBlock {
  type: 'reasoning';
  text: string;
}
export interface ToolCallBlock {
  type: 'tool-call';
  id: string;
  name: string;
  /** The raw JSON argument string, as the model produced it. */
  arguments: string;
}
export interface ToolResultBlock {
  type: 'tool-result';
  toolCallId: string;
  content: ContentBlock[];
  isError?: boolean;
}

/** Merge-extensible: a provider may add block kinds through declaration merging. */
export interface ContentBlockMap {
  text: TextBlock;
  reasoning: ReasoningBlock;
  'tool-call': ToolCallBlock;
  'tool-result': ToolResultBlock;
}
export type ContentBlock = ContentBlockMap[keyof ContentBlockMap];

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

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export interface SubagentToolFilter {
  allow?: string[];
  deny?: string[];
}

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
}

/** One entry of a child's conversation as the run workflow keeps it. Append-only. */
export type TranscriptEntry =
  | { kind: 'user'; content: ContentBlock[] }
  | { kind: 'assistant'; id: string; content: ContentBlock[]; stopReason: SubagentStopReason }
  /** The results of one assistant message's tool calls, in call order. */
  | { kind: 'tool'; results: ToolResultBlock[] };

/** Token counts reported by the model endpoint. */
export interface SubagentUsage {
  promptTokens: number;
  completionTokens: number;
}

/** Input of the `subagentTurn` activity: one turn of a turn-based provider. */
export interface TurnActivityInput {
  provider: string;
  runId: string;
  segment: number;
  /** Turn number over the child's whole life (resumes continue the count). */
  turn: number;
  /** The user messages this turn answers: the prompt, steering messages or resume content, in order. */
  input: ContentBlock[][];
  /**
   * The conversation recorded before this turn, by reference: its length and the id of its last
   * assistant entry. A worker whose cache does not match exactly fetches it from the workflow.
   */
  transcript: { length: number; lastAssistantId?: string };
  /** Sent with a run's first turn only; later turns read it from the worker's cache or the workflow. */
  request?: ResolvedSubagentRequest;
  /** What the provider's previous turn left for it (`providerState`). */
  providerState?: JsonValue;
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
  kind?: string;
  decision: 'allowed' | 'rejected';
  optionId?: string;
}

export interface TurnActivityResult extends SubagentTurnResult {
  /** Names this output in the conversation, so a worker can tell whether its cache is current. */
  outputId: string;
  /** How many waiting messages the turn took mid-turn (`takeMessages`), oldest first. */
  consumedMessages: number;
}

/** Input of the `subagentModelCall` activity: one model call of an agent-loop provider. */
export interface ModelCallInput {
  provider: string;
  runId: string;
  segment: number;
  turn: number;
  /** The conversation up to the last assistant message, by reference (see `TurnActivityInput`). */
  transcript: { length: number; lastAssistantId?: string };
  /** What came after it: tool results and user messages, in order. */
  delta: TranscriptEntry[];
  /** Sent with the run's first model call only. */
  request?: ResolvedSubagentRequest;
}

/** A tool call the model made; `answer` is set when the model-call activity already answered it. */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
  answer?: { content: ContentBlock[]; isError: boolean };
}

export interface ModelCallResult {
  outputId: string;
  /** The assistant message: text blocks, then one tool-call block per call. */
  content: ContentBlock[];
  /** `completed` when the model stopped or called tools; `max-tokens`, `refusal` or `error` otherwise. */
  stopReason: SubagentStopReason;
  diagnostic?: string;
  toolCalls: ModelToolCall[];
  /** A value captured by `structured_output` in this response; it ends the turn. */
  structured?: unknown;
  usage?: SubagentUsage;
}

/** Input of a tool activity (its type is the tool's name). */
export interface ToolActivityInput {
  provider: string;
  runId: string;
  callId: string;
  arguments: string;
  cwd?: string;
  /** The run as a parent, for tools that delegate: its depth, its cap, its model. */
  delegation: { depth: number; maxDepth?: number; model?: string };
}

/** What `runContextQuery` returns: the run's request and its whole conversation. */
export interface RunContextSnapshot {
  request: ResolvedSubagentRequest;
  entries: TranscriptEntry[];
}
