// One subagent run = one workflow. A run is a chain of segments: the start, then one per resume.
// Each segment drives turns of the provider as activities until the child stops with no steering
// message waiting, settles a SubagentResult, then parks for the resume window. A resume continues
// the same workflow id as new, carrying the conversation; cancel and dispose end the run.
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type {
  ContentBlock,
  ResolvedSubagentRequest,
  RunContextSnapshot,
  SubagentResult,
  TranscriptEntry,
  SubagentTurnResult,
} from '../activities/contracts';

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
}

export interface SubagentRunInput {
  provider: string;
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
  /** User messages for the segment's first turn: undelivered steering, then the resume content. */
  pending: ContentBlock[][];
}

export interface SegmentOutcome {
  segment: number;
  result: SubagentResult;
  /** Epoch ms until which `resume` is accepted; absent when the run closes instead of parking. */
  resumableUntil?: number;
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
  resumableUntil?: number;
  lastResult?: SubagentResult;
}

export interface SendMessageArgs {
  content: ContentBlock[];
}

/** The user message of a nudge turn. */
export const STRUCTURED_OUTPUT_NUDGE =
  'You finished without calling `structured_output`. Call `structured_output` now with your final result matching its parameter schema.';

export const sendMessageSignal = defineSignal<[SendMessageArgs]>('sendMessage');
/** Resolves with segment `segment` (default: the current one) once it settles. */
export const segmentResultUpdate = defineUpdate<SegmentResultReply, [{ segment?: number }]>('segmentResult');
export interface ResumeArgs {
  fromSegment: number;
  content: ContentBlock[];
  /** The caller cancelled before the resume was sent: the new segment settles `aborted` at once. */
  abortedAtStart?: boolean;
}

export const resumeUpdate = defineUpdate<{ segment: number }, [ResumeArgs]>('resume');
/** Ends the run if `segment` is still its current one; resolves once the provider has stopped. */
export const disposeUpdate = defineUpdate<{ disposed: boolean }, [{ segment: number }]>('dispose');
export const statusQuery = defineQuery<SubagentRunStatus>('status');
/** What a worker that lacks the conversation in its cache fetches; writes nothing to history. */
export const runContextQuery = defineQuery<RunContextSnapshot>('runContext');

type Activities = ReturnType<typeof createActivities>;

export async function subagentRunWorkflow(input: SubagentRunInput): Promise<SubagentRunOutcome> {
  const { settings, request } = input;
  const runId = workflowInfo().workflowId;
  const segment = input.carried?.segment ?? 0;
  const transcript: TranscriptEntry[] = input.carried?.transcript ?? [];
  const pending: ContentBlock[][] = input.carried?.pending ?? [request.prompt];
  let turn = input.carried?.turn ?? 0;

  let phase: SubagentRunStatus['phase'] = 'running';
  let outcome: SegmentOutcome | undefined;
  let resumeRequest: ResumeArgs | undefined;
  let disposeRequested = false;
  let continuing = false;
  let droppedMessages = 0;
  const segmentScope = new CancellationScope();

  const { subagentTurn } = proxyActivities<Activities>({
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
  });

  setHandler(sendMessageSignal, ({ content }) => {
    if (input.steering) pending.push(content);
    else droppedMessages++;
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
        throw ApplicationFailure.nonRetryable(`run ${runId} has no segment ${wanted} (current: ${segment})`, 'UNKNOWN_RUN');
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
      validator: ({ fromSegment }) => {
        const refusal = resumeRefusal(fromSegment);
        if (refusal) throw ApplicationFailure.nonRetryable(`cannot resume run ${runId}: ${refusal}`, 'NOT_RESUMABLE');
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
    turns: turn,
    pendingMessages: pending.length,
    droppedMessages,
    resumableUntil: outcome?.resumableUntil,
    lastResult: outcome?.result,
  }));

  setHandler(runContextQuery, () => ({ request, entries: transcript }));

  function resumeRefusal(fromSegment: number): string | undefined {
    if (!input.resumable) return `provider "${input.provider}" does not support resume`;
    if (fromSegment !== segment) return `segment ${fromSegment} was already resumed (current segment: ${segment})`;
    if (phase === 'running') return 'it is still running; resume continues a settled run';
    if (phase === 'closing' || disposeRequested) return 'it is closed';
    if (resumeRequest !== undefined) return `segment ${segment} is already being resumed`;
    return undefined;
  }

  /** Runs one turn; a provider or retry failure becomes an `error` result, cancellation propagates. */
  async function runTurn(turnInput: ContentBlock[][]): Promise<SubagentTurnResult> {
    const lastAssistant = transcript.findLast((entry) => entry.kind === 'assistant');
    const transcriptRef = { length: transcript.length, lastAssistantId: lastAssistant?.id };
    const turnNumber = turn++;
    for (const content of turnInput) transcript.push({ kind: 'user', content });
    try {
      const result = await subagentTurn({
        provider: input.provider,
        runId,
        segment,
        turn: turnNumber,
        input: turnInput,
        transcript: transcriptRef,
        request: turnNumber === 0 ? request : undefined,
      });
      transcript.push({ kind: 'assistant', id: result.outputId, content: result.output, stopReason: result.stopReason });
      return result;
    } catch (err) {
      if (isCancellation(err)) throw err;
      return { output: [], stopReason: 'error', diagnostic: failureMessage(err) };
    }
  }

  /**
   * Turns until the child stops with no message waiting; settles `aborted` on cancel or dispose.
   * A structured run ends at its capture; a clean finish without one is nudged, then an `error`.
   */
  async function runSegment(): Promise<SubagentResult> {
    const structuredRun = request.outputSchema !== undefined;
    let nudgesLeft = settings.structuredNudgeRetries;
    let last: SubagentTurnResult | undefined;
    let lastOutput: ContentBlock[] = [];
    try {
      await segmentScope.run(async () => {
        let turnInput = pending.splice(0);
        for (;;) {
          last = await runTurn(turnInput);
          if (last.output.length > 0) lastOutput = last.output;
          if (last.structured !== undefined || last.stopReason !== 'completed') return;
          if (pending.length > 0) {
            turnInput = pending.splice(0);
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

  const runCancelled = () => CancellationScope.current().consideredCancelled;
  let closedBy: SubagentRunClosedBy = 'settled';
  const result: SubagentResult = input.abortedAtStart ? { output: [], stopReason: 'aborted' } : await runSegment();
  const parks = input.resumable && !disposeRequested && !runCancelled() && result.stopReason !== 'aborted';
  outcome = { segment, result, ...(parks ? { resumableUntil: Date.now() + settings.resumeWindowMs } : {}) };

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
      continuing = true;
      await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
      await continueAsNew<typeof subagentRunWorkflow>({
        ...input,
        abortedAtStart: resumeRequest.abortedAtStart,
        carried: { segment: segment + 1, turn, transcript, pending: [...pending, resumeRequest.content] },
      });
    }
  } else {
    closedBy = disposeRequested ? 'disposed' : result.stopReason === 'aborted' ? 'cancelled' : 'settled';
  }

  phase = 'closing';
  await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
  return { ...outcome, closedBy, undeliveredMessages: pending.length };
}

function failureMessage(err: unknown): string {
  // ActivityFailure wraps the provider's ApplicationFailure (or a timeout) as its cause.
  const messages: string[] = [];
  for (let e: unknown = err; e instanceof Error; e = e.cause) messages.push(e.message);
  return messages.filter(Boolean).join(': ') || 'subagent turn failed';
}
