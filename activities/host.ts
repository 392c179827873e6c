// What every activity of a worker shares: its dependencies, heartbeating with cancellation that
// waits for the work to stop, the run's context from the worker's cache or its workflow, the
// hosted provider by name, the payload limit on what an activity returns, the failure types no
// retry can fix, and streamed text handed to the run's observers in batches.
import { createHash, randomBytes } from 'node:crypto';
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import { MAX_TIMER_MS, payloadLimitViolation } from '../src/seam/constants';
import { messageOf } from '../src/seam/errors';
import { canonicalJson } from '../src/seam/json';
import type { ContentBlock } from '../src/seam/content';
import type { SubagentApprovalDecision, SubagentPermissionDecision } from '../src/seam/result';
import type { SubagentDelegate, SubagentDelegatingRun } from '../src/seam/delegation';
import type { SubagentRun } from '../src/seam/run';
import type {
  SubagentAgentProvider,
  SubagentHostedProvider,
  SubagentModelPrices,
  SubagentTurnProvider,
} from '../src/seam/provider';
import { CachedRunContext, RunContextCache } from './run-context-cache';
import {
  FINAL_FAILURE_TYPES,
  type RequestApprovalArgs,
  type ReserveTokensArgs,
  type RunContextSnapshot,
  type TextDeltaArgs,
  type TurnActivityInput,
} from './types';
import type { SubagentNestedStartRequest, SubagentSessionEvent, TranscriptEntry } from '../src/seam/request';

export interface ActivityDependencies {
  providers: ReadonlyMap<string, SubagentHostedProvider>;
  /**
   * Reads the run's request and conversation from its workflow (a query: nothing is recorded).
   * `queryRunContext` reads it a page at a time, as one answer cannot pass the server's 2 MiB.
   */
  fetchRunContext(runId: string): Promise<RunContextSnapshot>;
  /** Reads all the messages waiting for the run's next turn from its workflow (a query). */
  fetchPendingMessages(runId: string): Promise<ContentBlock[][]>;
  /**
   * The same from position `from` on (`queryPendingMessages`, a page at a time), used instead
   * where given: a turn that took some already reads only those after them.
   */
  fetchPendingMessagesFrom?(runId: string, from: number): Promise<ContentBlock[][]>;
  /** Records a permission decision in the run's history (a signal to its workflow). */
  recordPermission?(runId: string, decision: SubagentPermissionDecision): Promise<void>;
  /**
   * Asks the run for an approval (an update to its workflow) and resolves with the decision, or
   * rejects when `signal` aborts first.
   */
  requestApproval?(runId: string, args: RequestApprovalArgs, signal: AbortSignal): Promise<SubagentApprovalDecision>;
  /** Records a batch of streamed text in the run's history (a signal to its workflow). */
  publishText?(runId: string, delta: TextDeltaArgs): Promise<void>;
  /**
   * If the activity's previous attempt timed out, sends the Temporal run's next workflow tasks to
   * its task queue instead of the sticky queue of the worker that last ran it
   * (`ResetStickyTaskQueue`; any worker then replays it).
   */
  releaseAfterTimeout?(execution: { workflowId: string; runId: string }, activityId: string): Promise<void>;
  /**
   * Reserves one model call's estimated tokens from its provider's token limiter (an update to the
   * limiter workflow, which it starts if none runs) and resolves with when the call may be sent
   * (epoch ms). Rejects with an `OVER_TOKEN_BURST` failure for a call no wait lets through.
   */
  reserveTokens?(provider: string, args: ReserveTokensArgs): Promise<{ startAt: number }>;
  /** Charges what a call used beyond its reservation to its provider's token limiter (a signal). */
  chargeTokens?(provider: string, args: ReserveTokensArgs): Promise<void>;
  /** Prices each model call (`costUsd`); a model it lacks costs 0. */
  modelPrices?: SubagentModelPrices;
  /** When a streaming turn or model call hands its text on (default `TEXT_BATCHES`). */
  textBatches?: TextBatches;
  cache?: RunContextCache;
  /** How often the host heartbeats while an activity runs; cancellation arrives with heartbeats. */
  heartbeatIntervalMs?: number;
  /** How long cancelled work may take to stop before the activity reports cancellation anyway. */
  cancelGraceMs?: number;
  maxPayloadBytes: number;
  /** Longest tool output handed back to the model; longer output is cut with a note. */
  maxToolOutputBytes?: number;
  /** Offered to providers as `context.delegate`: nested runs through the worker's service. */
  delegate?: SubagentDelegate;
}

type Driver = 'turns' | 'agent-loop';

export interface ActivityHost {
  readonly deps: ActivityDependencies;
  readonly cache: RunContextCache;
  /**
   * Runs `work` heartbeating; a cancelled activity reports cancellation whatever `work` threw,
   * with `cancelDetails()` as the cancellation's details when given (what the work had done).
   * A retried attempt clears the details its previous attempt left, unless `carryDetails`: then
   * they are sent again until `work` sets its own.
   */
  heartbeating<T>(
    work: (setDetails: (details: unknown) => void) => Promise<T>,
    options?: { cancelDetails?: () => unknown; carryDetails?: boolean },
  ): Promise<T>;
  /** The run's request and its conversation before `ref`: the worker's cache if it is exact, else the workflow's. */
  runContext(
    runId: string,
    ref: TurnActivityInput['transcript'],
    request: TurnActivityInput['request'],
  ): Promise<CachedRunContext>;
  /**
   * The run's request, its conversation before `ref`, and the `tail` of entries after it, which an
   * activity input either carries (`entries`, runs from before store-once) or only counts
   * (`length`, with the ids of a leading tool entry's results). A counted tail comes from this
   * worker's caches when it holds every entry exactly (tool results it produced, a first turn's
   * prompt from the request), else from the workflow with one query.
   */
  conversation(
    runId: string,
    ref: TurnActivityInput['transcript'],
    request: TurnActivityInput['request'],
    tail: { entries?: TranscriptEntry[]; length?: number; toolResultIds?: string[] },
  ): Promise<CachedRunContext & { tail: TranscriptEntry[] }>;
  /** The provider hosted under `name` for `driver`; `NO_PROVIDER` (not retried) otherwise. */
  hosted<K extends Driver>(name: string, driver: K): K extends 'turns' ? SubagentTurnProvider : SubagentAgentProvider;
  /** Fails for good with `PAYLOAD_TOO_LARGE` when `value` would not fit in one payload. */
  assertWithinLimit(value: unknown, what: string): void;
  /**
   * Hands the text the current activity's turn streams to the run's observers (`textPublisher`,
   * batched by `textBatches`); undefined when the worker publishes none.
   */
  textPublisher(runId: string, turn: number): TextPublisher | undefined;
}

/**
 * How streamed text is handed on: first after 250 ms, then at most every second, and at most 2,000
 * batches and 8 MiB of text for one attempt of a call or turn (`textPublisher` says how).
 */
export const TEXT_BATCHES: TextBatches = { firstMs: 250, maxMs: 1000, maxBatches: 2000, maxBytes: 8 * 1024 * 1024 };

/**
 * The most a batch holds (UTF-8); a full batch is sent at once, however long its wait, and a
 * longer piece of text is cut. As JSON, even text of escaped control characters (6 bytes each)
 * stays within the 2 MiB a payload may take.
 */
export const MAX_BATCH_BYTES = 256 * 1024;

/** When streamed text is handed on: see `textPublisher`. */
export interface TextBatches {
  firstMs: number;
  maxMs: number;
  /** The most batches the first attempt of a call or turn sends; each retry sends half as many as the one before. */
  maxBatches?: number;
  /** The most bytes of text and reasoning (UTF-8) the first attempt sends; each retry half as many. */
  maxBytes?: number;
}

export interface TextPublisher {
  add(delta: string): void;
  /** The child's reasoning, in the same batches as its text. */
  addReasoning(delta: string): void;
  close(): Promise<void>;
}

/** One batch of streamed text: what the child said, and what it reasoned, since the last. */
export type TextBatch = Pick<TextDeltaArgs, 'text' | 'reasoning'>;

export function createActivityHost(deps: ActivityDependencies): ActivityHost {
  const cache = deps.cache ?? new RunContextCache();
  const heartbeatIntervalMs = deps.heartbeatIntervalMs ?? 1000;
  const cancelGraceMs = deps.cancelGraceMs ?? 10_000;
  /** Best effort: a run that closed meanwhile needs nothing, and a failure costs only the wait. */
  const releaseWorkflow = async (activity: Context) => {
    const execution = activity.info.workflowExecution;
    if (!deps.releaseAfterTimeout || !execution) return;
    try {
      await deps.releaseAfterTimeout(execution, activity.info.activityId);
    } catch (err) {
      activity.log.warn('could not release the run from its last worker', { error: String(err) });
    }
  };

  return {
    deps,
    cache,

    async heartbeating(work, { cancelDetails, carryDetails = false } = {}) {
      const activity = Context.current();
      let cancellation: CancelledFailure | undefined;
      activity.cancelled.catch((err: CancelledFailure) => {
        cancellation = err;
      });
      // What the previous attempt last sent stays on the server until this one heartbeats: a
      // rate-limit wait it was in would read as this attempt's, so it is cleared at once (the
      // attempt's first heartbeat is not throttled). A first attempt sends nothing here.
      let details: unknown = carryDetails ? activity.info.heartbeatDetails : undefined;
      if (!carryDetails && activity.info.heartbeatDetails !== undefined) activity.heartbeat(undefined);
      // From the first moment, fetching the run's context included (it may wait on the workflow's
      // worker). A turn shorter than one interval sends no heartbeat at all.
      const timer = setInterval(() => activity.heartbeat(details), heartbeatIntervalMs);
      // An earlier attempt that timed out most likely died with its worker, which held the run's
      // workflow too (an activity starts on the worker that scheduled it): the task after this
      // attempt would wait out that worker's sticky queue (1 s) before another worker took it.
      // Released, it goes to any worker at once; if that worker lives after all, a replay is the
      // whole cost.
      const released = activity.info.attempt > 1 ? releaseWorkflow(activity) : undefined;
      const setDetails = (progress: unknown) => {
        details = progress;
        activity.heartbeat(progress);
      };
      const cancelled = () => {
        const done = cancelDetails?.();
        return done === undefined ? cancellation! : new CancelledFailure(cancellation!.message, [done]);
      };
      try {
        const result = await untilStoppedOrGrace(work(setDetails), activity.cancellationSignal, cancelGraceMs);
        if (cancellation) throw cancelled();
        await released;
        return result;
      } catch (err) {
        throw cancellation ? cancelled() : finalIfUnfixable(err);
      } finally {
        clearInterval(timer);
      }
    },

    async runContext(runId, ref, request) {
      const cached = cache.lookup(runId, ref);
      if (cached) return cached;
      const fresh: CachedRunContext =
        request && ref.length === 0 ? { request, entries: [] } : await deps.fetchRunContext(runId);
      // A fetched conversation may already hold later entries; keep only what came before `ref`.
      fresh.entries = fresh.entries.slice(0, ref.length);
      cache.put(runId, fresh);
      return fresh;
    },

    async conversation(runId, ref, request, tail) {
      if (tail.entries) return { ...(await this.runContext(runId, ref, request)), tail: tail.entries };
      const length = tail.length ?? 0;
      // A run's first call needs nothing fetched: the request holds its seed and its prompt.
      const seed = request?.seed?.entries ?? [];
      const before =
        cache.lookup(runId, ref) ?? (request && ref.length === seed.length ? { request, entries: seed } : undefined);
      if (before) {
        const local: TranscriptEntry[] = [];
        if (tail.toolResultIds) {
          const results = cache.toolResultsFor(runId, tail.toolResultIds);
          if (results) local.push({ kind: 'tool', results });
        }
        // Messages the workflow told this worker of as it appended them (a sink).
        const executionRunId = Context.current().info.workflowExecution?.runId;
        while (executionRunId && local.length < length) {
          const entry = cache.takeUserEntry(executionRunId, ref.length + local.length);
          if (!entry) break;
          local.push(entry);
        }
        if (request && before.entries.length === seed.length && local.length === 0 && length === 1) {
          local.push({ kind: 'user', content: request.prompt });
        }
        if (local.length === length) return { ...before, tail: local };
      }
      const fetched = await deps.fetchRunContext(runId);
      const entries = fetched.entries.slice(0, ref.length + length);
      if (entries.length < ref.length + length) {
        // Only a workflow that is not the one this input came from could be shorter: fail, retry.
        throw ApplicationFailure.retryable(
          `run ${runId} has ${fetched.entries.length} conversation entries, fewer than the ${ref.length + length} this call needs`,
          'CONVERSATION_MISMATCH',
        );
      }
      const context = { request: fetched.request, entries: entries.slice(0, ref.length) };
      cache.put(runId, context);
      return { ...context, tail: entries.slice(ref.length) };
    },

    hosted<K extends Driver>(name: string, driver: K) {
      const provider = deps.providers.get(name);
      if (!provider || (provider.driver ?? 'turns') !== driver) {
        throw ApplicationFailure.nonRetryable(
          `this worker does not host ${driver} provider "${name}" (it hosts: ${[...deps.providers.keys()].join(', ')})`,
          'NO_PROVIDER',
        );
      }
      return provider as K extends 'turns' ? SubagentTurnProvider : SubagentAgentProvider;
    },

    assertWithinLimit(value, what) {
      const violation = payloadLimitViolation(value, deps.maxPayloadBytes, what);
      if (violation) throw ApplicationFailure.nonRetryable(violation, 'PAYLOAD_TOO_LARGE');
    },

    textPublisher(runId, turn) {
      const { publishText, textBatches = TEXT_BATCHES } = deps;
      if (!publishText) return undefined;
      const { info, log } = Context.current();
      const { attempt } = info;
      // Every attempt of a turn adds to the one Temporal run the turn holds from continuing as new:
      // halving the budget with each retry keeps all of them together under twice the first's.
      const share = (budget: number) => Math.floor(budget / 2 ** (attempt - 1));
      const maxBatches = share(textBatches.maxBatches ?? TEXT_BATCHES.maxBatches!);
      const maxBytes = share(textBatches.maxBytes ?? TEXT_BATCHES.maxBytes!);
      if (maxBatches < 1 || maxBytes < 1) return undefined;
      return textPublisher(
        (batch) => publishText(runId, { turn, attempt, ...batch }),
        { ...textBatches, maxBatches, maxBytes },
        // Logged once an attempt, not once a batch: what observers missed, the result still holds.
        (err) => log.warn(`streamed text of run ${runId} could not reach its observers`, { error: messageOf(err) }),
      );
    },
  };
}

/**
 * Hands streamed text and reasoning on in batches, in order. The first goes `firstMs` after the
 * text begins, so a call that ends sooner publishes nothing (its result holds the whole text); each
 * wait after it is twice the one before, up to `maxMs`: the first words come soon, and a long
 * answer costs a batch per `maxMs` (each batch is a history event and a workflow task). A turn is
 * one activity, and its run cannot continue as new until it ends, so what one attempt sends is
 * bounded: after the first quarter of `maxBatches`, each wait is longer than the last, doubling
 * with every sixteenth, and past `maxBatches` nothing more is sent (at 1 s and 2,000, text that
 * never stops reaches the budget after about eight days); nor past `maxBytes` of text, and a batch
 * holds at most `MAX_BATCH_BYTES`, sent at once when full. Past a budget the text is not kept
 * either (the call's result holds what it answers). `close` drops what is not sent yet, unless the
 * waits have grown past `maxMs` (it may be an earlier prompt's, not the result's), and waits for
 * what is sent, so every batch is in history before the call's result. A batch that cannot be sent
 * is skipped, and the first one skipped is handed to `onSkipped` with why.
 */
export function textPublisher(
  publish: (batch: TextBatch) => Promise<void>,
  { firstMs, maxMs, maxBatches = TEXT_BATCHES.maxBatches!, maxBytes = TEXT_BATCHES.maxBytes! }: TextBatches,
  onSkipped?: (err: unknown) => void,
): TextPublisher {
  const steady = Math.floor(maxBatches / 4);
  const doubling = maxBatches / 16;
  let text = '';
  let reasoning = '';
  let timer: NodeJS.Timeout | undefined;
  let sending = Promise.resolve();
  let waitMs = firstMs;
  let sent = 0;
  /** Bytes of text taken (sent, or in the batch under way), and in the batch under way. */
  let taken = 0;
  let pending = 0;
  /** Once a budget is spent nothing more is taken. */
  let spent = false;
  let skipped = false;
  const skip = (err: unknown) => {
    if (!skipped) onSkipped?.(err);
    skipped = true;
  };
  const flush = () => {
    timer = undefined;
    if (text || reasoning) {
      const batch: TextBatch = { text, ...(reasoning ? { reasoning } : {}) };
      text = reasoning = '';
      pending = 0;
      sent++;
      if (sent >= maxBatches) spent = true;
      sending = sending.then(() => publish(batch)).catch(skip);
    }
    // A longer wait than a Node timer holds would fire at once.
    waitMs =
      sent < steady ? Math.min(waitMs * 2, maxMs) : Math.min(maxMs * 2 ** ((sent - steady) / doubling), MAX_TIMER_MS);
  };
  /**
   * Adds `piece` to the batch under way, unless a budget is spent: a full batch goes at once, and
   * the batch under way goes first if `piece` would overfill it.
   */
  const put = (piece: string, reasoningPiece: boolean) => {
    const bytes = Buffer.byteLength(piece);
    if (!spent && taken + bytes > maxBytes) {
      // Nothing after it either: observers see the text's beginning whole, the result the rest.
      spent = true;
    }
    if (!spent && pending + bytes > MAX_BATCH_BYTES) sendNow();
    if (spent) return;
    taken += bytes;
    pending += bytes;
    if (reasoningPiece) reasoning += piece;
    else text += piece;
    if (pending >= MAX_BATCH_BYTES) sendNow();
    else timer ??= setTimeout(flush, waitMs);
  };
  const sendNow = () => {
    clearTimeout(timer);
    flush();
  };
  return {
    add(delta) {
      for (const piece of pieces(delta)) put(piece, false);
    },
    addReasoning(delta) {
      for (const piece of pieces(delta)) put(piece, true);
    },
    async close() {
      clearTimeout(timer);
      // Once the waits have grown, what waits may be an earlier prompt's last words, which the
      // turn's result (its last prompt's) does not hold; before, it is at most `maxMs` of the
      // result's own text.
      if (waitMs > maxMs && sent < maxBatches) flush();
      text = reasoning = '';
      await sending;
    },
  };
}

/** UTF-16 units in a piece of streamed text: at most 3 bytes of UTF-8 each, a quarter of a batch. */
const PIECE_UNITS = Math.floor(MAX_BATCH_BYTES / 12);

/** `delta` in pieces of at most `PIECE_UNITS`, none ending inside a surrogate pair. */
function pieces(delta: string): string[] {
  if (delta.length <= PIECE_UNITS) return [delta];
  const cut: string[] = [];
  for (let start = 0; start < delta.length;) {
    let end = Math.min(start + PIECE_UNITS, delta.length);
    const last = delta.charCodeAt(end - 1);
    if (end < delta.length && last >= 0xd800 && last <= 0xdbff) end--;
    cut.push(delta.slice(start, end));
    start = end;
  }
  return cut;
}

/** A failure of a type no retry can fix (`FINAL_FAILURE_TYPES`), made final if it is not yet. */
function finalIfUnfixable(err: unknown): unknown {
  if (!(err instanceof ApplicationFailure) || err.nonRetryable || !FINAL_FAILURE_TYPES.includes(err.type ?? '')) {
    return err;
  }
  const { message, type, details, cause } = err;
  return ApplicationFailure.create({
    message,
    type: type ?? undefined,
    details: details ?? undefined,
    cause,
    nonRetryable: true,
  });
}

/**
 * The run an activity works for: its workflow's id, which is the run's id. (Inputs from before
 * 2026-12 also name it.)
 */
export function runOf(input: { runId?: string }): string {
  const runId = input.runId ?? Context.current().info.workflowExecution?.workflowId;
  if (runId === undefined) throw ApplicationFailure.nonRetryable('this activity runs only in a subagent run', 'NO_RUN');
  return runId;
}

/**
 * `delegate` as the activity identified by `callKey` offers it to its provider or tool: a
 * delegation without an idempotency key of its own gets one made of `callKey`, the provider and
 * the request, and how many identical delegations the attempt made before it. So a retried
 * attempt (its worker died, it timed out) that delegates the same again joins the run its
 * earlier attempt started, running or closed, instead of starting a second one; a delegation the
 * earlier attempt did not make starts its own run. The runs are cancelled with the activity only
 * when its run cancels it (`cancelledByItsRun`).
 */
export function keyedDelegation(
  delegate: SubagentDelegate,
  activityRun: SubagentDelegatingRun,
  callKey: string,
): (
  provider: string,
  request: SubagentNestedStartRequest,
  parentEvents?: readonly SubagentSessionEvent[],
) => SubagentRun {
  const made = new Map<string, number>();
  // Made at the first delegation: most activities delegate nothing.
  let parent: SubagentDelegatingRun | undefined;
  return (provider, request, parentEvents) => {
    parent ??= { ...activityRun, signal: cancelledByItsRun(activityRun.signal) };
    const as = parentEvents === undefined ? parent : { ...parent, events: parentEvents };
    if (request.idempotencyKey !== undefined) return delegate(provider, request, as);
    const { signal: _signal, ...wire } = request;
    const fingerprint = createHash('sha256')
      .update(canonicalJson({ provider, request: wire }))
      .digest('hex');
    const nth = made.get(fingerprint) ?? 0;
    made.set(fingerprint, nth + 1);
    return delegate(provider, { ...request, idempotencyKey: `${callKey}/${fingerprint}/${nth}` }, as);
  };
}

/**
 * What cancels the runs an activity delegated to: `signal` aborting because the activity's run
 * cancelled it (`CANCELLED`). An attempt that ends otherwise (it timed out, its worker shuts
 * down, it was paused) leaves them running, for its retry to join.
 */
function cancelledByItsRun(signal: AbortSignal): AbortSignal {
  const byRun = new AbortController();
  const follow = () => {
    const { reason } = signal;
    if (!(reason instanceof CancelledFailure) || reason.message === 'CANCELLED') byRun.abort(reason);
  };
  if (signal.aborted) follow();
  else signal.addEventListener('abort', follow, { once: true });
  return byRun.signal;
}

/**
 * A new id for an entry of a run's conversation (an output, a tool result). Ids only tell a run's
 * entries apart, and each is stored in history twice (where it is made and where it is used):
 * 72 random bits in 12 characters.
 */
export function newEntryId(): string {
  return randomBytes(9).toString('base64url');
}

/** The work's result; once `signal` aborts, at most `graceMs` more of waiting for it. */
async function untilStoppedOrGrace<T>(work: Promise<T>, signal: AbortSignal, graceMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  // Rejects only if the grace runs out while the race is on, so it never rejects unobserved.
  const graceOver = new Promise<never>((_, reject) => {
    onAbort = () => {
      timer = setTimeout(() => reject(signal.reason), graceMs);
    };
  });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await Promise.race([work, graceOver]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}
