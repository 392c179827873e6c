// A live run as the caller holds it, and what the service's events say about runs.
import type { ContentBlock } from './content';
import type { SubagentError } from './errors';
import type {
  SubagentApprovalDecision,
  SubagentApprovalRequest,
  SubagentResult,
  SubagentStopReason,
  SubagentUsage,
} from './result';

/** The child agent's id; for a durable run, its workflow id. */
export type AgentId = string;

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
  /**
   * Present on durable runs: the run's progress events from `options.from` on, across every
   * segment, as they happen. Any process can read them (`attach(id).events()`), and a reader that
   * restarts from its last offset + 1 misses none and sees none twice.
   */
  events?(options?: SubagentRunEventsOptions): AsyncIterable<SubagentRunEvent>;
  /**
   * Present on durable runs: answers a tool call held for approval, this run's or that of any run
   * below it (`approval-requested` events name them). Resolves with the request's decision: this
   * one, or the one made before it (another answer, or the timeout's denial).
   */
  approve?(requestId: string, answer: SubagentApprovalAnswer): Promise<SubagentApprovalDecision>;
}

/** An answer to an approval request: a decision, with a reason the child (or the audit) reads. */
export type SubagentApprovalAnswer = 'allow' | 'deny' | { decision: 'allow' | 'deny'; reason?: string };

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

/** A message `sendMessage` gave up on: the run was gone, or the server stayed away too long. */
export interface SubagentMessageUndeliveredInfo extends SubagentRunInfo {
  content: ContentBlock[];
  /** `UNKNOWN_RUN` for a run that no longer exists, `UNAVAILABLE` for a server out of reach. */
  error: SubagentError;
}

export interface SubagentLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}

/**
 * What a run is doing, as its history records it: one of these per step, in order. A streaming
 * model call's text comes in batches as it is generated (`text-delta`; a retried call's attempt
 * streams again from the start), then whole once the call answered (`text`, which supersedes them).
 * The child's reasoning, where its model or agent shows it, comes the same way, before its text
 * (`reasoning-delta`, then `reasoning`).
 */
export type SubagentProgress =
  | { type: 'turn-start'; turn: number }
  | { type: 'reasoning-delta'; turn: number; attempt: number; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'text-delta'; turn: number; attempt: number; text: string }
  | { type: 'text'; text: string }
  | { type: 'tool-call-start'; callId: string; tool: string; arguments: string }
  /** `summary`: the start of the tool's text output (at most 200 characters). */
  | { type: 'tool-call-end'; callId: string; tool: string; isError: boolean; summary: string }
  /** Tokens of one model call. */
  | { type: 'usage'; promptTokens: number; completionTokens: number }
  | { type: 'turn-end'; turn: number; stopReason: SubagentStopReason; diagnostic?: string }
  /** A steering message reached the run (it waits for the child's next turn boundary). */
  | { type: 'message'; content: ContentBlock[] }
  /** A tool call waits for `approve` until `deadline` (epoch ms), when it is denied. */
  | ({ type: 'approval-requested' } & SubagentApprovalRequest)
  /** The approval was answered, timed out, or its turn stopped first. */
  | ({ type: 'approval-decided' } & SubagentApprovalDecision)
  /** The run delegated to a nested run. */
  | { type: 'child-start'; childId: AgentId }
  /** A segment of a nested run settled (each segment once, as the nested run told its parent). */
  | { type: 'child-settled'; childId: AgentId; segment: number; stopReason: SubagentStopReason }
  | { type: 'settled'; segment: number; result: SubagentResult }
  | { type: 'resumed'; segment: number }
  /** The run ended for good: it settled without resume, or was disposed, cancelled, expired or terminated. */
  | { type: 'closed'; closedBy: string };

/** A progress event of one run, at its place in the run's stream. */
export type SubagentRunEvent = SubagentProgress & {
  /**
   * The event's place in the run's stream: 0, 1, 2, ... across resumes and continue-as-new. A
   * reader that stopped after offset `n` continues with `events({ from: n + 1 })`.
   */
  offset: number;
  runId: AgentId;
  /** The run's delegation depth (1 for a child of the root agent). */
  depth: number;
  /** When the history recorded it (ISO 8601). */
  time: string;
};

export interface SubagentRunEventsOptions {
  /**
   * Where to begin: the first offset to yield (default 0); with `nested`, the first offset of each
   * run by id (a run not named begins at 0). A reader keeps `cursor[event.runId] = event.offset + 1`.
   */
  from?: number | Readonly<Record<AgentId, number>>;
  /** Wait for events yet to come until the run closes (default true); false ends at what exists now. */
  follow?: boolean;
  /**
   * The events of the runs this run delegated to as well, and of theirs, each tagged with its run
   * and depth and numbered in its own run's stream. A followed stream ends with the run's close.
   */
  nested?: boolean;
  /**
   * Stops the reading: once it aborts, the events end (the iteration is done), a read waiting for
   * the run's next event given up. A reader that leaves a quiet run (parked, or in a long turn)
   * otherwise waits on the server until the run's next event, for days maybe: an async
   * iterator's `return()` waits for the `next()` in flight.
   */
  signal?: AbortSignal;
}
