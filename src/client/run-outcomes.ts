// How callers learn a segment's outcome without touching the run. Every waiter in a process on one
// run shares one long poll of the run's history, which follows it through continue-as-new and
// finds each segment's settle point there (a memo change, or a local activity's marker, that
// carries the outcome). Only a history quiet for a whole long poll makes it ask the run (a query).
// So a run's history is the same with a thousand observers as with one. Once the workflow has
// closed, its own result answers. A run that closes as it settles (its provider cannot resume) is
// waited for by its close event alone.
import { Client, QueryNotRegisteredError, WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  type SegmentOutcome,
  type SegmentOutcomeReply,
  type SubagentRunOutcome,
  segmentOutcomeQuery,
} from '../../workflows/definitions';
import { SubagentError } from '../seam/errors';
import {
  EventType,
  type HistoryEvent,
  closedOutcome,
  decodePayload,
  eventIdOf,
  isStalePageToken,
  runAfterReset,
  runInput,
  settledOutcome,
} from '../temporal/run-history';
import { isNotFound, isUnreachable, ridingOutOutages, toSubagentError } from '../temporal/errors';

const CLOSE_EVENT = temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT;
const CLOSING_EVENTS = new Set<number>([
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
]);
/** A query normally answers in milliseconds; one stuck without a worker is asked again later. */
const QUERY_DEADLINE_MS = 10_000;
const MAX_BACKOFF_MS = 5_000;
const MAX_ASK_INTERVAL_MS = 1_000;
/**
 * A long poll that comes back empty after this long found the history quiet (the server ends one
 * at 20 s). One can also come back empty at once, woken by a change that added no event: that is
 * no reason to ask the run, which would cost a query of its worker.
 */
const QUIET_POLL_MS = 10_000;

/** The run's workflow predates the outcome query: the caller falls back to the update it answers. */
export class OutcomeQueryMissing extends Error {}

interface Waiter {
  /** The segment waited for; a waiter that named none takes the run's current one at the first answer. */
  segment: number | undefined;
  reconnectWindowMs: number;
  resolve(outcome: ObservedOutcome): void;
  reject(err: unknown): void;
}

const byClient = new WeakMap<Client, Map<string, RunWatch>>();

/**
 * Connections whose server has paged a running run's history. A watch on one of them long-polls
 * from the run's start; on any other it reads the first page alone first, to find out: the
 * time-skipping test server pages no further, and its runs are asked instead.
 */
const pagingServers = new WeakSet<object>();

/**
 * Segment `segment`'s outcome (default: the current segment's) once it settles, waiting on the
 * process's one watch of the run. Rides out a server that is away for up to `reconnectWindowMs`.
 * The run itself is asked (a query) only once its history has been quiet for a long poll, for a
 * segment that settled before the settle record existed: a query that reaches the run while a
 * segment settles would split that workflow task in two, and so add events. `ask` asks at once.
 */
export function segmentOutcome(
  client: Client,
  runId: string,
  segment: number | undefined,
  {
    reconnectWindowMs,
    ask = false,
    closesOnSettle = false,
    temporalRunId,
  }: {
    reconnectWindowMs: number;
    ask?: boolean;
    closesOnSettle?: boolean;
    /** The workflow's current Temporal run, when the caller knows it (it just started it). */
    temporalRunId?: string | undefined;
  },
): Promise<ObservedOutcome> {
  let watches = byClient.get(client);
  if (!watches) byClient.set(client, (watches = new Map()));
  let watch = watches.get(runId);
  if (!watch) {
    const idle = () => watches.delete(runId);
    watch = new RunWatch(client, runId, idle, closesOnSettle, temporalRunId);
    watches.set(runId, watch);
  }
  return watch.wait(segment, reconnectWindowMs, ask);
}

/** A segment's outcome, and whether it was read from the run's close (the run has ended). */
export type ObservedOutcome = SegmentOutcome & { closed?: true };

class RunWatch {
  private readonly waiters = new Set<Waiter>();
  private readonly handle: WorkflowHandle;
  private readonly stop = new AbortController();
  private following = false;
  private checking = false;
  private recheck = false;
  private retry: NodeJS.Timeout | undefined;
  private checkBackoffMs = 100;
  /** The update id of the last resume the history showed accepted. */
  private resumeUpdateId: string | undefined;

  constructor(
    private readonly client: Client,
    private readonly runId: string,
    private readonly idle: () => void,
    /**
     * The run's provider cannot resume, so its workflow closes as its segment settles: the watch
     * waits for the close event alone, one long poll for the run's whole life (as `result()` does).
     */
    private readonly closesOnSettle: boolean,
    /** The Temporal run to read first, if known; otherwise the watch asks the server (a describe). */
    private readonly temporalRunId: string | undefined,
  ) {
    this.handle = client.workflow.getHandle(runId);
  }

  wait(segment: number | undefined, reconnectWindowMs: number, ask: boolean): Promise<ObservedOutcome> {
    return new Promise((resolve, reject) => {
      this.waiters.add({ segment, reconnectWindowMs, resolve, reject });
      if (!this.following) {
        this.following = true;
        void this.follow();
      }
      if (ask) this.check();
    });
  }

  /** Long-polls the history for new events, run after run, until no waiter is left. */
  private async follow(): Promise<void> {
    const { namespace } = this.client.options;
    let execution: { workflowId: string; runId?: string } = {
      workflowId: this.runId,
      ...(this.temporalRunId ? { runId: this.temporalRunId } : {}),
    };
    let nextPageToken: Uint8Array | undefined;
    let view: SegmentOutcomeReply | undefined;
    let unreachableSince: number | undefined;
    let backoff = 100;
    // The last event read of the current run: a read started again skips what came before it.
    let lastRead = 0;
    while (this.waiters.size > 0) {
      let events: HistoryEvent[];
      const probe = nextPageToken === undefined && !this.closesOnSettle && !pagingServers.has(this.client.connection);
      const polledAt = Date.now();
      try {
        // The run read is named (the one the caller's start made, or the current one a describe
        // finds): a reset that ends it is followed from it (`read`). A run that closes as it settles
        // needs no describe: its close answers wherever it comes.
        if (!this.closesOnSettle) execution.runId ??= await this.currentRunId();
        const response = await this.client.connection.withAbortSignal(this.stop.signal, () =>
          this.client.workflowService.getWorkflowExecutionHistory({
            namespace,
            execution,
            nextPageToken,
            // A run that closes as it settles: its close event alone, whenever it comes. Otherwise
            // long polls, after the start event alone, read at once, on a server not known to page.
            ...(this.closesOnSettle
              ? { waitNewEvent: true, historyEventFilterType: CLOSE_EVENT }
              : probe
                ? { maximumPageSize: 1 }
                : { waitNewEvent: true }),
          }),
        );
        events = (response.history?.events ?? []).filter((event) => eventIdOf(event) > lastRead);
        if (events.length > 0) lastRead = eventIdOf(events.at(-1)!);
        nextPageToken = response.nextPageToken ?? undefined;
        unreachableSince = undefined;
        backoff = 100;
      } catch (err) {
        if (this.stop.signal.aborted) return;
        if (isNotFound(err)) return this.rejectAll(this.unknown(err));
        if (nextPageToken && isStalePageToken(err)) {
          nextPageToken = undefined;
          continue;
        }
        if (!isUnreachable(err)) return this.rejectAll(toSubagentError(err, this.runId));
        unreachableSince ??= Date.now();
        this.rejectWhere((waiter) => Date.now() - unreachableSince! > waiter.reconnectWindowMs, err);
        await new Promise((resolve) => setTimeout(resolve, backoff));
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        continue;
      }
      let read: Awaited<ReturnType<RunWatch['read']>>;
      try {
        read = await this.read(events, view, execution.runId, (next) => {
          execution = next;
          nextPageToken = undefined;
          lastRead = 0;
        });
      } catch (err) {
        // A payload that cannot be read (gone from the payload store) will not be readable later.
        return this.rejectAll(toSubagentError(err, this.runId));
      }
      if (read === 'closed') return;
      view = read;
      // The history is read page by page: what it has not shown yet is no reason to give up.
      if (view) this.answer(view, false);
      // A running workflow has more than its start event: a server that pages no further (the
      // time-skipping test server, whose long polls wait only for events yet to come) is asked instead.
      if (probe && !nextPageToken?.length) return this.askNowAndThen();
      if (probe) pagingServers.add(this.client.connection);
      // A long poll that timed out: ask the run too, in case an answer was missed.
      if (events.length === 0 && Date.now() - polledAt >= QUIET_POLL_MS) this.check();
    }
  }

  /** The id of the workflow's current Temporal run. */
  private async currentRunId(): Promise<string> {
    const { workflowExecutionInfo } = await this.client.connection.withAbortSignal(this.stop.signal, () =>
      this.client.workflowService.describeWorkflowExecution({
        namespace: this.client.options.namespace,
        execution: { workflowId: this.runId },
      }),
    );
    return workflowExecutionInfo?.execution?.runId ?? '';
  }

  /**
   * Reads one page of events of Temporal run `temporalRunId` into `view`: the segment a run's start
   * carries, an accepted resume, a settle point; `moveTo` the next run at a continue-as-new, and at
   * a reset's termination to the run the reset made, whose view is read again from its start (its
   * copies up to the reset point stand). Returns 'closed' once the workflow has closed (its
   * waiters answered).
   */
  private async read(
    events: HistoryEvent[],
    view: SegmentOutcomeReply | undefined,
    temporalRunId: string | undefined,
    moveTo: (execution: { workflowId: string; runId?: string }) => void,
  ): Promise<SegmentOutcomeReply | undefined | 'closed'> {
    const converter = this.client.options.loadedDataConverter;
    for (const event of events) {
      const type = event.eventType ?? 0;
      if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED && temporalRunId !== undefined) {
        const windowMs = Math.max(0, ...[...this.waiters].map((waiter) => waiter.reconnectWindowMs));
        const next = await ridingOutOutages(() => runAfterReset(this.client, this.runId, temporalRunId), {
          windowMs,
          signal: this.stop.signal,
        });
        if (next) {
          moveTo({ workflowId: this.runId, runId: next });
          return undefined;
        }
      }
      if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) {
        await this.settleClosed(await closedOutcome(converter, event));
        return 'closed';
      }
      if (CLOSING_EVENTS.has(type)) {
        await this.settleClosed();
        return 'closed';
      }
      if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) {
        const { carried } = await runInput(converter, event);
        view = {
          segment: carried?.segment ?? 0,
          resuming: false,
          ...(carried?.previous ? { previous: carried.previous } : {}),
        };
      } else if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED && view) {
        const request = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
        if (request?.input?.name === 'resume') {
          view.resuming = true;
          this.resumeUpdateId = request.meta?.updateId ?? undefined;
        }
      } else if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED && view?.resuming) {
        // The resume that began this segment, sent again (its answer lost), is answered with this
        // segment: it begins no other. Its small answer is read, not its arguments, which carry
        // the resume's content (perhaps megabytes, in the payload store).
        const completed = event.workflowExecutionUpdateCompletedEventAttributes;
        const updateId = completed?.meta?.updateId;
        if (updateId && updateId === this.resumeUpdateId) {
          const answer = await decodePayload(converter, completed.outcome?.success?.payloads);
          if ((answer as { segment?: number } | undefined)?.segment === view.segment) view.resuming = false;
        }
      } else if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW) {
        const runId = event.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
        moveTo({ workflowId: this.runId, ...(runId ? { runId } : {}) });
      } else if (view) {
        const settled = await settledOutcome(converter, event);
        if (settled) view.settled = settled;
      }
    }
    return view;
  }

  /** For a server that shows no history: asks the run, at most a second apart, until no waiter is left. */
  private async askNowAndThen(): Promise<void> {
    for (let interval = 50; this.waiters.size > 0; interval = Math.min(interval * 2, MAX_ASK_INTERVAL_MS)) {
      this.check();
      await new Promise((resolve) => setTimeout(resolve, interval));
    }
  }

  /** Asks the run where its segments stand (a query); a call while one is out asks once more after it. */
  private check(): void {
    if (this.checking) {
      this.recheck = true;
      return;
    }
    this.checking = true;
    clearTimeout(this.retry);
    void (async () => {
      do {
        this.recheck = false;
        await this.checkOnce();
      } while (this.recheck && this.waiters.size > 0);
      this.checking = false;
    })();
  }

  /**
   * The run's own answer, for a waiter that joins after the settle point (the history shows it
   * too, but a segment settled before the settle record existed shows nothing).
   */
  private async checkOnce(): Promise<void> {
    let reply: SegmentOutcomeReply;
    try {
      reply = await this.client.connection.withDeadline(Date.now() + QUERY_DEADLINE_MS, () =>
        this.handle.query(segmentOutcomeQuery),
      );
      this.checkBackoffMs = 100;
    } catch (err) {
      if (err instanceof QueryNotRegisteredError) return this.rejectAll(new OutcomeQueryMissing(err.message));
      if (err instanceof WorkflowNotFoundError) return this.rejectAll(this.unknown(err));
      // No worker to answer, or the server away: the history poll decides whether to give up.
      if (this.waiters.size > 0) {
        this.retry = setTimeout(() => this.check(), this.checkBackoffMs);
        this.checkBackoffMs = Math.min(this.checkBackoffMs * 2, MAX_BACKOFF_MS);
      }
      return;
    }
    this.answer(reply, true);
  }

  /**
   * Answers every waiter whose segment `view` shows settled. A complete view (the run's own
   * answer) also refuses a waiter for a segment the run will never have again.
   */
  private answer(view: SegmentOutcomeReply, complete: boolean): void {
    for (const waiter of this.waiters) {
      // A waiter that joins while a resume is under way waits for the segment it starts.
      waiter.segment ??= view.resuming ? view.segment + 1 : view.segment;
      const wanted = waiter.segment;
      const outcome = [view.settled, view.previous].find((known) => known?.segment === wanted);
      if (outcome) this.settle(waiter, () => waiter.resolve(outcome));
      else if (complete && wanted !== view.segment && !(wanted === view.segment + 1 && view.resuming)) {
        const gone = this.noSegment(wanted, view.segment);
        this.settle(waiter, () => waiter.reject(gone));
      }
    }
  }

  /** The workflow closed: its result (`known`, from its close event, or asked for) is its last segment's outcome. */
  private async settleClosed(known?: SubagentRunOutcome): Promise<void> {
    let closed: SubagentRunOutcome;
    try {
      closed = known ?? (await this.handle.result());
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return this.rejectAll(this.unknown(err));
      // Terminated or timed out by an operator: no result was produced, which is a child-level failure.
      const diagnostic = `the run's workflow ended without a result: ${(err as Error).message}`;
      for (const waiter of this.waiters) {
        const outcome = {
          segment: waiter.segment ?? 0,
          result: { output: [], stopReason: 'error' as const, diagnostic },
          closed: true as const,
        };
        this.settle(waiter, () => waiter.resolve(outcome));
      }
      return;
    }
    for (const waiter of this.waiters) {
      const wanted = waiter.segment ?? closed.segment;
      const { segment, result } = closed.previous?.segment === wanted ? closed.previous : closed;
      if (segment === wanted) this.settle(waiter, () => waiter.resolve({ segment, result, closed: true }));
      else {
        const error =
          wanted > closed.segment
            ? new SubagentError(
                `run ${this.runId} closed at segment ${closed.segment} before segment ${wanted} began`,
                'NOT_RESUMABLE',
              )
            : this.noSegment(wanted, closed.segment);
        this.settle(waiter, () => waiter.reject(error));
      }
    }
  }

  private noSegment(wanted: number, current: number): SubagentError {
    return new SubagentError(`run ${this.runId} has no segment ${wanted} (current: ${current})`, 'UNKNOWN_RUN');
  }

  private unknown(cause: unknown): SubagentError {
    return new SubagentError(`no subagent run with id "${this.runId}"`, 'UNKNOWN_RUN', { cause });
  }

  private rejectAll(err: unknown): void {
    this.rejectWhere(() => true, err);
  }

  private rejectWhere(gaveUp: (waiter: Waiter) => boolean, err: unknown): void {
    for (const waiter of this.waiters) if (gaveUp(waiter)) this.settle(waiter, () => waiter.reject(err));
  }

  /** Answers one waiter; the last one answered ends the watch. */
  private settle(waiter: Waiter, answer: () => void): void {
    if (!this.waiters.delete(waiter)) return;
    answer();
    if (this.waiters.size > 0) return;
    this.idle();
    this.stop.abort();
    clearTimeout(this.retry);
  }
}
