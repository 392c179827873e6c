// The seam's vocabulary as callers use it. The serialisable part is shared with workflows and
// activities (activities/contracts.ts); what holds live objects (signals, handles) is defined here.
import type { ContentBlock, SubagentResult, SubagentStopReason, SubagentToolFilter, SubagentUsage } from '../activities/contracts';
import type { SubagentCapabilities } from '../activities/provider';

export type {
  ContentBlock,
  ContentBlockMap,
  JsonObject,
  JsonValue,
  ReasoningBlock,
  ResolvedSubagentRequest,
  SubagentParentRef,
  SubagentResult,
  SubagentStopReason,
  SubagentStopReasonMap,
  SubagentToolFilter,
  SubagentTurnResult,
  SubagentUsage,
  TextBlock,
  ToolCallBlock,
  ToolResultBlock,
  TranscriptEntry,
} from '../activities/contracts';
export type {
  SubagentAgentProvider,
  SubagentCapabilities,
  SubagentDuration,
  SubagentHostedProvider,
  SubagentModelEndpoint,
  SubagentProviderDescriptor,
  SubagentRunSettings,
  SubagentNestedStartRequest,
  SubagentTool,
  SubagentToolContext,
  SubagentTurnContext,
  SubagentTurnProvider,
} from '../activities/provider';

/** The child agent's id; for a durable run, its workflow id. */
export type AgentId = string;

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
}

/**
 * One event of the parent's session log, in the seam's shape. Fork reads `user/message`,
 * `assistant/message` and `tool/result` (their `data.content`, and `data.callId` / `data.isError`
 * for results) up to the last `turn/end`; other types are skipped.
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
}

/** A live run: one segment of a durable child (the start, or one resume). */
export interface SubagentRun {
  readonly id: AgentId;
  /** Resolves with a stop reason for every child-level outcome; rejects only on infrastructure faults. */
  readonly result: Promise<SubagentResult>;
  cancel(reason?: string): void;
  /** Idempotent; resolves once the child has stopped. Call it on every path. */
  dispose(): Promise<void>;
  /** Present when the provider takes steering: the message reaches the child at its next turn boundary. */
  sendMessage?(content: ContentBlock[]): void;
  /** Present when the provider can resume: continues the settled child and returns the new segment's run. */
  resume?(content: ContentBlock[]): SubagentRun;
}

/** The seam's provider: the in-process shape that `hostSeamProvider` runs inside a worker. */
export interface SubagentProvider {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  readonly inheritsParentContext: boolean;
  start(request: SubagentStartRequest): SubagentRun;
}

export interface SubagentRunInfo {
  provider: string;
  id: AgentId;
  /** 0 for the start, then one more per resume. */
  segment: number;
}

export interface SubagentRunEndInfo extends SubagentRunInfo {
  stopReason: SubagentStopReason;
  /** A deep clone of `result.output`; absent when the result rejected or could not be cloned. */
  lastAssistantMessage?: ContentBlock[];
  /** Tokens the model endpoint reported over the run so far (providers that call a model). */
  usage?: SubagentUsage;
}

export interface SubagentLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}
