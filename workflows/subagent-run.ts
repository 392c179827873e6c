// One subagent run = one workflow. A run is a chain of segments: the start, then one per resume.
// Each segment drives turns of the provider (workflows/turns.ts) until the child stops with no
// steering message waiting, settles a SubagentResult, then parks for the resume window. A resume
// continues the same workflow id as new, carrying the conversation; cancel and dispose end the
// run. A long segment continues as new between turns when the server suggests it.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  makeContinueAsNewFunc,
  patched,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { budgetStop, remainingBudget } from '../src/seam/budget';
import { isRunId, isWholeNumber, isWorkflowId, payloadBytes, payloadLimitViolation } from '../src/seam/constants';
import { type ContentBlock, contentViolation } from '../src/seam/content';
import { isPlainObject } from '../src/seam/json';
import type { SubagentResult, SubagentTurnResult } from '../src/seam/result';
import {
  DISPOSED_BEFORE_BEGINNING,
  DISPOSED_BEFORE_SETTLING,
  SETTLED_MEMO_KEY,
  SETTLED_MEMO_MAX_BYTES,
  STRUCTURED_OUTPUT_NUDGE,
  type QueryPageArgs,
  type ResumeArgs,
  type SegmentOutcome,
  type SubagentRunCarry,
  type SubagentRunClosedBy,
  type SubagentRunInput,
  type SubagentRunOutcome,
  type SubagentRunStatus,
  approveUpdate,
  childSettledSignal,
  childStartedSignal,
  disposeUpdate,
  pendingMessagesPageQuery,
  permissionDecidedSignal,
  requestApprovalUpdate,
  resumeUpdate,
  runContextPageQuery,
  segmentOutcomeQuery,
  segmentResultUpdate,
  sendMessageSignal,
  statusQuery,
  textDeltaSignal,
  turnActivityOptions,
  wakeUpdate,
  rememberMessageId,
} from './definitions';
import { Approvals, carriedMemo } from './approvals';
import { malformedIn, unnameableIn } from './run-input';
import {
  CHILD_SETTLED_PATCH,
  FOREIGN_CHILDREN_PATCH,
  MALFORMED_INPUT_PATCH,
  NESTED_CANCELS_DELIVERED_PATCH,
  PATCHES,
  MALFORMED_MESSAGES_PATCH,
  NESTED_CANCEL_BATCH,
  NESTED_CANCELS_IN_BATCHES_PATCH,
  UNNAMEABLE_IDS_PATCH,
  runPaths,
} from './patches';
import {
  COST_ATTRIBUTE,
  PROVIDER_ATTRIBUTE,
  ROOT_RUN_ATTRIBUTE,
  STATUS_ATTRIBUTE,
  STOP_REASON_ATTRIBUTE,
  TOKENS_ATTRIBUTE,
} from './search-attributes';
import { type MidTurn, RunState, ownSpend, treeSpend, turnRunner } from './turns';

const { subagentSegmentSettled } = proxyLocalActivities<{
  subagentSegmentSettled(outcome: SegmentOutcome): Promise<SegmentOutcome>;
}>({ startToCloseTimeout: '10 seconds' });

export async function subagentRunWorkflow(input: SubagentRunInput): Promise<SubagentRunOutcome> {
  // At the first activation: which build began the run decides its paths (see `runPaths`).
  const takes = runPaths();
  refuseToStart(malformedIn(input), MALFORMED_INPUT_PATCH);
  refuseToStart(unnameableIn(input), UNNAMEABLE_IDS_PATCH);
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
    modelCalls: carried?.modelCalls ?? 0,
    costUsd: carried?.costUsd ?? 0,
    childSpend: carried?.childSpend ?? {},
    ...(carried?.providerState === undefined ? {} : { providerState: carried.providerState }),
  };
  let droppedMessages = carried?.droppedMessages ?? 0;
  const messageIds = new Set(carried?.messageIds ?? []);
  const children = new Set(carried?.children ?? []);
  const cancelledChildren = new Set<string>();
  let phase: SubagentRunStatus['phase'] = 'running';
  let outcome: SegmentOutcome | undefined;
  let resumeRequest: ResumeArgs | undefined;
  let disposeRequested = input.disposedAtStart ?? false;
  let continuing = false;
  let deadlinePassed = false;
  const segmentScope = new CancellationScope();
  // Search attributes are kept only when the caller set them at start (the server knows them).
  const indexed = workflowInfo().typedSearchAttributes.get(PROVIDER_ATTRIBUTE) !== undefined;
  const spendIndexed = workflowInfo().typedSearchAttributes.get(ROOT_RUN_ATTRIBUTE) !== undefined;

  const activityOptions = turnActivityOptions(settings);
  const approvals = new Approvals(state.runId, settings.approvalTimeoutMs, indexed);
  const runTurn = turnRunner(
    input.driver,
    state,
    activityOptions,
    settings.maxStepsPerTurn,
    approvals,
    takes,
    input.modelTaskQueue,
  );

  setHandler(sendMessageSignal, (args) => {
    // A raw client's message that is not content (ours checks it) failed the turn on every attempt.
    if (contentViolation(args?.content, 'content') !== undefined && patched(MALFORMED_MESSAGES_PATCH)) {
      droppedMessages++;
      return;
    }
    const { content, id } = args;
    // A sender retries a signal whose response it lost: the same id is the same message.
    // (Histories from before ids carry none, and take the branch below as they did.)
    if (id !== undefined && !rememberMessageId(messageIds, id)) return;
    if (input.steering) state.pending.push(content);
    else droppedMessages++;
  });

  setHandler(childStartedSignal, (args) => {
    const runId = args?.runId;
    // An id no command could carry names no run of ours: cancelling it would stop the worker.
    if (!isWorkflowId(runId) && patched(UNNAMEABLE_IDS_PATCH)) return;
    // An id that is not a run's names a workflow of the user's own: the run's cancel would reach it.
    if (!isRunId(runId) && patched(FOREIGN_CHILDREN_PATCH)) return;
    children.add(runId);
  });

  // Recorded in history by arriving; nothing to do with them here.
  setHandler(permissionDecidedSignal, () => undefined);
  setHandler(textDeltaSignal, () => undefined);
  setHandler(childSettledSignal, () => undefined);

  setHandler(
    segmentResultUpdate,
    async ({ segment: wanted = segment }) => {
      // Non-cancellable: a cancelled run still answers with its `aborted` result.
      await CancellationScope.nonCancellable(() =>
        condition(() => continuing || (outcome !== undefined && wanted === segment)),
      );
      // While continuing as new, callers ask again and reach the next run.
      return outcome !== undefined && wanted === segment && !continuing ? { settled: outcome } : { moved: true };
    },
    {
      validator: (args) => {
        // A raw client's null, or a segment that is not a number, was refused with the SDK's TypeError
        // or named a segment the run never had.
        const wanted = (args as { segment?: unknown } | null | undefined)?.segment;
        if (!isPlainObject(args) || !(wanted === undefined || isWholeNumber(wanted, 0))) {
          throw ApplicationFailure.nonRetryable(
            `cannot read run ${state.runId}'s result: segmentResult takes { segment? }, a whole number`,
            'INVALID_REQUEST',
          );
        }
        if (wanted === undefined || wanted === segment) return;
        if (wanted === segment + 1 && resumeRequest !== undefined) return;
        throw ApplicationFailure.nonRetryable(
          `run ${state.runId} has no segment ${wanted} (current: ${segment})`,
          'UNKNOWN_RUN',
        );
      },
    },
  );

  /** The resume that began this segment, sent again: its caller never heard the answer. */
  const beganThisSegment = ({ fromSegment, resumeId }: ResumeArgs) =>
    resumeId !== undefined && resumeId === carried?.resumedBy && fromSegment === segment - 1;
  setHandler(
    resumeUpdate,
    (args) => {
      if (beganThisSegment(args)) return { segment };
      resumeRequest = args;
      return { segment: segment + 1 };
    },
    {
      validator: (args) => {
        // A validator runs as the update arrives, never in replay: what it refuses never reaches history.
        const malformed = resumeViolation(args);
        if (malformed) {
          throw ApplicationFailure.nonRetryable(`cannot resume run ${state.runId}: ${malformed}`, 'INVALID_REQUEST');
        }
        if (beganThisSegment(args)) return;
        const { fromSegment, content } = args;
        const refusal = resumeRefusal(fromSegment);
        if (refusal) {
          throw ApplicationFailure.nonRetryable(`cannot resume run ${state.runId}: ${refusal}`, 'NOT_RESUMABLE');
        }
        const tooLarge = carryViolation(
          carry([...state.pending, content]),
          `cannot resume run ${state.runId}: its conversation`,
        );
        if (tooLarge) throw ApplicationFailure.nonRetryable(tooLarge, 'PAYLOAD_TOO_LARGE');
      },
    },
  );

  setHandler(
    disposeUpdate,
    async ({ segment: target }) => {
      if (target !== segment || continuing) return { disposed: false };
      disposeRequested = true;
      segmentScope.cancel();
      cascadeAtOnce();
      // An update held until the provider stops would count against the run's updates in flight.
      if (!takes(PATCHES.disposeAnswersAtOnce)) {
        await CancellationScope.nonCancellable(() => condition(() => outcome !== undefined));
      }
      return { disposed: true };
    },
    {
      // A raw client's null (or no arguments) failed every workflow task of the run in the
      // handler, so that no dispose, ours included, reached it while that one waited.
      validator: (args) => {
        if (!isWholeNumber((args as { segment?: unknown } | null | undefined)?.segment, 0)) {
          throw ApplicationFailure.nonRetryable(
            `cannot dispose of run ${state.runId}: dispose takes { segment }, a whole number`,
            'INVALID_REQUEST',
          );
        }
      },
    },
  );

  setHandler(approveUpdate, (args) => approvals.decide(args), {
    validator: (args) => approvals.validate(args),
  });

  // A turn's provider asks (an ACP permission request). Not cancellable: the turn's end denies
  // what it still waits for (turns.ts), so the handler finishes before the run continues or closes.
  setHandler(
    requestApprovalUpdate,
    ({ turn, key, ...call }) =>
      CancellationScope.nonCancellable(() => approvals.askInTurn(`t${turn}.${key}`, turn, call)),
    { validator: (args) => approvals.validateAsk(args) },
  );

  setHandler(wakeUpdate, () => undefined, {
    validator: () => {
      throw ApplicationFailure.nonRetryable('nothing to do: the task that carried this has run', 'WOKEN');
    },
  });

  setHandler(segmentOutcomeQuery, () => ({
    segment,
    ...(outcome === undefined ? {} : { settled: outcome }),
    resuming: resumeRequest !== undefined,
    ...(carried?.previous === undefined ? {} : { previous: carried.previous }),
  }));

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
    pendingApprovals: approvals.pending(),
    spend: treeSpend(state),
    ownSpend: ownSpend(state),
    ...(request.budget ? { budgetLeft: remainingBudget(request.budget, treeSpend(state)) } : {}),
  }));

  // Queries are not in history, so answering them in pages changes nothing a replay sees. Asked
  // without a page (a worker from before pages), they answer the whole list as they did.
  setHandler(runContextPageQuery, (page?: QueryPageArgs) => {
    if (!isPageArgs(page)) return { request, entries: state.transcript };
    const spent = page.request ? payloadBytes(request) : 0;
    return {
      ...(page.request ? { request } : {}),
      entries: pageOf(state.transcript, page, spent),
      total: state.transcript.length,
      runId: workflowInfo().runId,
    };
  });
  setHandler(pendingMessagesPageQuery, (page?: QueryPageArgs) => {
    if (!isPageArgs(page)) return state.pending;
    return { messages: pageOf(state.pending, page), total: state.pending.length, runId: workflowInfo().runId };
  });

  /** Why the carried state cannot continue as new (it would outgrow one payload), or undefined. */
  const carryViolation = (next: SubagentRunCarry, what = 'the carried conversation') =>
    payloadLimitViolation({ ...input, carried: next }, settings.maxPayloadBytes, what);

  function resumeRefusal(fromSegment: number): string | undefined {
    if (!input.resumable) return `provider "${input.provider}" does not support resume`;
    if (fromSegment !== segment) return `segment ${fromSegment} was already resumed (current segment: ${segment})`;
    if (phase === 'running') return 'it is still running; resume continues a settled run';
    if (phase === 'closing' || disposeRequested) return 'it is closed';
    if (resumeRequest !== undefined) return `segment ${segment} is already being resumed`;
    return undefined;
  }

  /** Continues as new, telling every caller waiting on a result to ask the next run. */
  async function continueWith(
    next: SubagentRunCarry,
    atStart: Pick<SubagentRunInput, 'abortedAtStart' | 'disposedAtStart'> = {},
  ): Promise<never> {
    continuing = true;
    // Most runs have no handler left to finish here: they skip the wait, whose scope and condition
    // cost promises (each with a captured stack) and no command.
    if (!allHandlersFinished()) await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
    // The memo (the request's fingerprint for idempotent starts) and search attributes stay with the run.
    if (indexed) upsertSearchAttributes([{ key: STATUS_ATTRIBUTE, value: 'running' }]);
    const continueAsNew = makeContinueAsNewFunc<typeof subagentRunWorkflow>({
      memo: carriedMemo(),
      typedSearchAttributes: workflowInfo().typedSearchAttributes,
    });
    return continueAsNew({ ...input, ...atStart, carried: next });
  }

  const carry = (pending: ContentBlock[][], midSegment?: SubagentRunCarry['midSegment']): SubagentRunCarry => ({
    segment,
    turn: state.turn,
    transcript: state.transcript,
    pending,
    usage: state.usage,
    ...(state.providerState === undefined ? {} : { providerState: state.providerState }),
    modelCalls: state.modelCalls,
    costUsd: state.costUsd,
    childSpend: state.childSpend,
    droppedMessages,
    children: [...children],
    ...(midSegment ? { midSegment } : {}),
    ...(messageIds.size > 0 ? { messageIds: [...messageIds] } : {}),
    ...(carried?.previous === undefined ? {} : { previous: carried.previous }),
    ...(carried?.resumedBy === undefined ? {} : { resumedBy: carried.resumedBy }),
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
    // Between two model calls of a long agent-loop turn the whole state is in `state` too.
    const betweenSteps = async (turn: MidTurn) => {
      if (!workflowInfo().continueAsNewSuggested || !takes(PATCHES.continueAsNewMidTurn)) return;
      const next = carry([...state.pending], { nudgesLeft, lastOutput, turn });
      if (!carryViolation(next)) await continueWith(next);
    };
    // A budget's deadline cuts the segment off wherever it is, a model call in flight included.
    // (No scope without one: every scope costs promises, each with a captured stack trace.)
    const deadline = request.budget?.deadline;
    let deadlineScope: CancellationScope | undefined;
    if (deadline !== undefined) {
      deadlineScope = new CancellationScope();
      void deadlineScope
        .run(() => sleep(Math.max(deadline - Date.now(), 1)))
        .then(() => {
          deadlinePassed = true;
          segmentScope.cancel();
        })
        .catch(() => undefined);
    }
    try {
      await segmentScope.run(async () => {
        let resumeAt = carried?.midSegment?.turn;
        let turnInput = resumeAt ? [] : state.pending.splice(0);
        for (let turnsHere = 0; ; turnsHere++) {
          // Between turns the whole state is in `state`: a safe point to start a fresh history,
          // unless the conversation has outgrown what one payload can carry.
          if (turnsHere > 0 && workflowInfo().continueAsNewSuggested) {
            const next = carry([...turnInput, ...state.pending], { nudgesLeft, lastOutput });
            if (!carryViolation(next)) await continueWith(next);
          }
          last = await runTurn(turnInput, { ...(resumeAt ? { resumeAt } : {}), betweenSteps });
          resumeAt = undefined;
          if (last.output.length > 0) lastOutput = last.output;
          if (last.structured !== undefined || last.stopReason !== 'completed') return;
          // A provider that takes messages within its turns has had its chance at these: they
          // wait for resume. (Its runs carry `steeringWithinTurn` since that field exists, so no
          // history from before it takes this branch.)
          if (state.pending.length > 0 && !input.steeringWithinTurn) {
            turnInput = state.pending.splice(0);
          } else if (structuredRun && nudgesLeft > 0 && !segmentScope.consideredCancelled && canTakeNudge()) {
            nudgesLeft--;
            turnInput = [[{ type: 'text', text: STRUCTURED_OUTPUT_NUDGE }]];
          } else {
            return;
          }
        }
      });
    } catch (err) {
      // A cancelled turn whose worker died cannot report its cancellation: it fails by its
      // heartbeat timeout instead, and the cancel still wins (turns.ts rethrows it).
      const stoppedTurn = err instanceof ActivityFailure && segmentScope.consideredCancelled;
      if (!isCancellation(err) && !stoppedTurn) throw err;
      return stopped(lastOutput);
    } finally {
      deadlineScope?.cancel();
    }
    const { output, stopReason, diagnostic, structured } = last!;
    if (structuredRun && structured === undefined && stopReason === 'completed') {
      // The cancel contract wins over the missing value.
      return segmentScope.consideredCancelled
        ? stopped(output)
        : { output, stopReason: 'error', diagnostic: 'the child finished without calling structured_output' };
    }
    return {
      output,
      stopReason,
      ...(diagnostic === undefined ? {} : { diagnostic }),
      ...(structured === undefined ? {} : { structured }),
    };
  }

  // A cancelled run's nested runs are cancelled as the cancel arrives, not once its turn stopped:
  // a turn whose worker died stops only at its heartbeat timeout.
  CancellationScope.current().cancelRequested.catch(() => cascadeAtOnce());

  /** Cascades of `cascadeAtOnce` whose cancels the server has not all taken yet. */
  let cascadesOut = 0;
  /** Cancels the nested runs now (histories from before the patch: only once the run closes). */
  function cascadeAtOnce(): void {
    const uncancelled = [...children].some((child) => !cancelledChildren.has(child));
    if (uncancelled && takes(PATCHES.cascadeAtOnce)) {
      cascadesOut++;
      void CancellationScope.nonCancellable(cancelChildren).finally(() => cascadesOut--);
    }
  }

  // A nested run tells its parent it exists, so cancelling the parent reaches it. Not awaited:
  // the first turn need not wait for it. Best effort: the parent's turn also cancels it through
  // the delegation's signal, and a parent that has closed has nothing to cancel.
  if (request.parent.runId !== undefined && !carried) {
    getExternalWorkflowHandle(request.parent.runId)
      .signal(childStartedSignal, { runId: state.runId })
      .catch(() => undefined);
  }

  /** A nudge is a user message; a provider without steering (a hosted in-process run) cannot take one. */
  function canTakeNudge(): boolean {
    return input.steering || !takes(PATCHES.nudgeNeedsSteering);
  }

  /**
   * How a segment stopped before it settled ends: `aborted` when the run was cancelled; when it
   * was disposed, `error`, as the seam's disposed turn maps (histories from before the patch: `aborted`).
   */
  function stopped(output: ContentBlock[]): SubagentResult {
    if (deadlinePassed && !runCancelled() && !disposeRequested) {
      return {
        output,
        stopReason: 'aborted',
        // Asked at the deadline itself: a timer may fire a moment before the clock shows it.
        diagnostic: budgetStop(request.budget, treeSpend(state), request.budget!.deadline!, 'turn')!.diagnostic,
      };
    }
    if (disposeRequested && !runCancelled() && takes(PATCHES.disposeSettlesError)) {
      return { output, stopReason: 'error', diagnostic: DISPOSED_BEFORE_SETTLING };
    }
    return { output, stopReason: 'aborted' };
  }

  const runCancelled = () => CancellationScope.current().consideredCancelled;
  let closedBy: SubagentRunClosedBy = 'settled';
  const result: SubagentResult = input.abortedAtStart
    ? { output: [], stopReason: 'aborted' }
    : input.disposedAtStart
      ? { output: [], stopReason: 'error', diagnostic: DISPOSED_BEFORE_BEGINNING }
      : await runSegment();
  const parks = input.resumable && !disposeRequested && !runCancelled() && result.stopReason !== 'aborted';
  const usage = input.driver === 'agent-loop' ? { usage: state.usage } : {};
  const spend = treeSpend(state);
  outcome = {
    segment,
    result,
    ...usage,
    spend,
    ...(parks ? { resumableUntil: Date.now() + settings.resumeWindowMs } : {}),
  };
  // The settle point, once per segment however many wait on it: observers long-poll the history
  // for it. A segment that closes the run needs none: the workflow's result is its outcome.
  const settled = outcome;
  const recordsSettle = takes(PATCHES.settleRecord) && (parks || !takes(PATCHES.settleRecordOnlyParked));
  if (recordsSettle) {
    if (takes(PATCHES.settleInMemo) && payloadBytes(settled) <= SETTLED_MEMO_MAX_BYTES) {
      upsertMemo({ [SETTLED_MEMO_KEY]: settled });
    } else {
      await CancellationScope.nonCancellable(() => subagentSegmentSettled(settled));
    }
  }

  // A nested run tells its parent it settled, as it told it it started: not awaited, best effort.
  if (request.parent.runId !== undefined && takes(CHILD_SETTLED_PATCH)) {
    getExternalWorkflowHandle(request.parent.runId)
      .signal(childSettledSignal, { runId: state.runId, segment, stopReason: result.stopReason })
      .catch(() => undefined);
  }

  if (indexed) {
    upsertSearchAttributes([
      { key: STATUS_ATTRIBUTE, value: parks ? 'parked' : 'closed' },
      { key: STOP_REASON_ATTRIBUTE, value: result.stopReason },
      // Runs started with the spend attributes keep them up to date.
      ...(spendIndexed
        ? [
            { key: TOKENS_ATTRIBUTE, value: spend.tokens },
            { key: COST_ATTRIBUTE, value: spend.costUsd },
          ]
        : []),
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
      const next: SubagentRunCarry = {
        ...carry([...state.pending, resumeRequest.content]),
        segment: segment + 1,
        previous: outcome,
      };
      // The next segment remembers the resume that began it, to answer it again if it is sent again.
      if (resumeRequest.resumeId === undefined) delete next.resumedBy;
      else next.resumedBy = resumeRequest.resumeId;
      // This outcome rides along for observers that missed it, unless it would not fit.
      if (carryViolation(next)) delete next.previous;
      await continueWith(next, {
        abortedAtStart: resumeRequest.abortedAtStart,
        disposedAtStart: resumeRequest.disposedAtStart,
      });
    }
  } else {
    closedBy = disposeRequested ? 'disposed' : result.stopReason === 'aborted' ? 'cancelled' : 'settled';
  }

  phase = 'closing';
  if (indexed && parks) upsertSearchAttributes([{ key: STATUS_ATTRIBUTE, value: 'closed' }]);
  const cancelsChildren = (closedBy === 'cancelled' || closedBy === 'disposed') && children.size > 0;
  // The server drops a cancel whose sender has closed, so the cascade must land before the close
  // (histories from before the patch closed in the same task, and their parked nested runs stayed).
  const awaitsCascade = cascadesOut > 0 && patched(NESTED_CANCELS_DELIVERED_PATCH);
  // Most runs have nothing to wait for here: they skip the scope, which costs no command either way.
  if (cancelsChildren || awaitsCascade || !allHandlersFinished()) {
    await CancellationScope.nonCancellable(async () => {
      if (awaitsCascade) await condition(() => cascadesOut === 0);
      if (cancelsChildren) await cancelChildren();
      await condition(allHandlersFinished);
    });
  }
  const previous = carried?.previous === undefined ? {} : { previous: carried.previous };
  return { ...outcome, closedBy, undeliveredMessages: state.pending.length, ...previous };

  /** Cancels every nested run this run started and has not cancelled yet; each cancels its own in turn. */
  async function cancelChildren(): Promise<void> {
    const uncancelled = [...children].filter((child) => !cancelledChildren.has(child));
    for (const child of uncancelled) cancelledChildren.add(child);
    // Many a batch at a time: the server refuses a workflow task that puts more cancels out than
    // it allows (see the patch).
    const batches =
      uncancelled.length > NESTED_CANCEL_BATCH && patched(NESTED_CANCELS_IN_BATCHES_PATCH)
        ? Array.from({ length: Math.ceil(uncancelled.length / NESTED_CANCEL_BATCH) }, (_, i) =>
            uncancelled.slice(i * NESTED_CANCEL_BATCH, (i + 1) * NESTED_CANCEL_BATCH),
          )
        : [uncancelled];
    for (const batch of batches) {
      await Promise.all(
        batch.map(async (child) => {
          try {
            await getExternalWorkflowHandle(child).cancel();
          } catch {
            // Already closed.
          }
        }),
      );
    }
  }
}

/**
 * Fails the run at once, `INVALID_REQUEST`, for input its code cannot run with (`reason`): a raw
 * client's, which failed each of its workflow tasks. Behind `patch`, asked only by such runs.
 */
function refuseToStart(reason: string | undefined, patch: string): void {
  if (reason !== undefined && patched(patch)) {
    throw ApplicationFailure.nonRetryable(`the run cannot start: ${reason}`, 'INVALID_REQUEST');
  }
}

/**
 * What makes a raw client's resume not one ours sends, if anything: null (refused with the SDK's
 * TypeError), a segment that is not a whole number (refused as one already resumed), a resume id
 * that is not text (taken), content that is not content.
 */
function resumeViolation(args: unknown): string | undefined {
  if (!isPlainObject(args)) return 'resume takes { fromSegment, content, resumeId? }';
  const { fromSegment, content, resumeId } = args;
  if (!isWholeNumber(fromSegment, 0)) return 'fromSegment must be a whole number';
  if (resumeId !== undefined && typeof resumeId !== 'string') return 'resumeId must be text';
  return contentViolation(content, 'content');
}

/** Whether a query was asked for a page (a raw client's odd arguments get the whole list). */
function isPageArgs(args: unknown): args is QueryPageArgs {
  return typeof args === 'object' && args !== null;
}

/**
 * The items of `list` from `page.from` whose JSON fits `page.maxBytes` with `spent` bytes already
 * in the answer; at least one when nothing is spent, however large, so a reader always moves on.
 * A bound that is not a number reads as 0: a raw client gets some page, never a failed query.
 */
function pageOf<T>(list: readonly T[], { from, maxBytes }: QueryPageArgs, spent = 0): T[] {
  const start = Number.isSafeInteger(from) && from > 0 ? from : 0;
  const limit = typeof maxBytes === 'number' && maxBytes > 0 ? maxBytes : 0;
  const page: T[] = [];
  let bytes = spent;
  for (let i = start; i < list.length; i++) {
    // Each item's JSON and the comma before it.
    const size = payloadBytes(list[i]) + 1;
    if ((page.length > 0 || spent > 0) && bytes + size > limit) break;
    page.push(list[i]!);
    bytes += size;
  }
  return page;
}
