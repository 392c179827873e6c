// One subagent run = one workflow. A run is a chain of segments: the start, then one per resume.
// Each segment drives turns of the provider (workflows/turns.ts) until the child stops with no
// steering message waiting, settles a SubagentResult, then parks for the resume window. A resume
// continues the same workflow id as new, carrying the conversation; cancel and dispose end the
// run. A long segment continues as new between turns when the server suggests it.
import {
  ActivityCancellationType,
  ActivityOptions,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  defineQuery,
  defineSignal,
  defineUpdate,
  getExternalWorkflowHandle,
  isCancellation,
  makeContinueAsNewFunc,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type {
  ContentBlock,
  JsonValue,
  ResolvedSubagentRequest,
  RunContextSnapshot,
  SubagentResult,
  SubagentTurnResult,
  SubagentUsage,
  TranscriptEntry,
} from '../activities/contracts';
import { PROVIDER_ATTRIBUTE, STATUS_ATTRIBUTE, STOP_REASON_ATTRIBUTE } from './search-attributes';
import { RunState, turnRunner } from './turns';

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
}

export interface SubagentRunInput {
  provider: string;
  /** `turns`: one activity per turn; `agent-loop`: one per model call and per tool call. */
  driver: 'turns' | 'agent-loop';
  request: ResolvedSubagentRequest;
  settings: ResolvedRunSettings;
  /** Whether the provider takes steering messages; if not, messages are counted and dropped. */
  steering: boolean;
  /** Whether a settled segment parks for `resume`; if not, the run closes when it settles. */
  resumable: boolean;
  /** The caller cancelled before the run began: settle `aborted` without calling the provider. */
  abortedAtStart?: boolean;
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
  /** Set when a segment continued as new between two of its turns. */
  midSegment?: { nudgesLeft: number; lastOutput: ContentBlock[] };
}

export interface SegmentOutcome {
  segment: number;
  result: SubagentResult;
  /** Epoch ms until which `resume` is accepted; absent when the run closes instead of parking. */
  resumableUntil?: number;
  /** Tokens the model endpoint reported over the whole run so far (agent-loop providers). */
  usage?: SubagentUsage;
}

export type SegmentResultReply = { settled: SegmentOutcome } | { moved: true };

export type SubagentRunClosedBy = 'disposed' | 'cancelled' | 'expired' | 'settled';

/** The workflow's own result: the last segment's outcome and why the run closed. */
export interface SubagentRunOutcome extends SegmentOutcome {
  closedBy: SubagentRunClosedBy;
  /** Steering messages that arrived after the last segment settled and were never resumed. */
  undeliveredMessages: number;
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
}

export interface SendMessageArgs {
  content: ContentBlock[];
}

export interface ResumeArgs {
  fromSegment: number;
  content: ContentBlock[];
  /** The caller cancelled before the resume was sent: the new segment settles `aborted` at once. */
  abortedAtStart?: boolean;
}

/** The user message of a nudge turn. */
export const STRUCTURED_OUTPUT_NUDGE =
  'You finished without calling `structured_output`. Call `structured_output` now with your final result matching its parameter schema.';

export const sendMessageSignal = defineSignal<[SendMessageArgs]>('sendMessage');
/** Sent by a nested run to its parent run when it starts, so the parent can cancel it. */
export const childStartedSignal = defineSignal<[{ runId: string }]>('childStarted');
/** Resolves with segment `segment` (default: the current one) once it settles. */
export const segmentResultUpdate = defineUpdate<SegmentResultReply, [{ segment?: number }]>('segmentResult');
export const resumeUpdate = defineUpdate<{ segment: number }, [ResumeArgs]>('resume');
/** Ends the run if `segment` is still its current one; resolves once the provider has stopped. */
export const disposeUpdate = defineUpdate<{ disposed: boolean }, [{ segment: number }]>('dispose');
export const statusQuery = defineQuery<SubagentRunStatus>('status');
/** What a worker that lacks the conversation in its cache fetches; writes nothing to history. */
export const runContextQuery = defineQuery<RunContextSnapshot>('runContext');
/** The messages waiting for the child, for a provider that takes them mid-turn (ACP). */
export const pendingMessagesQuery = defineQuery<ContentBlock[][]>('pendingMessages');

export async function subagentRunWorkflow(input: SubagentRunInput): Promise<SubagentRunOutcome> {
  const { settings, request, carried } = input;
  const segment = carried?.segment ?? 0;
  const state: RunState = {
    runId: workflowInfo().workflowId,
    provider: input.provider,
    segment,
    request,
    transcript: carried?.transcript ?? [...(request.seed?.entries ?? [])],
    pending: carried?.pending ?? [request.prompt],
    turn: carried?.turn ?? 0,
    usage: carried?.usage ?? { promptTokens: 0, completionTokens: 0 },
    ...(carried?.providerState === undefined ? {} : { providerState: carried.providerState }),
  };
  let droppedMessages = carried?.droppedMessages ?? 0;
  const children = new Set(carried?.children ?? []);
  let phase: SubagentRunStatus['phase'] = 'running';
  let outcome: SegmentOutcome | undefined;
  let resumeRequest: ResumeArgs | undefined;
  let disposeRequested = false;
  let continuing = false;
  const segmentScope = new CancellationScope();
  // Search attributes are kept only when the caller set them at start (the server knows them).
  const indexed = workflowInfo().typedSearchAttributes.get(PROVIDER_ATTRIBUTE) !== undefined;

  const activityOptions: ActivityOptions = {
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
  const runTurn = turnRunner(input.driver, state, activityOptions, settings.maxStepsPerTurn);

  setHandler(sendMessageSignal, ({ content }) => {
    if (input.steering) state.pending.push(content);
    else droppedMessages++;
  });

  setHandler(childStartedSignal, ({ runId }) => {
    children.add(runId);
  });

  setHandler(
    segmentResultUpdate,
    async ({ segment: wanted = segment }) => {
      // Non-cancellable: a cancelled run still answers with its `aborted` result.
      await CancellationScope.nonCancellable(() => condition(() => continuing || (outcome !== undefined && wanted === segment)));
      // While continuing as new, callers ask again and reach the next run.
      return outcome !== undefined && wanted === segment && !continuing ? { settled: outcome } : { moved: true };
    },
    {
      validator: ({ segment: wanted }) => {
        if (wanted === undefined || wanted === segment) return;
        if (wanted === segment + 1 && resumeRequest !== undefined) return;
        throw ApplicationFailure.nonRetryable(`run ${state.runId} has no segment ${wanted} (current: ${segment})`, 'UNKNOWN_RUN');
      },
    },
  );

  setHandler(
    resumeUpdate,
    (args) => {
      resumeRequest = args;
      return { segment: segment + 1 };
    },
    {
      validator: ({ fromSegment, content }) => {
        const refusal = resumeRefusal(fromSegment);
        if (refusal) throw ApplicationFailure.nonRetryable(`cannot resume run ${state.runId}: ${refusal}`, 'NOT_RESUMABLE');
        const size = carryBytes(carry([...state.pending, content]));
        if (size > settings.maxPayloadBytes) {
          throw ApplicationFailure.nonRetryable(
            `cannot resume run ${state.runId}: its conversation is ${size} bytes, over the ${settings.maxPayloadBytes}-byte payload limit`,
            'PAYLOAD_TOO_LARGE',
          );
        }
      },
    },
  );

  setHandler(disposeUpdate, async ({ segment: target }) => {
    if (target !== segment || continuing) return { disposed: false };
    disposeRequested = true;
    segmentScope.cancel();
    await CancellationScope.nonCancellable(() => condition(() => outcome !== undefined));
    return { disposed: true };
  });

  setHandler(statusQuery, () => ({
    provider: input.provider,
    segment,
    phase,
    turns: state.turn,
    pendingMessages: state.pending.length,
    droppedMessages,
    usage: state.usage,
    seedLength: request.seed?.entries.length ?? 0,
    depth: request.depth,
    ...(request.parent.runId === undefined ? {} : { parentRunId: request.parent.runId }),
    children: [...children],
    resumableUntil: outcome?.resumableUntil,
    lastResult: outcome?.result,
  }));

  setHandler(runContextQuery, () => ({ request, entries: state.transcript }));
  setHandler(pendingMessagesQuery, () => state.pending);

  /** The size the carried state would have as a payload; over the limit it cannot continue as new. */
  const carryBytes = (next: SubagentRunCarry) => new TextEncoder().encode(JSON.stringify({ ...input, carried: next })).length;

  function resumeRefusal(fromSegment: number): string | undefined {
    if (!input.resumable) return `provider "${input.provider}" does not support resume`;
    if (fromSegment !== segment) return `segment ${fromSegment} was already resumed (current segment: ${segment})`;
    if (phase === 'running') return 'it is still running; resume continues a settled run';
    if (phase === 'closing' || disposeRequested) return 'it is closed';
    if (resumeRequest !== undefined) return `segment ${segment} is already being resumed`;
    return undefined;
  }

  /** Continues as new, telling every caller waiting on a result to ask the next run. */
  async function continueWith(next: SubagentRunCarry, abortedAtStart?: boolean): Promise<never> {
    continuing = true;
    await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
    // The memo (the request's fingerprint for idempotent starts) and search attributes stay with the run.
    if (indexed) upsertSearchAttributes([{ key: STATUS_ATTRIBUTE, value: 'running' }]);
    const continueAsNew = makeContinueAsNewFunc<typeof subagentRunWorkflow>({
      memo: workflowInfo().memo,
      typedSearchAttributes: workflowInfo().typedSearchAttributes,
    });
    return continueAsNew({ ...input, abortedAtStart, carried: next });
  }

  const carry = (pending: ContentBlock[][], midSegment?: SubagentRunCarry['midSegment']): SubagentRunCarry => ({
    segment,
    turn: state.turn,
    transcript: state.transcript,
    pending,
    usage: state.usage,
    ...(state.providerState === undefined ? {} : { providerState: state.providerState }),
    droppedMessages,
    children: [...children],
    ...(midSegment ? { midSegment } : {}),
  });

  /**
   * Turns until the child stops with no message waiting; settles `aborted` on cancel or dispose.
   * A structured run ends at its capture; a clean finish without one is nudged, then an `error`.
   */
  async function runSegment(): Promise<SubagentResult> {
    const structuredRun = request.outputSchema !== undefined;
    let nudgesLeft = carried?.midSegment?.nudgesLeft ?? settings.structuredNudgeRetries;
    let lastOutput = carried?.midSegment?.lastOutput ?? [];
    let last: SubagentTurnResult | undefined;
    try {
      await segmentScope.run(async () => {
        let turnInput = state.pending.splice(0);
        for (let turnsHere = 0; ; turnsHere++) {
          // Between turns the whole state is in `state`: a safe point to start a fresh history,
          // unless the conversation has outgrown what one payload can carry.
          if (turnsHere > 0 && workflowInfo().continueAsNewSuggested) {
            const next = carry([...turnInput, ...state.pending], { nudgesLeft, lastOutput });
            if (carryBytes(next) <= settings.maxPayloadBytes) await continueWith(next);
          }
          last = await runTurn(turnInput);
          if (last.output.length > 0) lastOutput = last.output;
          if (last.structured !== undefined || last.stopReason !== 'completed') return;
          if (state.pending.length > 0) {
            turnInput = state.pending.splice(0);
          } else if (structuredRun && nudgesLeft > 0 && !segmentScope.consideredCancelled) {
            nudgesLeft--;
            turnInput = [[{ type: 'text', text: STRUCTURED_OUTPUT_NUDGE }]];
          } else {
            return;
          }
        }
      });
    } catch (err) {
      if (!isCancellation(err)) throw err;
      return { output: lastOutput, stopReason: 'aborted' };
    }
    const { output, stopReason, diagnostic, structured } = last!;
    if (structuredRun && structured === undefined && stopReason === 'completed') {
      // The cancel contract wins over the missing value.
      return segmentScope.consideredCancelled
        ? { output, stopReason: 'aborted' }
        : { output, stopReason: 'error', diagnostic: 'the child finished without calling structured_output' };
    }
    return {
      output,
      stopReason,
      ...(diagnostic === undefined ? {} : { diagnostic }),
      ...(structured === undefined ? {} : { structured }),
    };
  }

  // A nested run tells its parent it exists, so cancelling the parent reaches it. Not awaited:
  // the first turn need not wait for it. Best effort: the parent's turn also cancels it through
  // the delegation's signal, and a parent that has closed has nothing to cancel.
  if (request.parent.runId !== undefined && !carried) {
    getExternalWorkflowHandle(request.parent.runId)
      .signal(childStartedSignal, { runId: state.runId })
      .catch(() => undefined);
  }

  const runCancelled = () => CancellationScope.current().consideredCancelled;
  let closedBy: SubagentRunClosedBy = 'settled';
  const result: SubagentResult = input.abortedAtStart ? { output: [], stopReason: 'aborted' } : await runSegment();
  const parks = input.resumable && !disposeRequested && !runCancelled() && result.stopReason !== 'aborted';
  const usage = input.driver === 'agent-loop' ? { usage: state.usage } : {};
  outcome = { segment, result, ...usage, ...(parks ? { resumableUntil: Date.now() + settings.resumeWindowMs } : {}) };

  if (indexed) {
    upsertSearchAttributes([
      { key: STATUS_ATTRIBUTE, value: parks ? 'parked' : 'closed' },
      { key: STOP_REASON_ATTRIBUTE, value: result.stopReason },
    ]);
  }
  if (parks) {
    phase = 'parked';
    try {
      const woken = await condition(
        () => resumeRequest !== undefined || disposeRequested,
        Math.max(outcome.resumableUntil! - Date.now(), 0),
      );
      closedBy = !woken ? 'expired' : disposeRequested ? 'disposed' : closedBy;
    } catch (err) {
      if (!isCancellation(err)) throw err;
      closedBy = 'cancelled';
    }
    if (resumeRequest && closedBy === 'settled') {
      await continueWith(
        { ...carry([...state.pending, resumeRequest.content]), segment: segment + 1 },
        resumeRequest.abortedAtStart,
      );
    }
  } else {
    closedBy = disposeRequested ? 'disposed' : result.stopReason === 'aborted' ? 'cancelled' : 'settled';
  }

  phase = 'closing';
  if (indexed && parks) upsertSearchAttributes([{ key: STATUS_ATTRIBUTE, value: 'closed' }]);
  await CancellationScope.nonCancellable(async () => {
    if (closedBy === 'cancelled' || closedBy === 'disposed') await cancelChildren();
    await condition(allHandlersFinished);
  });
  return { ...outcome, closedBy, undeliveredMessages: state.pending.length };

  /** Cancels every nested run this run started; each cancels its own in turn. */
  async function cancelChildren(): Promise<void> {
    await Promise.all(
      [...children].map(async (child) => {
        try {
          await getExternalWorkflowHandle(child).cancel();
        } catch {
          // Already closed.
        }
      }),
    );
  }
}
