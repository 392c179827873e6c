// The workflows' contracts with everything outside them: the run workflow's one input and its
// result, the state it carries through continue-as-new, and the signals, updates and queries
// clients and workers send it; the token limiter's; and the options a run's settings give its
// activities. Plain data, no workflow logic: the caller's side imports this module, never the
// workflows' code.
import {
  type ActivityOptions,
  ActivityCancellationType,
  type Sinks,
  defineQuery,
  defineSignal,
  defineUpdate,
} from '@temporalio/workflow';
import type {
  RequestApprovalArgs,
  ReserveTokensArgs,
  RunContextSnapshot,
  TextDeltaArgs,
  TokenQuota,
} from '../activities/types';
import type { ContentBlock, JsonValue } from '../src/seam/content';
import type { ResolvedSubagentBudget, ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type {
  SubagentApprovalDecision,
  SubagentApprovalRequest,
  SubagentPermissionDecision,
  SubagentResult,
  SubagentSpend,
  SubagentStopReason,
  SubagentUsage,
} from '../src/seam/result';

/** The workflow type name, as clients start it without loading the workflow's code. */
export const SUBAGENT_RUN_WORKFLOW = 'subagentRunWorkflow';

/** Run settings with every default resolved by the facade; durations in milliseconds. */
export interface ResolvedRunSettings {
  resumeWindowMs: number;
  turnStartToCloseMs: number;
  turnHeartbeatMs: number;
  turnRetry: {
    initialIntervalMs: number;
    backoffCoefficient: number;
    maximumIntervalMs: number;
    maximumAttempts: number;
    nonRetryableErrorTypes: string[];
  };
  /** Structured runs: turns that ask a child which finished without a capture to call the tool. */
  structuredNudgeRetries: number;
  /** Agent-loop runs: model calls allowed in one turn before it ends with `error`. */
  maxStepsPerTurn: number;
  /** Largest state a continue-as-new may carry (Temporal refuses payloads over 2 MiB). */
  maxPayloadBytes: number;
  /** How long a tool call waits for its approval before it is denied (runs since approvals exist). */
  approvalTimeoutMs?: number;
}

/**
 * The options of a run's activities (its turns, model calls and tools), from its settings. The
 * benchmark's bare workflows take the same, so both sides pay for the same timeouts and retries.
 */
export function turnActivityOptions(settings: ResolvedRunSettings): ActivityOptions {
  return {
    startToCloseTimeout: settings.turnStartToCloseMs,
    heartbeatTimeout: settings.turnHeartbeatMs,
    // The workflow waits until the provider has really stopped before it settles `aborted`.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      initialInterval: settings.turnRetry.initialIntervalMs,
      backoffCoefficient: settings.turnRetry.backoffCoefficient,
      maximumInterval: settings.turnRetry.maximumIntervalMs,
      maximumAttempts: settings.turnRetry.maximumAttempts,
      nonRetryableErrorTypes: settings.turnRetry.nonRetryableErrorTypes,
    },
  };
}

export interface SubagentRunInput {
  provider: string;
  /** `turns`: one activity per turn; `agent-loop`: one per model call and per tool call. */
  driver: 'turns' | 'agent-loop';
  request: ResolvedSubagentRequest;
  settings: ResolvedRunSettings;
  /** Whether the provider takes steering messages; if not, messages are counted and dropped. */
  steering: boolean;
  /** The provider takes messages inside its turns: one left over after a turn waits for `resume`. */
  steeringWithinTurn?: boolean;
  /** Whether a settled segment parks for `resume`; if not, the run closes when it settles. */
  resumable: boolean;
  /** Agent-loop providers with a rate-limited endpoint: the queue their model calls go to. */
  modelTaskQueue?: string;
  /** The caller cancelled before the run began: settle `aborted` without calling the provider. */
  abortedAtStart?: boolean;
  /** The caller disposed the run before it began: settle `error` without calling the provider. */
  disposedAtStart?: boolean;
  /** State carried through continue-as-new; absent on a fresh start. */
  carried?: SubagentRunCarry;
}

export interface SubagentRunCarry {
  segment: number;
  turn: number;
  transcript: TranscriptEntry[];
  /** User messages for the next turn: undelivered steering, then the resume content. */
  pending: ContentBlock[][];
  usage: SubagentUsage;
  providerState?: JsonValue;
  droppedMessages: number;
  /** Runs this run's turns started (nested delegations); cancelled with it. */
  children: string[];
  /**
   * Set when a segment continued as new between two of its turns, or (with `turn`) between two
   * model calls of an agent-loop turn.
   */
  midSegment?: { nudgesLeft: number; lastOutput: ContentBlock[]; turn?: { turn: number; step: number; base: number } };
  /** Ids of the latest messages received, so a retried signal is counted once across it too. */
  messageIds?: string[];
  /** The outcome of the segment this one resumed, for an observer that missed its settling. */
  previous?: SegmentOutcome;
  /** The `resumeId` of the resume that began this segment. */
  resumedBy?: string;
  /** Model calls and their cost so far, and what the runs below reported (runs since budgets exist). */
  modelCalls?: number;
  costUsd?: number;
  childSpend?: Record<string, SubagentSpend>;
}

export interface SegmentOutcome {
  segment: number;
  result: SubagentResult;
  /** Epoch ms until which `resume` is accepted; absent when the run closes instead of parking. */
  resumableUntil?: number;
  /** Tokens the model endpoint reported over the whole run so far (agent-loop providers). */
  usage?: SubagentUsage;
  /** What the run and every run below it spent so far (runs since budgets exist). */
  spend?: SubagentSpend;
}

export type SegmentResultReply = { settled: SegmentOutcome } | { moved: true };

/** Where the run's segments stand, as an observer reads them without touching the run. */
export interface SegmentOutcomeReply {
  /** The current segment. */
  segment: number;
  /** Its outcome, once it has settled. */
  settled?: SegmentOutcome;
  /** A resume was accepted: segment `segment + 1` follows in the next run of the workflow. */
  resuming: boolean;
  /** The outcome of the segment before, when this one resumed it. */
  previous?: SegmentOutcome;
}

export type SubagentRunClosedBy = 'disposed' | 'cancelled' | 'expired' | 'settled';

/** The workflow's own result: the last segment's outcome and why the run closed. */
export interface SubagentRunOutcome extends SegmentOutcome {
  closedBy: SubagentRunClosedBy;
  /** Steering messages that arrived after the last segment settled and were never resumed. */
  undeliveredMessages: number;
  /** The outcome of the segment the last one resumed (runs that closed since this field exists). */
  previous?: SegmentOutcome;
}

export interface SubagentRunStatus {
  provider: string;
  segment: number;
  phase: 'running' | 'parked' | 'closing';
  /** Turns begun over the child's life. */
  turns: number;
  pendingMessages: number;
  droppedMessages: number;
  usage: SubagentUsage;
  /** Leading conversation entries inherited from the parent (fork), not the child's own. */
  seedLength: number;
  depth: number;
  /** The run that delegated this one, when it was started from inside a run. */
  parentRunId?: string;
  /** Runs this run's turns started. */
  children: string[];
  resumableUntil?: number;
  lastResult?: SubagentResult;
  /** Tool calls parked until someone approves or denies them (runs since approvals exist). */
  pendingApprovals?: SubagentApprovalRequest[];
  /** What the run and every run below it spent so far, and what remains of its budget (runs since budgets exist). */
  spend?: SubagentSpend;
  /** What the run itself spent, without the runs below it (answered by workers since it exists). */
  ownSpend?: SubagentSpend;
  budgetLeft?: ResolvedSubagentBudget;
}

export interface SendMessageArgs {
  content: ContentBlock[];
  /** The sender's id for this message: a signal retried after a lost response counts once. */
  id?: string;
}

export interface ResumeArgs {
  fromSegment: number;
  content: ContentBlock[];
  /**
   * The caller's id of this resume. The same resume sent again after it began its segment (its
   * answer lost to a fault, and the run continued as new meanwhile) is answered, not refused.
   */
  resumeId?: string;
  /** The caller cancelled before the resume was sent: the new segment settles `aborted` at once. */
  abortedAtStart?: boolean;
  /** The caller disposed the new segment before the resume was sent: it settles `error` at once. */
  disposedAtStart?: boolean;
}

/** How a segment stopped before it settled, or before it began, ends. */
export const DISPOSED_BEFORE_SETTLING = 'the run was disposed before it settled';
export const DISPOSED_BEFORE_BEGINNING = 'the run was disposed before it began';

/** The user message of a nudge turn. */
export const STRUCTURED_OUTPUT_NUDGE =
  'You finished without calling `structured_output`. Call `structured_output` now with your final result matching its parameter schema.';

/**
 * Answers a pending approval request; refused (`UNKNOWN_APPROVAL`) for a request the run never
 * made. A request decided already answers with that decision, whoever made it.
 */
export const approveUpdate = defineUpdate<SubagentApprovalDecision, [ApproveArgs]>('approve');
/**
 * Sent by a turn's activity to its own run when its provider asks for an approval (an ACP
 * permission request its policy does not decide); answers once it is decided. The same request
 * (`key`) asked again in the same turn, by a retried attempt, joins the first.
 */
export const requestApprovalUpdate = defineUpdate<SubagentApprovalDecision, [RequestApprovalArgs]>('requestApproval');

export interface ApproveArgs {
  requestId: string;
  decision: 'allow' | 'deny';
  reason?: string;
}

/** The memo key whose every change (a request, a decision) is one history event `run.events()` reads. */
export const APPROVAL_MEMO_KEY = 'approval';

/**
 * The memo key whose change records a segment's settle point (its `SegmentOutcome`), for an
 * outcome of at most `SETTLED_MEMO_MAX_BYTES`; a larger one is a local activity's marker, so no
 * large payload reaches the visibility store, which keeps every run's memo.
 */
export const SETTLED_MEMO_KEY = 'settled';
export const SETTLED_MEMO_MAX_BYTES = 2048;

/** One change of an approval, as the memo records it: the request, then its decision. */
export type ApprovalMemo =
  ({ state: 'requested' } & SubagentApprovalRequest) | ({ state: 'decided' } & SubagentApprovalDecision);

export const sendMessageSignal = defineSignal<[SendMessageArgs]>('sendMessage');
/**
 * Sent by a turn's activity to its own run for each permission decision, as it is made: the
 * decision is in history (and the audit) on every path the turn may take afterwards.
 */
export const permissionDecidedSignal = defineSignal<[SubagentPermissionDecision]>('permissionDecided');
/**
 * Sent by a streaming model call to its own run with each batch of text: the batch is then in
 * history, where `run.events()` reads it, and no worker crash can take it back.
 */
export const textDeltaSignal = defineSignal<[TextDeltaArgs]>('textDelta');
/** Sent by a nested run to its parent run when it starts, so the parent can cancel it. */
export const childStartedSignal = defineSignal<[{ runId: string }]>('childStarted');
/** Sent by a nested run to its parent run when a segment of it settles: the parent's `child-settled` event. */
export const childSettledSignal = defineSignal<[ChildSettledArgs]>('childSettled');
export interface ChildSettledArgs {
  runId: string;
  segment: number;
  stopReason: SubagentStopReason;
}
/**
 * Resolves with segment `segment` (default: the current one) once it settles. Callers of this
 * version read outcomes with `segmentOutcomeQuery` instead; the handler stays for older callers.
 */
export const segmentResultUpdate = defineUpdate<SegmentResultReply, [{ segment?: number }]>('segmentResult');
export const resumeUpdate = defineUpdate<{ segment: number }, [ResumeArgs]>('resume');
/**
 * Ends the run if `segment` is still its current one. Since the `dispose-answers-at-once` patch it
 * answers as soon as the segment is told to stop; the caller then waits for the run to close.
 */
export const disposeUpdate = defineUpdate<{ disposed: boolean }, [{ segment: number }]>('dispose');
/**
 * Always refused, so it writes nothing; it only makes the server run a workflow task now. A run
 * that continued as new within a second of its start waits out the server's minimal interval
 * before its first task (`history.workflowIdReuseMinimalInterval`, 1 s); the resuming caller sends
 * this so the resumed segment starts at once.
 */
export const wakeUpdate = defineUpdate<void, []>('wake');
export const statusQuery = defineQuery<SubagentRunStatus>('status');
/**
 * Where the segments stand, asked once by an observer that joins (and by one on a server that
 * shows no history); writes nothing. Observers otherwise read the settle point in history.
 */
export const segmentOutcomeQuery = defineQuery<SegmentOutcomeReply>('segmentOutcome');
/**
 * What a worker that lacks the conversation in its cache fetches; writes nothing to history. Asked
 * without arguments, as workers from before pages ask: the request and the whole conversation in
 * one answer, which the server refuses past 2 MiB. Workers ask for pages.
 */
export const runContextQuery = defineQuery<RunContextSnapshot>('runContext');
/**
 * The same query asked for a page (`QueryPageArgs`); a workflow worker from before pages answers
 * the whole, as without arguments.
 */
export const runContextPageQuery = defineQuery<RunContextPage | RunContextSnapshot, [QueryPageArgs]>('runContext');
/** The messages waiting for the child, for a provider that takes them mid-turn (ACP): all of them. */
export const pendingMessagesQuery = defineQuery<ContentBlock[][]>('pendingMessages');
/** The same query asked for a page; a workflow worker from before pages answers all of them. */
export const pendingMessagesPageQuery = defineQuery<PendingMessagesPage | ContentBlock[][], [QueryPageArgs]>(
  'pendingMessages',
);

/** Which page of a list a query answers: from position `from`, at most about `maxBytes` of JSON. */
export interface QueryPageArgs {
  from: number;
  /**
   * The page's JSON in bytes, at most; a page holds at least one item (or the request) whatever
   * its size, so a reader always moves on.
   */
  maxBytes: number;
  /** `runContext` only: the page begins with the run's request (its size counts against `maxBytes`). */
  request?: boolean;
}

/** A page of the run's conversation: `entries` from the page's `from`, of `total`. */
export interface RunContextPage {
  request?: ResolvedSubagentRequest;
  entries: TranscriptEntry[];
  total: number;
  /** The Temporal run that answered: a reader whose pages come from two runs (a reset) reads again. */
  runId: string;
}

/** A page of the messages waiting for the child: `messages` from the page's `from`, of `total`. */
export interface PendingMessagesPage {
  messages: ContentBlock[][];
  total: number;
  runId: string;
}

/**
 * What the run workflow tells the worker it runs on, outside history (a sink: never recorded, not
 * called on replay): the user messages it appends to the conversation, so that an activity this
 * worker runs next reads them from its cache instead of asking the workflow.
 */
export interface SubagentSinks extends Sinks {
  subagentConversation: {
    /** `entries` now stand at `position` of the conversation of the workflow run calling. */
    userEntries(position: number, entries: TranscriptEntry[]): void;
  };
}

/** The token limiter's workflow type name (workflows/token-limiter.ts). */
export const TOKEN_LIMITER_WORKFLOW = 'tokenLimiterWorkflow';

/** The one token limiter of a provider's endpoint, which every worker of the fleet reserves from. */
export function tokenLimiterId(provider: string): string {
  return `subagents-token-limiter:${provider}`;
}

/** A token bucket: `level` tokens at `at` (epoch ms); below 0 it is owed to calls already scheduled. */
export interface TokenBucketState {
  level: number;
  at: number;
}

export interface TokenLimiterInput {
  /** Carried through continue-as-new; a new limiter starts full. */
  bucket?: TokenBucketState;
}

/**
 * Takes `tokens` from the endpoint's bucket for one model call and answers when the call may be
 * sent (`startAt`, epoch ms: now, or once the bucket has refilled what it owes). Refused for a call
 * larger than the bucket, which no wait would let through. The newest quota declared applies, so a
 * fleet rolled out with a new quota moves to it.
 */
export const reserveTokensUpdate = defineUpdate<{ startAt: number }, [ReserveTokensArgs]>('reserveTokens');
/** Takes what a call used beyond its reservation (its reported usage was larger than the estimate). */
export const chargeTokensSignal = defineSignal<[TokenQuota & { tokens: number }]>('chargeTokens');

/** Message ids a run remembers against retried signals: a retry comes within a reconnect window, not 1,000 messages later. */
export const REMEMBERED_MESSAGE_IDS = 1000;

/**
 * Remembers message id `id` in `ids` as a run does, and as its readers must to agree with it: the
 * newest 1,000, the oldest forgotten first. False when `id` is remembered already: the same
 * message, sent again after its sender lost the response.
 */
export function rememberMessageId(ids: Set<string>, id: string): boolean {
  if (ids.has(id)) return false;
  ids.add(id);
  if (ids.size > REMEMBERED_MESSAGE_IDS) ids.delete(ids.values().next().value!);
  return true;
}
