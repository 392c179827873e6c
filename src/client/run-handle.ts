// The caller's handle on one segment of a durable run: `SubagentRun` over a workflow. Operations
// are Temporal calls on the run's workflow id; the handle remembers what it has observed (its
// segment, whether it settled) so misuse fails synchronously with a typed error.
import { randomUUID } from 'node:crypto';
import {
  Client,
  WorkflowHandle,
  WorkflowNotFoundError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import {
  SUBAGENT_RUN_WORKFLOW,
  type SegmentOutcome,
  type SegmentResultReply,
  disposeUpdate,
  resumeUpdate,
  segmentResultUpdate,
  sendMessageSignal,
  statusQuery,
  wakeUpdate,
} from '../../workflows/definitions';
import type { subagentRunWorkflow } from '../../workflows/subagent-run';
import type { ContentBlock } from '../seam/content';
import { SubagentError } from '../seam/errors';
import { RUN_SPEND } from '../seam/budget';
import type { SubagentResult } from '../seam/result';
import type { SubagentLogger, SubagentRun, SubagentRunEvent, SubagentRunEventsOptions } from '../seam/run';
import { SubagentEvents } from './events';
import { approveRequest } from './run-approvals';
import { runEvents } from './run-events';
import { type ObservedOutcome, OutcomeQueryMissing, segmentOutcome } from './run-outcomes';
import { isTaskFailing, isUnreachable, isUpdateDropped, ridingOutOutages, toSubagentError } from '../temporal/errors';
import { assertPayloadWithin, contentBlocks, readCallerInput } from './validate';

export interface RunHandleContext {
  client: Client;
  events: SubagentEvents;
  logger: SubagentLogger;
  maxPayloadBytes: number;
  startTimeoutMs: number;
  reconnectWindowMs: number;
}

/** How a segment stopped before it began: `begin()` starts it so, and the provider is never called. */
export type StopAtStart = 'cancelled' | 'disposed';

export interface RunHandleInit {
  runId: string;
  provider: string;
  /** Known for a start or a resume; learned from the workflow for an attached run. */
  segment?: number;
  steering: boolean;
  resumable: boolean;
  /**
   * Creates the segment on the server (start workflow, or resume update), within the start
   * deadline. Called one microtask after the handle exists, so a `cancel()` or `dispose()` in the
   * same tick as `start()` reaches it as `stopAtStart`. Resolves with whether the segment began
   * so stopped (false when the call joined a run that already existed: a keyed start), and the
   * Temporal run it started, if it started one.
   */
  begin?: (stopAtStart: StopAtStart | undefined) => Promise<Begun>;
  /** Emit `subagent/start` and `subagent/end` for this segment (not for attached runs). */
  emitEvents: boolean;
}

/** What `begin()` did: whether the segment began as asked, and the Temporal run a start made. */
export interface Begun {
  applied: boolean;
  temporalRunId?: string;
}

type RunWorkflowHandle = WorkflowHandle<typeof subagentRunWorkflow>;

export class RunHandle {
  readonly run: SubagentRun;
  private readonly handle: RunWorkflowHandle;
  private readonly started: Promise<void>;
  private segment: number | undefined;
  private outcome: ObservedOutcome | undefined;
  private cancelRequested = false;
  private cancelReason: string | undefined;
  private stopAtStart: StopAtStart | undefined;
  private begun: boolean;
  private resumed = false;
  private disposed = false;
  private signalChain: Promise<void> = Promise.resolve();
  /**
   * The outage the messages on their way meet: since when the server has been unreachable, and
   * when (and why) a message was last given up on for it. Cleared by a message that lands.
   */
  private outage: { since: number; gaveUpAt?: number; error?: unknown } | undefined;
  private disposing: Promise<void> | undefined;
  /** The Temporal run this handle's start made: the watch of its result reads it without asking which. */
  private temporalRunId: string | undefined;

  constructor(
    private readonly context: RunHandleContext,
    private readonly init: RunHandleInit,
  ) {
    this.handle = context.client.workflow.getHandle<typeof subagentRunWorkflow>(init.runId);
    this.segment = init.segment;
    const { begin } = init;
    this.begun = !begin;
    this.started = begin
      ? Promise.resolve().then(async () => {
          this.begun = true;
          const stopAtStart = this.stopAtStart;
          const { applied, temporalRunId } = await begin(stopAtStart);
          this.temporalRunId = temporalRunId;
          // A keyed start that joined a running run could not start it cancelled: cancel it now.
          if (!applied && stopAtStart === 'cancelled') this.requestCancel();
        })
      : this.assertSubagentRun();
    const result = this.started
      .then(() => this.awaitOutcome())
      .then((outcome) => {
        this.outcome = outcome;
        this.segment = outcome.segment;
        return outcome.result;
      })
      .catch((err: unknown) => {
        throw toSubagentError(err, init.runId);
      });
    if (init.emitEvents) this.emitEvents(result);

    const run: SubagentRun = {
      id: init.runId,
      result,
      cancel: (reason) => this.cancel(reason),
      dispose: () => this.dispose(),
    };
    if (init.steering) run.sendMessage = (content) => this.sendMessage(content);
    if (init.resumable) run.resume = (content) => this.resume(content);
    run.events = (options) => this.events(options);
    run.approve = async (requestId, answer) => {
      await this.started;
      return approveRequest(this.context.client, init.runId, requestId, answer);
    };
    // Not part of the seam's shape: lets `runStarted` wait until the run exists on the server.
    Object.defineProperty(run, STARTED, { value: this.started });
    Object.defineProperty(run, RUN_SPEND, { get: () => this.outcome?.spend });
    this.run = run;
  }

  /**
   * An attached id names a workflow this handle did not start: it may be another type's (its id
   * only looks like a run's). Resolves once the server shows a subagent run there; rejects with
   * `UNKNOWN_RUN` otherwise, before any call (cancel, message, dispose, events) reaches it, and
   * rides out an unreachable server as waiting for a result does.
   */
  private async assertSubagentRun(): Promise<void> {
    const { runId } = this.init;
    let type: string;
    try {
      type = await workflowTypeAt(this.context.client, runId, async () => {
        const description = await this.ridingOutOutages(
          () => this.handle.describe(),
          (err) => err instanceof WorkflowNotFoundError,
        );
        return description.type;
      });
    } catch (err) {
      throw toSubagentError(err, runId);
    }
    if (type !== SUBAGENT_RUN_WORKFLOW) {
      throw new SubagentError(`"${runId}" is not a subagent run: it is a workflow of type "${type}"`, 'UNKNOWN_RUN');
    }
  }

  /** The run's progress events, once it exists on the server (see `runEvents`). */
  private async *events(options?: SubagentRunEventsOptions): AsyncGenerator<SubagentRunEvent> {
    await this.started;
    yield* runEvents(this.context.client, this.init.runId, options, this.context.reconnectWindowMs);
  }

  private emitEvents(result: Promise<SubagentResult>): void {
    const { events, logger } = this.context;
    const info = { provider: this.init.provider, id: this.init.runId, segment: this.init.segment ?? 0 };
    events.emitContained('subagent/start', info);
    result.then(
      (settled) => {
        let lastAssistantMessage: ContentBlock[] | undefined;
        try {
          lastAssistantMessage = structuredClone(settled.output);
        } catch (err) {
          logger.warn(`subagent: could not clone ${this.init.provider} output for subagent/end: ${err}`);
        }
        const usage = this.outcome?.usage;
        events.emitContained('subagent/end', {
          ...info,
          stopReason: settled.stopReason,
          ...(lastAssistantMessage === undefined ? {} : { lastAssistantMessage }),
          ...(usage === undefined ? {} : { usage }),
        });
      },
      () => events.emitContained('subagent/end', { ...info, stopReason: 'error' }),
    );
  }

  /** This segment's outcome once it settles, read without touching the run (run-outcomes.ts). */
  private async awaitOutcome(): Promise<ObservedOutcome> {
    const { client, reconnectWindowMs } = this.context;
    try {
      // A provider that cannot resume closes the run as its segment settles: its close is the answer.
      const closesOnSettle = !this.init.resumable;
      return await segmentOutcome(client, this.init.runId, this.segment, {
        reconnectWindowMs,
        closesOnSettle,
        temporalRunId: this.temporalRunId,
      });
    } catch (err) {
      if (err instanceof OutcomeQueryMissing) return this.outcomeByUpdate();
      throw err;
    }
  }

  /**
   * For a run whose workflow code predates the outcome query: asks for the outcome with the
   * update that waits until the segment settles, following continue-as-new.
   */
  private async outcomeByUpdate(): Promise<SegmentOutcome> {
    for (;;) {
      let reply: SegmentResultReply;
      try {
        reply = await this.ridingOutOutages(
          () => this.handle.executeUpdate(segmentResultUpdate, { args: [{ segment: this.segment }] }),
          (err) => err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || err instanceof WorkflowNotFoundError,
        );
      } catch (err) {
        // A long wait with no worker to accept the update times out the RPC, and a workflow task
        // that failed drops it: ask again.
        if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isUpdateDropped(err)) continue;
        // The server answers NotFound for a closed workflow too: its history holds the result.
        if (err instanceof WorkflowNotFoundError) return this.awaitOutcome();
        throw err;
      }
      if ('settled' in reply) return reply.settled;
    }
  }

  /** `call`, riding out an unreachable server for the reconnect window (see `ridingOutOutages`). */
  private ridingOutOutages<T>(call: () => Promise<T>, isFinal?: (err: unknown) => boolean): Promise<T> {
    return ridingOutOutages(call, { windowMs: this.context.reconnectWindowMs, isFinal });
  }

  private cancel(reason?: string): void {
    if (this.outcome || this.cancelRequested) return;
    this.cancelRequested = true;
    this.cancelReason = reason;
    if (!this.begun) {
      this.stopAtStart ??= 'cancelled'; // begin() starts the segment already aborted
      return;
    }
    this.started.then(() => this.requestCancel()).catch(() => undefined); // a failed start has nothing to cancel
  }

  /** Workflow cancellation with the caller's reason, in the background; a failure is logged. */
  private requestCancel(): void {
    this.context.client.workflowService
      .requestCancelWorkflowExecution({
        namespace: this.context.client.options.namespace,
        workflowExecution: { workflowId: this.init.runId },
        identity: this.context.client.options.identity,
        requestId: randomUUID(),
        reason: cancelReasonOf(this.cancelReason),
      })
      .catch((err: unknown) => {
        // The run may have closed meanwhile: then there is nothing left to cancel.
        if (toSubagentError(err, this.init.runId).code !== 'UNKNOWN_RUN') {
          this.reportFailure('cancel', err);
        }
      });
  }

  /** Callers at the same time share one dispose; one that failed may be called again. */
  private dispose(): Promise<void> {
    if (this.disposing) return this.disposing;
    const disposing = (async () => {
      this.disposed = true;
      // A dispose in the same tick as start() makes the run begin already disposed.
      if (!this.begun) this.stopAtStart ??= 'disposed';
      try {
        await this.started;
      } catch {
        return; // nothing was created
      }
      // Messages already sent reach the run (or are reported undelivered) before it ends.
      await this.signalChain;
      // A resumed segment was handed over to the run resume() returned; disposing that one ends it.
      // A run seen closed has nothing left to stop, unless an operator's reset took it up since: one
      // that can resume is asked all the same (a closed one answers NotFound), while one that cannot
      // closes again by itself as it settles.
      if (this.resumed || (this.outcome?.closed && !this.init.resumable)) return;
      try {
        const segment = this.segment ?? (await this.handle.query(statusQuery)).segment;
        // One update per segment however many callers dispose it: the server joins them by id.
        const updateId = `dispose-${segment}`;
        const { disposed } = await this.resendWhileHeld(() =>
          this.handle.executeUpdate(disposeUpdate, { args: [{ segment }], updateId }),
        );
        if (disposed) await this.handle.result();
      } catch (err) {
        // Logged as well as thrown: callers dispose in a `finally`, where many drop what it throws.
        if (!(err instanceof WorkflowNotFoundError)) throw this.reportFailure('dispose', err);
      }
      await this.run.result.catch(() => undefined);
    })();
    disposing.catch(() => {
      if (this.disposing === disposing) this.disposing = undefined;
    });
    return (this.disposing = disposing);
  }

  private sendMessage(content: ContentBlock[]): void {
    const message = readCallerInput('the message', () => contentBlocks(content, 'content'));
    assertPayloadWithin({ content: message }, this.context.maxPayloadBytes, 'the message');
    if (this.outcome) {
      throw new SubagentError(
        `run ${this.init.runId} has settled (${this.outcome.result.stopReason}); use resume() to continue it`,
        'NOT_RUNNING',
      );
    }
    // Chained, so messages reach the workflow in the order they were sent; `dispose` waits for them.
    const id = randomUUID();
    const sentAt = Date.now();
    this.signalChain = this.signalChain.then(() => this.deliver(message, id, sentAt));
  }

  /**
   * Signals one message, retrying while the server is unreachable. The workflow counts a message
   * once by its `id`, so a retry after a lost response doubles nothing. A message given up on (the
   * run is gone, the server refused it, or the server stayed away past the reconnect window) is
   * logged and reported through `subagent/message-undelivered`. The window is one for all the
   * messages on their way: one sent while a message before it waited out the outage is given up on
   * with it, at once, and one sent later has what is left of the window (one call, once it passed).
   * So a thousand messages queued while the server is away are given up on within one window, not
   * one after another, a window (and the client's own retries of the call) each.
   */
  private async deliver(content: ContentBlock[], id: string, sentAt: number): Promise<void> {
    try {
      await this.started;
      const { outage } = this;
      if (outage?.gaveUpAt !== undefined && sentAt <= outage.gaveUpAt) throw outage.error;
      const { reconnectWindowMs } = this.context;
      const windowMs =
        outage === undefined ? reconnectWindowMs : Math.max(0, reconnectWindowMs - (Date.now() - outage.since));
      try {
        await ridingOutOutages(() => this.handle.signal(sendMessageSignal, { content, id }), {
          windowMs,
          isFinal: (err) => {
            if (isUnreachable(err)) this.outage ??= { since: Date.now() };
            return err instanceof WorkflowNotFoundError;
          },
        });
        this.outage = undefined;
      } catch (err) {
        if (this.outage && isUnreachable(err)) Object.assign(this.outage, { gaveUpAt: Date.now(), error: err });
        throw err;
      }
    } catch (err) {
      const error = this.reportFailure('sendMessage', err);
      this.context.events.emitContained('subagent/message-undelivered', {
        provider: this.init.provider,
        id: this.init.runId,
        segment: this.segment ?? 0,
        content,
        error,
      });
    }
  }

  private resume(content: ContentBlock[]): SubagentRun {
    const message = readCallerInput('the resume content', () => contentBlocks(content, 'content'));
    assertPayloadWithin({ content: message }, this.context.maxPayloadBytes, 'the resume content');
    const outcome = this.outcome;
    const refusal = this.disposed
      ? 'it was disposed'
      : !outcome
        ? 'it has not settled; await its result first'
        : this.resumed
          ? 'it was already resumed; resume the run that returned'
          : undefined;
    if (refusal) throw new SubagentError(`cannot resume run ${this.init.runId}: ${refusal}`, 'NOT_RESUMABLE');
    // A run this handle saw close, or whose window it saw pass, is asked all the same: an operator's
    // reset may have taken it up since, parked anew with a window of its own. One still closed
    // refuses, and the resumed run's result says why as the handle saw it.
    const { resumableUntil } = outcome!;
    const closedAs =
      resumableUntil !== undefined && Date.now() > resumableUntil
        ? `its resume window ended at ${new Date(resumableUntil).toISOString()}`
        : 'it is closed';
    this.resumed = true;
    const fromSegment = outcome!.segment;
    // Sent again after a fault (the same update id), it is answered by the segment it began.
    const resumeId = randomUUID();
    const next = new RunHandle(this.context, {
      ...this.init,
      segment: fromSegment + 1,
      begin: async (stopAtStart) => {
        const args = {
          fromSegment,
          content: message,
          resumeId,
          ...(stopAtStart === 'cancelled' ? { abortedAtStart: true } : {}),
          ...(stopAtStart === 'disposed' ? { disposedAtStart: true } : {}),
        };
        try {
          await this.resendWhileHeld(() =>
            withinDeadline(this.context, () =>
              this.handle.executeUpdate(resumeUpdate, { args: [args], updateId: `resume-${resumeId}` }),
            ),
          );
          this.wake();
          return { applied: true };
        } catch (err) {
          // NotFound also means closed (its window passed since this handle looked): not resumable.
          const refusal =
            err instanceof WorkflowNotFoundError && (await workflowExists(this.handle))
              ? new SubagentError(`cannot resume run ${this.init.runId}: ${closedAs}`, 'NOT_RESUMABLE', { cause: err })
              : toSubagentError(err, this.init.runId);
          // A refused resume handed nothing over: this handle's segment is its own again, to resume
          // or dispose (a reset may have the run's turn running again, to settle later).
          if (refusal.code === 'NOT_RESUMABLE') this.resumed = false;
          throw refusal;
        }
      },
      emitEvents: true,
    });
    return next.run;
  }

  /**
   * `send`, an update with a fixed id, sent again while something holds it (the call timed out,
   * the server is unreachable, the run's workflow task is failing, or a task that failed dropped
   * it) until the reconnect window has passed: the run answers it once whichever copy reaches it.
   * Rejects with the last failure.
   */
  private async resendWhileHeld<T>(send: () => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + this.context.reconnectWindowMs;
    for (;;) {
      try {
        return await send();
      } catch (err) {
        const held =
          err instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
          isUnreachable(err) ||
          isTaskFailing(err) ||
          isUpdateDropped(err);
        if (!held || Date.now() > giveUpAt) throw err;
        // A server that refuses at once is not asked again at once.
        await new Promise((resolve) => setTimeout(resolve, RESEND_PAUSE_MS));
      }
    }
  }

  /**
   * Starts the resumed segment's first task now rather than after the server's minimal interval
   * between a young run and the run it continues as (`wakeUpdate`). In the background; the run
   * refuses it, which writes nothing, and a failure only leaves the interval in place.
   */
  private wake(): void {
    this.handle.executeUpdate(wakeUpdate).catch(() => undefined);
  }

  private reportFailure(operation: string, err: unknown): SubagentError {
    const error = toSubagentError(err, this.init.runId);
    this.context.logger.warn(`subagent: ${operation} on run ${this.init.runId} failed: ${error.message}`, {
      runId: this.init.runId,
      code: error.code,
      error,
    });
    return error;
  }
}

const STARTED = Symbol('subagent.run.started');

/**
 * Resolves once the run exists on the server (its start or resume call went through); rejects
 * with the typed error if it never will. For runs of other implementations it resolves at once.
 */
export async function runStarted(run: SubagentRun): Promise<void> {
  const started = (run as { [STARTED]?: Promise<void> })[STARTED];
  try {
    await started;
  } catch (err) {
    throw toSubagentError(err, run.id);
  }
}

/** Whether the workflow exists (running or closed); a failure to ask propagates. */
async function workflowExists(handle: WorkflowHandle): Promise<boolean> {
  try {
    await handle.describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** The workflow types being asked for, per client and id (`assertSubagentRun`). */
const typeChecks = new WeakMap<Client, Map<string, Promise<string>>>();

/**
 * The type of the workflow at `id`, by `ask()`, shared by every handle that asks on `client` while
 * it is out: a thousand handles attached at once cost the server one call ahead of their results.
 */
function workflowTypeAt(client: Client, id: string, ask: () => Promise<string>): Promise<string> {
  let out = typeChecks.get(client);
  if (!out) typeChecks.set(client, (out = new Map()));
  let asked = out.get(id);
  if (!asked) {
    const done = () => out.delete(id);
    asked = ask().finally(done);
    out.set(id, asked);
  }
  return asked;
}

/** The longest cancel reason sent; a longer one is cut (the server keeps it in the run's history). */
const MAX_CANCEL_REASON_CHARS = 4096;

/**
 * The reason a cancel request carries: protobuf text, so well-formed (a lone surrogate failed the
 * whole request, and the run was never cancelled) and of bounded length; not a string, the default.
 */
function cancelReasonOf(reason: unknown): string {
  if (typeof reason !== 'string' || reason === '') return 'subagent cancelled';
  return reason.slice(0, MAX_CANCEL_REASON_CHARS).toWellFormed();
}

/** The pause before an update held by a fault is sent again. */
const RESEND_PAUSE_MS = 200;

/** `fn`'s calls under the service's start deadline. */
export function withinDeadline<T>(context: RunHandleContext, fn: () => Promise<T>): Promise<T> {
  return context.client.connection.withDeadline(Date.now() + context.startTimeoutMs, fn);
}
