// Providers in the seam's terms: what the facade knows of one (its descriptor and capabilities),
// the seam's in-process provider, and what a worker hosts so durable runs can use it: a provider
// that runs its child one turn at a time, or an LLM child whose loop the run workflow drives.
import type { ContentBlock, JsonValue } from './content';
import type {
  ResolvedSubagentRequest,
  SubagentNestedStartRequest,
  SubagentStartRequest,
  TranscriptEntry,
} from './request';
import type { SubagentApprovalDecision, SubagentPermissionDecision, SubagentTurnResult } from './result';
import type { SubagentRun } from './run';
import type { StructuredOutputRuntime } from './structured';
import type { SubagentTool } from './tool';

export interface SubagentCapabilities {
  outputSchema: boolean;
  depthLimit: boolean;
  toolFilter: boolean;
}

/** Durations in milliseconds or as Temporal duration strings ('10s', '30 minutes'). */
export type SubagentDuration = number | string;

/** Per-run Temporal settings; every field has a documented default (docs/operations.md, Settings). */
export interface SubagentRunSettings {
  /** How long a settled run stays resumable. Default 24 hours. */
  resumeWindow?: SubagentDuration;
  /** Start-to-close timeout of one turn activity. Default 30 minutes. */
  turnTimeout?: SubagentDuration;
  /** A turn whose worker stops heartbeating this long is retried elsewhere. Default 10 seconds. */
  heartbeatTimeout?: SubagentDuration;
  retry?: {
    initialInterval?: SubagentDuration;
    backoffCoefficient?: number;
    maximumInterval?: SubagentDuration;
    /** Attempts per turn, counting crashes of the worker. Default 10. */
    maximumAttempts?: number;
    /** Failure types never retried, besides NO_PROVIDER, PAYLOAD_TOO_LARGE and INVALID_REQUEST. */
    nonRetryableErrorTypes?: string[];
  };
  /**
   * Structured runs: extra turns that ask a child which finished without calling
   * `structured_output` to call it. Default 1; 0 settles `error` at once.
   */
  structuredNudgeRetries?: number;
  /** Agent-loop providers: model calls allowed in one turn before it ends with `error`. Default 200. */
  maxStepsPerTurn?: number;
  /**
   * How long a tool call held for approval waits for an answer before it is denied. Default 24
   * hours. A turn-based provider's request (ACP) waits inside its turn, so `turnTimeout` bounds it too.
   */
  approvalTimeout?: SubagentDuration;
}

/**
 * What the facade knows of a provider: enough to validate a request before any run exists and to
 * route it. Workers host the implementation (`SubagentTurnProvider`) under the same name.
 */
export interface SubagentProviderDescriptor {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  /** Descriptive: whether the child sees the parent's conversation (fork) or not (spawn). */
  readonly inheritsParentContext: boolean;
  /** Runs take `sendMessage`: messages reach the child at its next turn boundary. */
  readonly steering?: boolean;
  /**
   * The provider hands messages to its child inside its turn (`context.takeMessages()`, at
   * boundaries of its own), as ACP does between prompts. A message that arrives after its last
   * boundary waits for `resume`, as one that arrives after the result does, instead of starting
   * another turn of a child that may not survive one (an ACP agent without `session/load`).
   */
  readonly steeringWithinTurn?: boolean;
  /** Settled runs park for `resume`, which continues the same child. */
  readonly resumable?: boolean;
  /**
   * How the run workflow drives it: `turns` (default) runs one activity per turn; `agent-loop`
   * runs the model call and every tool call as activities of their own.
   */
  readonly driver?: 'turns' | 'agent-loop';
  /** Names of the tools the child can call; `toolFilter` may name only these. */
  readonly toolNames?: readonly string[];
  /** The task queue of the workers hosting it; default `subagents.<name>`. */
  readonly taskQueue?: string;
  /** Overrides of the service's run settings for this provider. */
  readonly runSettings?: SubagentRunSettings;
}

/** The seam's provider: the in-process shape that `hostSeamProvider` runs inside a worker. */
export interface SubagentProvider {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  readonly inheritsParentContext: boolean;
  start(request: SubagentStartRequest): SubagentRun;
}

export interface SubagentTurnContext {
  readonly runId: string;
  readonly segment: number;
  readonly turn: number;
  /** 1 on the first try; higher after a crash or a retryable failure. */
  readonly attempt: number;
  readonly request: ResolvedSubagentRequest;
  /** Aborts when the run is cancelled or disposed; wire it into every call the turn makes. */
  readonly signal: AbortSignal;
  /** The conversation before this turn (earlier prompts, messages and outputs, all segments). */
  transcript(): Promise<readonly TranscriptEntry[]>;
  /** What the provider's previous turn (or segment) returned as `providerState`. */
  readonly providerState: JsonValue | undefined;
  /**
   * Messages sent to the run since this turn began, oldest first, each handed out once: a
   * provider that runs several prompts in one turn (ACP) takes them at its own boundaries.
   * Messages left untaken start the next turn.
   */
  takeMessages(): Promise<ContentBlock[][]>;
  /** Record progress; retries read it back as `lastHeartbeat`. The host heartbeats on its own too. */
  heartbeat(details?: unknown): void;
  /**
   * Records a permission decision in the run's history at once (a signal), before the provider
   * answers the agent: it stays in the audit whatever becomes of the turn. Resolves once recorded.
   */
  recordPermission?(decision: SubagentPermissionDecision): Promise<void>;
  /**
   * Asks for an approval of a tool call and resolves with the decision: the run's status says
   * `awaiting-approval` until someone answers (`SubagentRun.approve`) or the timeout denies. The
   * same request asked again in the turn (by a retried attempt) gets the same answer. Absent
   * where the host cannot ask.
   */
  requestApproval?(call: { tool: string; arguments: string; kind?: string }): Promise<SubagentApprovalDecision>;
  /**
   * Hands text the child is generating to the run's observers as it comes (`text-delta` events,
   * batched, ever further apart in a long turn and up to a budget per attempt: the worker's
   * `textBatches`); the turn's output still carries the whole. Absent where nothing is published.
   */
  streamText?(delta: string): void;
  /**
   * Hands the child's reasoning (its thinking, where the agent shows it) to the run's observers as
   * it comes (`reasoning-delta` events, in the same batches as the text). Absent where nothing is published.
   */
  streamReasoning?(delta: string): void;
  readonly lastHeartbeat: unknown;
  /**
   * Present when the run asked for structured output (and the provider declares the
   * capability): the `structured_output` tool and its capture. A captured value becomes the
   * segment's `structured` result and ends it.
   */
  readonly structuredOutput?: StructuredOutputRuntime;
  /**
   * Present when the worker offers its service: starts a nested run with this run as its parent
   * (depth + 1, a link back, this run's cwd, its `maxDepth`, which the request can only narrow, and its
   * completed turns, the conversation before this turn, which a fork is seeded with). The
   * provider awaits and disposes it. The nested run is cancelled with this turn when the run
   * cancels the turn, not when an attempt times out. A request without an `idempotencyKey` gets
   * one from this turn's activity, the provider, the request and how many identical ones the
   * attempt made before: a retried turn that delegates the same again joins the run its earlier
   * attempt started, running or closed.
   */
  delegate?(provider: string, request: SubagentNestedStartRequest): SubagentRun;
}

/** USD per million tokens, prompt (input) and completion (output), by model name. */
export type SubagentModelPrices = Readonly<
  Record<string, { readonly inputPerMillionTokens: number; readonly outputPerMillionTokens: number }>
>;

/** Where an agent-loop provider's model lives: any OpenAI-compatible chat-completions endpoint. */
export interface SubagentModelEndpoint {
  baseURL?: string;
  apiKey?: string;
  /** Used when neither `agentOptions.model` nor the parent's model is set. */
  model?: string;
  maxTokens?: number;
  /**
   * The longest one model call may take, its answer's body (a stream's last event) included; past
   * it the call is cut off and retried as an unreachable endpoint is. Default: the `openai`
   * client's 10 minutes for the response's headers, and the turn's timeout for the rest.
   */
  timeoutMs?: number;
  /**
   * The most conversation one call sends, in characters: past it, the oldest tool outputs are
   * sent as a note saying they were left out (the newest stay whole), so a turn of any length
   * fits the model's window. History keeps every output whole. Default: no limit.
   */
  maxContextChars?: number;
  /**
   * The endpoint's quota, shared by every worker of the fleet: model calls go to a queue of their
   * own (`modelTaskQueue`), which the Temporal server hands out at this rate, so no worker asks
   * past it. A 429 is still waited out as the endpoint says. Default: no limit.
   */
  requestsPerMinute?: number;
  /**
   * The endpoint's token quota, shared by every worker of the fleet through one limiter workflow
   * per provider: each call reserves its estimate (the request's characters over four, plus
   * `maxTokens`, or 1,024 without it) from a bucket that refills at this rate, and leaves once the
   * bucket covers it. A call that reports more than its estimate is charged the rest. A 429 is still
   * waited out as the endpoint says. Default: no limit.
   */
  tokensPerMinute?: number;
  /** The most tokens the endpoint takes at once (its bucket's size). Default: `tokensPerMinute`. */
  tokenBurst?: number;
  /**
   * Stream each call (server-sent events) and hand its text to the run's observers as it comes
   * (`text-delta` progress events). Default true; false for an endpoint that cannot stream.
   */
  stream?: boolean;
}

/**
 * An LLM child whose loop the run workflow drives: each model call is a `subagentModelCall`
 * activity, each tool call an activity named after the tool.
 */
export interface SubagentAgentProvider extends SubagentProviderDescriptor {
  readonly driver: 'agent-loop';
  readonly endpoint: SubagentModelEndpoint;
  readonly systemPrompt: string;
  readonly tools: readonly SubagentTool[];
}

/** What a worker can host. */
export type SubagentHostedProvider = SubagentTurnProvider | SubagentAgentProvider;

/**
 * A provider implementation hosted by a worker. `runTurn` answers the user messages of one turn.
 * It resolves with a stop reason for every child-level outcome, failures included. A throw means
 * "retry this turn" (bounded by the run's retry policy) unless it is an `ApplicationFailure`
 * marked non-retryable, which ends the segment with `error` at once.
 */
export interface SubagentTurnProvider extends SubagentProviderDescriptor {
  readonly driver?: 'turns';
  runTurn(input: ContentBlock[][], context: SubagentTurnContext): Promise<SubagentTurnResult>;
}
