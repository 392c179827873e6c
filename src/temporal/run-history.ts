// Reading the run workflow's history: its events across every continue-as-new, what a start
// carries and where a segment settled. Observers (client/run-outcomes.ts), progress events
// (client/run-events.ts) and the audit (audit/history.ts) read the same events.
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { LoadedDataConverter, Payload } from '@temporalio/common';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { SETTLED_ACTIVITY } from '../../activities/types';
import {
  APPROVAL_MEMO_KEY,
  type ApprovalMemo,
  SETTLED_MEMO_KEY,
  type SegmentOutcome,
  type SubagentRunInput,
  type SubagentRunOutcome,
  SUBAGENT_RUN_WORKFLOW,
} from '../../workflows/definitions';
import { isWorkflowId } from '../seam/constants';
import { SubagentError, causeChain } from '../seam/errors';
import {
  DEFAULT_RECONNECT_WINDOW_MS,
  abortable,
  isNotFound,
  isUnreachable,
  ridingOutOutages,
  sealedWithoutCodec,
} from './errors';
import { retrievePayloads } from './payload-store';

export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
export const { EventType } = temporal.api.enums.v1;

/** The marker core writes for a local activity's result. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/**
 * Decodes payloads read from raw history, fetching the offloaded ones from the payload store
 * first. Rejects with `PAYLOAD_MISSING` for a blob the store lacks.
 */
export async function decodePayloads(
  converter: LoadedDataConverter,
  payloads: Payload[] | null | undefined,
): Promise<unknown[]> {
  const retrieved = await retrievePayloads(converter, payloads);
  try {
    return await decodeArrayFromPayloads(converter, retrieved);
  } catch (err) {
    throw sealedWithoutCodec(err) ?? err;
  }
}

/** The first of `payloads`, decoded (see `decodePayloads`); undefined when there is none. */
export async function decodePayload(
  converter: LoadedDataConverter,
  payloads: Payload[] | null | undefined,
): Promise<unknown> {
  return (await decodePayloads(converter, payloads?.slice(0, 1)))[0];
}

/** The workflow's input, from its `WorkflowExecutionStarted` event. */
export async function runInput(converter: LoadedDataConverter, event: HistoryEvent): Promise<SubagentRunInput> {
  const attributes = event.workflowExecutionStartedEventAttributes!;
  return (await decodePayload(converter, attributes.input?.payloads)) as SubagentRunInput;
}

/** The outcome a segment's settle point records, when `event` is one; otherwise undefined. */
export async function settledOutcome(
  converter: LoadedDataConverter,
  event: HistoryEvent,
): Promise<SegmentOutcome | undefined> {
  // A small outcome is a memo change; a larger one (or one from before) a local activity's marker.
  const memo = event.workflowPropertiesModifiedEventAttributes?.upsertedMemo?.fields?.[SETTLED_MEMO_KEY];
  if (memo) return (await decodePayload(converter, [memo])) as SegmentOutcome;
  const marker = event.markerRecordedEventAttributes;
  if (event.eventType !== EventType.EVENT_TYPE_MARKER_RECORDED || marker?.markerName !== LOCAL_ACTIVITY_MARKER) {
    return undefined;
  }
  // Core writes the marker's own data as it is: no codec has been near it.
  const [about] = marker.details?.data?.payloads ?? [];
  const data = (about ? converter.payloadConverter.fromPayload(about) : undefined) as
    { activity_type?: string } | undefined;
  if (data?.activity_type !== SETTLED_ACTIVITY) return undefined;
  return (await decodePayload(converter, marker.details?.result?.payloads)) as SegmentOutcome;
}

/** The approval request or decision a memo change records, when `event` is one; otherwise undefined. */
export async function approvalChange(
  converter: LoadedDataConverter,
  event: HistoryEvent,
): Promise<ApprovalMemo | undefined> {
  const payload = event.workflowPropertiesModifiedEventAttributes?.upsertedMemo?.fields?.[APPROVAL_MEMO_KEY];
  if (event.eventType !== EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED || !payload) return undefined;
  return (await decodePayload(converter, [payload])) as ApprovalMemo;
}

/** The workflow's own result, from its `WorkflowExecutionCompleted` event. */
export async function closedOutcome(converter: LoadedDataConverter, event: HistoryEvent): Promise<SubagentRunOutcome> {
  const payloads = event.workflowExecutionCompletedEventAttributes?.result?.payloads;
  return (await decodePayload(converter, payloads)) as SubagentRunOutcome;
}

/** An activity a run's history scheduled: its type and its decoded input. */
export interface ScheduledActivity {
  type: string;
  input: unknown;
}

/**
 * The activities a reader has seen scheduled and not yet closed, by Temporal run and scheduled
 * event. Each closes once, so a follower holds only what is in flight, however long it follows.
 */
export class OpenActivities {
  private readonly open = new Map<string, ScheduledActivity>();

  /** The activity scheduled at event `eventId` (as history holds ids: a number or a Long). */
  scheduled(temporalRunId: string, eventId: unknown, activity: ScheduledActivity): void {
    this.open.set(`${temporalRunId}/${eventId}`, activity);
  }

  /** The activity that `scheduledEventId` names, forgotten: it has closed. */
  closed(temporalRunId: string, scheduledEventId: unknown): ScheduledActivity | undefined {
    const key = `${temporalRunId}/${scheduledEventId}`;
    const activity = this.open.get(key);
    this.open.delete(key);
    return activity;
  }
}

/**
 * The segments a reader has told settled, and resumed to, so each is told once as the workflow
 * counts it: a segment's outcome that many callers waited on, or a resume sent again after it
 * began its segment (its answer lost). A reset's run does its segments again from its reset
 * point: `clear()` at its copied start. Messages are another matter: a reset hands the run those
 * after its reset point again, so they stay told once (`rememberMessageId`).
 */
export class SegmentsTold {
  private readonly settled = new Set<number>();
  private readonly resumed = new Set<number>();

  /** True the first time `segment` settles. */
  firstSettle(segment: number): boolean {
    return firstOf(this.settled, segment);
  }

  /** True the first time a resume begins `segment`. */
  firstResume(segment: number): boolean {
    return firstOf(this.resumed, segment);
  }

  clear(): void {
    this.settled.clear();
    this.resumed.clear();
  }
}

function firstOf(seen: Set<number>, segment: number): boolean {
  if (seen.has(segment)) return false;
  seen.add(segment);
  return true;
}

/** One event of a run's history, with the Temporal run it belongs to and when it happened. */
export interface RunHistoryEvent {
  event: HistoryEvent;
  temporalRunId: string;
  /** ISO 8601, to the millisecond. */
  time: string;
  /**
   * A run a reset made copied the event from the run before it, up to its reset point: read
   * already, no news, but where the run stood there (a reader rebuilds its state from the copies).
   */
  copied?: true;
}

export interface RunHistoryOptions {
  /** Wait for new events until the run closes; otherwise read only what exists so far. */
  follow: boolean;
  /** Aborts a long poll in flight, and the wait between reads while the server is away. */
  signal?: AbortSignal;
  /** How long a read rides out an unreachable server (down, restarting) before the history rejects. */
  reconnectWindowMs?: number;
}

/**
 * The run's history events in order, Temporal run after Temporal run across continue-as-new and
 * resets (a reset run's copies marked `copied`), until the run closes (or only what exists so far
 * when `follow` is false). Rejects with `UNKNOWN_RUN`
 * for an id with no workflow. A server that is away is waited for, and the reading goes on where it
 * was.
 */
export async function* runHistory(
  client: Client,
  runId: string,
  { follow, signal, reconnectWindowMs = DEFAULT_RECONNECT_WINDOW_MS }: RunHistoryOptions,
): AsyncGenerator<RunHistoryEvent> {
  const ridingOut = <T>(call: () => Promise<T>) => ridingOutOutages(call, { windowMs: reconnectWindowMs, signal });
  let temporalRunId: string | undefined = await ridingOut(() => firstRunId(client, runId));
  /** A run a reset made: its first events are copies of those read already, up to its reset point. */
  let resetRun = false;
  while (temporalRunId) {
    const current: string = temporalRunId;
    temporalRunId = undefined;
    let copied = resetRun;
    resetRun = false;
    for await (const event of historyEvents(client, runId, current, follow, ridingOut, signal)) {
      if (copied) copied = !isResetPoint(event, current);
      if (RUN_CLOSES.has(event.eventType ?? 0)) {
        // A reset ends the run running then so (terminated), or takes up a run that has closed:
        // the run goes on in the run the reset made, and this close was undone.
        temporalRunId = await ridingOut(() => runAfterReset(client, runId, current));
        if (temporalRunId) {
          resetRun = true;
          break;
        }
      }
      const at = event.eventTime;
      const time = at ? new Date(int64(at.seconds) * 1000 + Math.floor((at.nanos ?? 0) / 1e6)).toISOString() : '';
      yield { event, temporalRunId: current, time, ...(copied ? { copied } : {}) };
      if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW) {
        temporalRunId = event.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
      }
    }
  }
}

/** The events that close a Temporal run and the run with it, unless a reset takes it up again. */
const RUN_CLOSES = new Set<number>([
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
]);

/** The event that marks where reset run `runId` leaves its copies of the run it reset, and goes its own way. */
export function isResetPoint(event: HistoryEvent, runId: string): boolean {
  const failed = event.workflowTaskFailedEventAttributes;
  return (
    event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED &&
    failed?.cause === temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW &&
    failed.newRunId === runId
  );
}

/**
 * The run that took over from closed run `runId` when a reset ended it (terminated) or took it up
 * after it closed, if one did. The run a reset ends is the one running then, which is not always
 * the one it was based on (a reset of an earlier run: one before a continue-as-new, or one reset
 * before), and only the base run names the run its reset made (`resetRunId`, the newest such run:
 * a run reset twice names the second). Only one run of a workflow is open at a time, so the run
 * that took over is the first of its runs to start after `runId`; it is taken only if a reset made
 * it. Its candidates: the base run's `resetRunId`, the workflow's current run (a reset is there at
 * once) and its runs as the visibility store lists them (it catches up a moment later). A run that
 * is still the workflow's current one costs one describe. Rejects as a describe does.
 */
export async function runAfterReset(client: Client, workflowId: string, runId: string): Promise<string | undefined> {
  const describe = async (id: string | undefined) => {
    try {
      return await client.workflowService.describeWorkflowExecution({
        namespace: client.options.namespace,
        execution: { workflowId, ...(id ? { runId: id } : {}) },
      });
    } catch (err) {
      // Gone from the server (its retention ran out): what it ended in is all there is to read.
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const current = (await describe(undefined))?.workflowExecutionInfo?.execution?.runId;
  if (!current || current === runId) return undefined;
  const ended = await describe(runId);
  const endedAt = ended?.workflowExecutionInfo?.startTime;
  if (!endedAt) return undefined;
  let listed: string[] | undefined;
  for (let pause = 50; ; pause *= 2) {
    listed = await runsListedFrom(client, workflowId, nanosOf(endedAt)!);
    // The store lists a run a moment after it starts: while it lacks the current run, it may lack
    // a run between (two resets in quick succession), which would be skipped.
    if (!listed || listed.includes(current) || pause > MAX_LISTING_PAUSE_MS) break;
    await sleep(pause);
  }
  const candidates = new Set<string>(listed);
  const resetRunId = ended.workflowExtendedInfo?.resetRunId;
  if (resetRunId) candidates.add(resetRunId);
  candidates.add(current);
  candidates.delete(runId);
  let next: { runId: string; startedAt: bigint; byReset: boolean } | undefined;
  for (const candidate of candidates) {
    const described = await describe(candidate);
    const startedAt = nanosOf(described?.workflowExecutionInfo?.startTime);
    if (startedAt === undefined || startedAt <= nanosOf(endedAt)! || (next && startedAt >= next.startedAt)) continue;
    // A run a reset made starts at its reset (and a base run names the newest its resets made).
    const byReset = candidate === resetRunId || nanosOf(described!.workflowExtendedInfo?.lastResetTime) === startedAt;
    next = { runId: candidate, startedAt, byReset };
  }
  return next?.byReset ? next.runId : undefined;
}

/** The longest pause between listings of a workflow's runs that wait for the visibility store (some 3 s in all). */
const MAX_LISTING_PAUSE_MS = 1600;

/**
 * The ids of the workflow's runs that the visibility store lists as started at `from` or later (it
 * keeps microseconds); undefined for an id a query cannot quote, or a store that refuses to list.
 */
async function runsListedFrom(client: Client, workflowId: string, from: bigint): Promise<string[] | undefined> {
  if (/["'\\]/.test(workflowId)) return undefined;
  const runIds: string[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    let page: temporal.api.workflowservice.v1.IListWorkflowExecutionsResponse;
    try {
      page = await client.workflowService.listWorkflowExecutions({
        namespace: client.options.namespace,
        query: `WorkflowId = "${workflowId}"`,
        ...(nextPageToken ? { nextPageToken } : {}),
      });
    } catch (err) {
      // A store that refuses (not an outage): the described candidates remain.
      if (isUnreachable(err)) throw err;
      return undefined;
    }
    for (const execution of page.executions ?? []) {
      const startedAt = nanosOf(execution.startTime);
      if (!execution.execution?.runId || (startedAt !== undefined && startedAt < from - 1000n)) continue;
      runIds.push(execution.execution.runId);
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return runIds;
}

/** A protobuf timestamp in nanoseconds, exactly. */
function nanosOf(at: { seconds?: unknown; nanos?: number | null } | null | undefined): bigint | undefined {
  if (!at?.seconds && !at?.nanos) return undefined;
  return BigInt(String(at.seconds ?? 0)) * 1_000_000_000n + BigInt(at.nanos ?? 0);
}

async function firstRunId(client: Client, runId: string): Promise<string> {
  // An id no workflow can have (a run's childStarted signal from a raw client can name one): the
  // server cannot even be asked about it.
  if (!isWorkflowId(runId)) throw new SubagentError(`no subagent run with id "${String(runId)}"`, 'UNKNOWN_RUN');
  try {
    const { raw, type } = await client.workflow.getHandle(runId).describe();
    // A workflow of another type whose history no run's reader can read.
    if (type !== SUBAGENT_RUN_WORKFLOW) {
      throw new SubagentError(`"${runId}" is not a subagent run: it is a workflow of type "${type}"`, 'UNKNOWN_RUN');
    }
    const info = raw.workflowExecutionInfo;
    return info?.firstRunId || info?.execution?.runId || '';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) {
      throw new SubagentError(`no subagent run with id "${runId}"`, 'UNKNOWN_RUN', { cause: err });
    }
    // Its memo, sealed by the payload codec, read by a client without one.
    throw sealedWithoutCodec(err, runId) ?? err;
  }
}

/**
 * The server refused a history read's page token: the run's history has moved on in a way the
 * token does not follow (its branch or transition check, which a long poll meets now and then).
 * The read starts again from the run's first event, skipping what it has read.
 */
export function isStalePageToken(err: unknown): boolean {
  return causeChain(err).some((e) => /branch tokens?,? .*don't match/i.test(e.message));
}

/** The id of `event` as a number (0 for an event without one). */
export function eventIdOf(event: HistoryEvent): number {
  return int64(event.eventId);
}

/**
 * An int64 field of an event as a number (0 when unset). A Long by its own conversion: `Number()`
 * of one goes through its decimal string, for every event a reader reads.
 */
function int64(value: { toNumber(): number } | number | null | undefined): number {
  return typeof value === 'object' && value !== null ? value.toNumber() : Number(value ?? 0);
}

/**
 * One Temporal run's events; with `follow`, waiting for new ones until the run closes. Each read
 * goes through `ridingOut`, which waits out a server that is away.
 */
async function* historyEvents(
  client: Client,
  workflowId: string,
  runId: string,
  follow: boolean,
  ridingOut: <T>(call: () => Promise<T>) => Promise<T>,
  signal: AbortSignal | undefined,
): AsyncGenerator<HistoryEvent> {
  let nextPageToken: Uint8Array | undefined;
  let lastRead = 0;
  for (;;) {
    const read = () =>
      client.workflowService.getWorkflowExecutionHistory({
        namespace: client.options.namespace,
        execution: { workflowId, runId },
        waitNewEvent: follow,
        ...(nextPageToken ? { nextPageToken } : {}),
      });
    let response: Awaited<ReturnType<typeof read>>;
    try {
      response = await ridingOut(() =>
        signal ? abortable(client.connection.withAbortSignal(signal, read), signal) : read(),
      );
    } catch (err) {
      if (!nextPageToken || !isStalePageToken(err)) throw err;
      nextPageToken = undefined;
      continue;
    }
    for (const event of response.history?.events ?? []) {
      if (eventIdOf(event) <= lastRead) continue;
      lastRead = eventIdOf(event);
      yield event;
    }
    if (!response.nextPageToken?.length) return;
    nextPageToken = response.nextPageToken;
  }
}
