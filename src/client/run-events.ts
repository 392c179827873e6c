// A run's progress events, read from its history: every step the history records (turns, model
// calls' text and usage, tool calls, messages, nested runs, settle points, resumes, the close)
// becomes one event, numbered in the order the history holds them. Reading costs the run nothing
// (history long polls, no query, no update), nothing a worker crash loses can have been read, and
// the numbering is the same for every reader, so a reader resumes at any offset exactly.
import type { Client } from '@temporalio/client';
import {
  MODEL_CALL_ACTIVITY,
  type ModelCallResult,
  RESERVED_ACTIVITY_NAMES,
  type TextDeltaArgs,
  type ToolActivityInput,
  type ToolActivityResult,
  TURN_ACTIVITY,
  type TurnActivityResult,
} from '../../activities/types';
import { type ChildSettledArgs, type SubagentRunInput, rememberMessageId } from '../../workflows/definitions';
import { type ContentBlock, textOf } from '../seam/content';
import { isRunId } from '../seam/constants';
import { SubagentError } from '../seam/errors';
import type { SubagentApprovalDecision, SubagentApprovalRequest, SubagentResult } from '../seam/result';
import type { SubagentProgress, SubagentRunEvent, SubagentRunEventsOptions } from '../seam/run';
import {
  EventType,
  OpenActivities,
  SegmentsTold,
  approvalChange,
  closedOutcome,
  decodePayload,
  decodePayloads,
  type RunHistoryOptions,
  runHistory,
  runInput,
  settledOutcome,
} from '../temporal/run-history';
import { DEFAULT_RECONNECT_WINDOW_MS } from '../temporal/errors';

const SUMMARY_CHARS = 200;

/**
 * The run's progress events from `from` on, with its nested runs' if asked; see `SubagentRun.events`.
 * A server that is away for up to `reconnectWindowMs` is waited for, and the events go on.
 */
export async function* runEvents(
  client: Client,
  runId: string,
  { from = 0, follow = true, nested = false, signal }: SubagentRunEventsOptions = {},
  reconnectWindowMs = DEFAULT_RECONNECT_WINDOW_MS,
): AsyncGenerator<SubagentRunEvent> {
  const firstOffsets = typeof from === 'number' ? { [runId]: from } : from;
  for (const [id, offset] of Object.entries(firstOffsets)) {
    if (!Number.isSafeInteger(offset) || offset < 0) {
      throw new SubagentError(
        `events: from must be an offset of 0 or more (got ${offset} for ${id})`,
        'INVALID_REQUEST',
      );
    }
  }
  const firstOf = (id: string) => firstOffsets[id] ?? 0;
  if (signal?.aborted) return;
  try {
    if (!nested) {
      for await (const event of runStream(client, runId, {
        follow,
        reconnectWindowMs,
        ...(signal ? { signal } : {}),
      })) {
        if (event.offset >= firstOf(runId)) yield event;
      }
      return;
    }
    yield* treeEvents(client, runId, follow, firstOf, reconnectWindowMs, signal);
  } catch (err) {
    // Stopped by the reader: what the read in flight would have read is nobody's now.
    if (signal?.aborted) return;
    throw err;
  }
}

/**
 * The events of the run and of every run it delegated to, down the tree, as they come: each
 * run's stream read concurrently, a nested run's from its `child-start` on. Without `follow`, it
 * ends once every stream has. With `follow`, it ends with the run's own close, after what the
 * nested runs have recorded by then (a nested run may stay parked long after).
 */
async function* treeEvents(
  client: Client,
  rootId: string,
  follow: boolean,
  firstOf: (runId: string) => number,
  reconnectWindowMs: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<SubagentRunEvent> {
  const stop = new AbortController();
  type Next = { stream: AsyncGenerator<SubagentRunEvent>; next: IteratorResult<SubagentRunEvent> };
  const reading = new Map<AsyncGenerator<SubagentRunEvent>, Promise<Next>>();
  const streams = new Map<AsyncGenerator<SubagentRunEvent>, string>();
  /** The next offset not yet read, by run. */
  const reached = new Map<string, number>();
  const read = (stream: AsyncGenerator<SubagentRunEvent>) =>
    reading.set(
      stream,
      stream.next().then(
        (next) => ({ stream, next }),
        // A nested run gone from the server (its retention ran out) has nothing more to tell.
        (err: unknown) => {
          if (streams.get(stream) !== rootId && err instanceof SubagentError && err.code === 'UNKNOWN_RUN') {
            return { stream, next: { done: true, value: undefined } };
          }
          throw err;
        },
      ),
    );
  const open = (runId: string, follows: boolean, stopping?: AbortSignal) => {
    reached.set(runId, reached.get(runId) ?? 0);
    // The reader's signal stops every stream, the ones read after the root's close too.
    const aborts = [stopping, signal].filter((one) => one !== undefined);
    const either = aborts.length > 1 ? AbortSignal.any(aborts) : aborts[0];
    const stream = runStream(client, runId, {
      follow: follows,
      reconnectWindowMs,
      ...(either ? { signal: either } : {}),
    });
    streams.set(stream, runId);
    read(stream);
  };
  open(rootId, follow, stop.signal);
  let rootClosed = false;
  try {
    while (reading.size > 0) {
      const { stream, next } = await Promise.race(reading.values());
      if (next.done) {
        reading.delete(stream);
        if (streams.get(stream) === rootId && follow && !rootClosed) {
          // The rest of the tree: what it holds now, no waiting.
          rootClosed = true;
          stop.abort();
          for (const [waiting, runId] of [...streams]) {
            const abandoned = reading.get(waiting);
            if (!abandoned) continue;
            abandoned.catch(() => undefined);
            reading.delete(waiting);
            open(runId, false);
          }
        }
        continue;
      }
      read(stream);
      const event = next.value;
      if (event.offset < reached.get(event.runId)!) continue;
      reached.set(event.runId, event.offset + 1);
      if (event.type === 'child-start' && !reached.has(event.childId)) {
        open(event.childId, follow && !rootClosed, rootClosed ? undefined : stop.signal);
      }
      if (event.offset >= firstOf(event.runId)) yield event;
    }
  } finally {
    // Readers still waiting on a long poll stop; what they would have read is nobody's now.
    stop.abort();
    for (const pending of reading.values()) pending.catch(() => undefined);
  }
}

/** Every progress event of one run, from offset 0, as its history records them. */
async function* runStream(client: Client, runId: string, reading: RunHistoryOptions): AsyncGenerator<SubagentRunEvent> {
  const converter = client.options.loadedDataConverter;
  let offset = 0;
  let depth = 0;
  let turn: number | undefined;
  /** A turn that has begun and not ended yet. */
  let openTurn: number | undefined;
  const segments = new SegmentsTold();
  const messageIds = new Set<string>();
  const activities = new OpenActivities();
  for await (const { event, temporalRunId, time, copied } of runHistory(client, runId, reading)) {
    const progress: SubagentProgress[] = [];
    switch (event.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        if (copied) {
          // A run a reset made: where the run stood at its reset point is read again from its
          // copies, so what it does again after (a turn, a segment settled) is told again.
          // Messages stay told once: a reset hands the run those after its reset point again.
          turn = undefined;
          openTurn = undefined;
          segments.clear();
        }
        depth = ((await runInput(converter, event)) as SubagentRunInput).request.depth;
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: {
        // Anyone with the server's ear can signal a run: arguments our workers never send (none,
        // null, a number, a run id no workflow can have) are no step of the run, as the workflow
        // takes them.
        const { signalName, input } = event.workflowExecutionSignaledEventAttributes!;
        if (!SIGNALS_READ.has(signalName ?? '')) break;
        const args = await signalArgs(converter, input?.payloads);
        if (signalName === 'childStarted') {
          if (isRunId(args.runId)) progress.push({ type: 'child-start', childId: args.runId });
        } else if (signalName === 'childSettled') {
          const { runId: childId, ...settled } = args as Partial<ChildSettledArgs>;
          if (isRunId(childId)) {
            progress.push({ type: 'child-settled', childId, ...(settled as ChildSettledArgs) });
          }
        } else if (signalName === 'textDelta') {
          const { turn: deltaTurn, attempt, text, reasoning } = args as Partial<TextDeltaArgs>;
          const at = { turn: deltaTurn!, attempt: attempt! };
          if (typeof reasoning === 'string' && reasoning) {
            progress.push({ type: 'reasoning-delta', ...at, text: reasoning });
          }
          if (typeof text === 'string' && text) progress.push({ type: 'text-delta', ...at, text });
        } else {
          // A signal retried after a lost response is one message, as the workflow counts it.
          const { content, id } = args as Partial<SentMessage>;
          if (!Array.isArray(content)) break;
          if (id === undefined || rememberMessageId(messageIds, id)) progress.push({ type: 'message', content });
        }
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: {
        const request = event.workflowExecutionUpdateAcceptedEventAttributes!.acceptedRequest?.input;
        if (request?.name !== 'resume') break;
        const [args] = (await decodePayloads(converter, request.args?.payloads)) as [{ fromSegment: number }];
        // One resume, however often it was sent.
        const segment = args.fromSegment + 1;
        if (segments.firstResume(segment)) progress.push({ type: 'resumed', segment });
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: {
        const attributes = event.activityTaskScheduledEventAttributes!;
        const type = attributes.activityType?.name ?? '';
        const input = await decodePayload(converter, attributes.input?.payloads);
        activities.scheduled(temporalRunId, event.eventId, { type, input });
        progress.push(...started(type, input));
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
        const attributes = event.activityTaskCompletedEventAttributes!;
        const activity = activities.closed(temporalRunId, attributes.scheduledEventId);
        if (!activity) break;
        progress.push(...completed(activity, await decodePayload(converter, attributes.result?.payloads)));
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
      case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: {
        const attributes = event.activityTaskFailedEventAttributes ?? event.activityTaskTimedOutEventAttributes;
        const activity = activities.closed(temporalRunId, attributes?.scheduledEventId);
        if (activity) progress.push(...failed(activity, attributes?.failure?.message ?? 'the activity failed'));
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
        // A cancelled turn or call: the turn's end or the run's close says what became of it.
        activities.closed(temporalRunId, event.activityTaskCanceledEventAttributes?.scheduledEventId);
        break;
      case EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
      case EventType.EVENT_TYPE_MARKER_RECORDED: {
        const change = await approvalChange(converter, event);
        if (change) {
          const { state, ...approval } = change;
          progress.push(
            state === 'requested'
              ? { type: 'approval-requested', ...(approval as SubagentApprovalRequest) }
              : { type: 'approval-decided', ...(approval as SubagentApprovalDecision) },
          );
        }
        // The settle point: a memo change, or a local activity's marker.
        const settled = await settledOutcome(converter, event);
        if (settled && segments.firstSettle(settled.segment)) {
          progress.push(...settledEvents(settled.segment, settled.result));
        }
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: {
        const outcome = await closedOutcome(converter, event);
        // A segment that closed the run recorded no settle point: its result is the workflow's.
        if (segments.firstSettle(outcome.segment)) {
          progress.push(...settledEvents(outcome.segment, outcome.result));
        }
        progress.push({ type: 'closed', closedBy: outcome.closedBy });
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        progress.push({ type: 'closed', closedBy: 'terminated' });
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
        progress.push({ type: 'closed', closedBy: 'failed' });
        break;
      default:
        break;
    }
    for (const step of progress) {
      if (step.type === 'turn-end') openTurn = undefined;
      if (!copied) yield { ...step, offset: offset++, runId, depth, time };
    }
  }

  /**
   * A segment's settle point, after the end of a turn that no activity ended (the model-call cap
   * `maxStepsPerTurn`, a cancel between calls): every `turn-start` has its `turn-end`.
   */
  function settledEvents(segment: number, result: SubagentResult): SubagentProgress[] {
    const events: SubagentProgress[] = [];
    if (openTurn !== undefined) {
      const { stopReason, diagnostic } = result;
      events.push({ type: 'turn-end', turn: openTurn, stopReason, ...(diagnostic ? { diagnostic } : {}) });
      openTurn = undefined;
    }
    events.push({ type: 'settled', segment, result });
    return events;
  }

  /** The events an activity's scheduling stands for: a turn begins, a tool is called. */
  function started(type: string, input: unknown): SubagentProgress[] {
    if (type === TURN_ACTIVITY || type === MODEL_CALL_ACTIVITY) {
      const { turn: next } = input as { turn: number };
      if (next === turn) return [];
      turn = next;
      openTurn = next;
      return [{ type: 'turn-start', turn: next }];
    }
    if (RESERVED_ACTIVITY_NAMES.includes(type)) return [];
    const call = input as ToolActivityInput;
    return [{ type: 'tool-call-start', callId: call.callId, tool: type, arguments: call.arguments }];
  }

  /** The events an activity's result stands for: text, usage, the calls it answered, a turn's end, a tool's result. */
  function completed({ type, input }: { type: string; input: unknown }, result: unknown): SubagentProgress[] {
    if (type === TURN_ACTIVITY) {
      const { output, stopReason, diagnostic } = result as TurnActivityResult;
      const text = textOf(output);
      return [
        ...reasoningIn(output),
        ...(text ? [{ type: 'text' as const, text }] : []),
        { type: 'turn-end', turn: (input as { turn: number }).turn, stopReason, ...(diagnostic ? { diagnostic } : {}) },
      ];
    }
    if (type === MODEL_CALL_ACTIVITY) {
      const call = result as ModelCallResult;
      const text = textOf(call.content.filter((block) => block.type === 'text'));
      const events: SubagentProgress[] = reasoningIn(call.content);
      if (text) events.push({ type: 'text', text });
      if (call.usage) events.push({ type: 'usage', ...call.usage });
      // The calls the model-call activity answered itself (an inline tool, a denied tool, `structured_output`).
      const calls = call.content.flatMap((block) => (block.type === 'tool-call' ? [block] : []));
      for (const block of calls) {
        const answer = call.answers?.[block.id] ?? call.toolCalls?.find((listed) => listed.id === block.id)?.answer;
        if (!answer) continue;
        events.push({ type: 'tool-call-start', callId: block.id, tool: block.name, arguments: block.arguments });
        events.push(toolEnd(block.id, block.name, answer));
      }
      const toolsToRun = calls.length > 0 && call.stopReason === 'completed' && call.structured === undefined;
      if (!toolsToRun) {
        const { turn: ended } = input as { turn: number };
        events.push({
          type: 'turn-end',
          turn: ended,
          stopReason: call.stopReason,
          ...(call.diagnostic ? { diagnostic: call.diagnostic } : {}),
        });
      }
      return events;
    }
    if (RESERVED_ACTIVITY_NAMES.includes(type)) return [];
    const { callId } = input as ToolActivityInput;
    return [toolEnd(callId, type, result as ToolActivityResult)];
  }

  /** A turn or model call that failed after its retries ends its turn `error`; a tool that did returns an error. */
  function failed({ type, input }: { type: string; input: unknown }, message: string): SubagentProgress[] {
    if (type === TURN_ACTIVITY || type === MODEL_CALL_ACTIVITY) {
      return [{ type: 'turn-end', turn: (input as { turn: number }).turn, stopReason: 'error', diagnostic: message }];
    }
    if (RESERVED_ACTIVITY_NAMES.includes(type)) return [];
    const { callId } = input as ToolActivityInput;
    return [{ type: 'tool-call-end', callId, tool: type, isError: true, summary: message.slice(0, SUMMARY_CHARS) }];
  }
}

/** The signals that stand for progress events. */
const SIGNALS_READ = new Set(['childStarted', 'childSettled', 'textDelta', 'sendMessage']);

/** A signal's argument as an object: one that is not (none, null, a number) as an empty one. */
async function signalArgs(
  converter: Client['options']['loadedDataConverter'],
  payloads: Parameters<typeof decodePayload>[1],
): Promise<Record<string, unknown>> {
  const args = await decodePayload(converter, payloads);
  return typeof args === 'object' && args !== null ? (args as Record<string, unknown>) : {};
}

interface SentMessage {
  content: ContentBlock[];
  id?: string;
}

/** The reasoning an output shows, as one event. */
function reasoningIn(content: readonly ContentBlock[]): SubagentProgress[] {
  const text = content.map((block) => (block.type === 'reasoning' ? block.text : '')).join('');
  return text ? [{ type: 'reasoning', text }] : [];
}

function toolEnd(callId: string, tool: string, outcome: ToolActivityResult): SubagentProgress {
  return {
    type: 'tool-call-end',
    callId,
    tool,
    isError: outcome.isError,
    summary: textOf(outcome.content).slice(0, SUMMARY_CHARS),
  };
}
