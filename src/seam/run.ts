// A live run as the caller holds it, and what the service's events say about runs.
import type { ContentBlock } from './content';
import type { SubagentError } from './errors';
import type { SubagentStopReason, SubagentResult, SubagentUsage } from './result';

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

/** A message `sendMessage` gave up on: the run was gone, or the server stayed away too long. */
export interface SubagentMessageUndeliveredInfo extends SubagentRunInfo {
  content: ContentBlock[];
  /** `UNKNOWN_RUN` for a run that no longer exists, `UNAVAILABLE` for a server out of reach. */
  error: SubagentError;
}

export interface SubagentLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}
