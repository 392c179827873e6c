// The audit trail of a run read from its whole Temporal history, across every continue-as-new, as
// seam-level records (start, messages, turns, model and tool calls, permission decisions,
// cancel, results, close); `exportAudit` and `streamAudit` seal them into the hash chain of chain.ts.
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  MODEL_CALL_ACTIVITY,
  type ModelCallResult,
  RESERVED_ACTIVITY_NAMES,
  TURN_ACTIVITY,
  type TurnActivityResult,
} from '../../activities/types';
import { type SegmentResultReply, type SubagentRunInput, rememberMessageId } from '../../workflows/definitions';
import type { SubagentPermissionDecision } from '../seam/result';
import {
  approvalChange,
  closedOutcome,
  decodePayload,
  decodePayloads,
  isResetPoint,
  type HistoryEvent,
  OpenActivities,
  SegmentsTold,
  runHistory,
  settledOutcome,
} from '../temporal/run-history';
import { type AuditDraft, type AuditRecord, type AuditSigner, sealAudit, sealAuditRecords } from './chain';

const { EventType } = temporal.api.enums.v1;

/**
 * The run's records in history order, header first, signed by `signer` if given. Rejects with
 * `UNKNOWN_RUN` for an id with no workflow. Payloads are decoded with the client's data converter
 * (its codec decrypts them). Holds every record: `streamAudit` yields the same one at a time.
 */
export async function exportAudit(client: Client, runId: string, signer?: AuditSigner): Promise<AuditRecord[]> {
  const drafts: AuditDraft[] = [];
  for await (const draft of auditDrafts(client, runId, false)) drafts.push(draft);
  return sealAudit(runId, drafts, signer);
}

/**
 * The records `exportAudit` returns, yielded one at a time, each sealed as its event is read: the
 * memory of one record and the chain's head, however long the history. The header counts the
 * records, so the history is read twice: once to count them, then to seal as many (a run still
 * running has made more by then; they are left for the next export). Rejects as `exportAudit`
 * does, at the start or part way; the caller discards what it was given then.
 */
export async function* streamAudit(client: Client, runId: string, signer?: AuditSigner): AsyncGenerator<AuditRecord> {
  let count = 0;
  for await (const _ of auditDrafts(client, runId, false)) count++;
  // A history only grows (a reset ends the run it resets and goes on in another, read after it),
  // so the second reading begins with the same records as the first.
  yield* sealAuditRecords(runId, count, auditDrafts(client, runId, false), signer);
}

/**
 * Yields records as the run makes history, across continue-as-new, until it closes (or only
 * what exists so far when `follow` is false). Records are not chained: `exportAudit` seals them.
 * A server that is away for up to `reconnectWindowMs` is waited for, and the records go on.
 * `signal` aborts a read in flight (a long poll waiting for the run's next event): the reading
 * rejects.
 */
export async function* auditDrafts(
  client: Client,
  runId: string,
  follow: boolean,
  reconnectWindowMs?: number,
  signal?: AbortSignal,
): AsyncGenerator<AuditDraft> {
  const converter = client.options.loadedDataConverter;
  const segments = new SegmentsTold();
  const messageIds = new Set<string>();
  const activities = new OpenActivities();
  for await (const { event, temporalRunId, time, copied } of runHistory(client, runId, {
    follow,
    reconnectWindowMs,
    ...(signal ? { signal } : {}),
  })) {
    if (!copied) {
      yield* records(event, temporalRunId, time);
      continue;
    }
    // A run a reset made: where the run stood at its reset point is read again from its copies,
    // so a segment it settles or is resumed to again is recorded again. A message stays recorded
    // once: a reset hands the run those after its reset point again.
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) segments.clear();
    for await (const _ of records(event, temporalRunId, time)) {
      // Recorded already, from the run before.
    }
  }

  /** The records one event of the run's history stands for. */
  async function* records(event: HistoryEvent, current: string, time: string): AsyncGenerator<AuditDraft> {
    const draft = (type: string, data: unknown): AuditDraft => ({
      type,
      time,
      data: { temporalRunId: current, ...((data as object) ?? {}) },
    });
    switch (event.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: {
        const attributes = event.workflowExecutionStartedEventAttributes!;
        const [input] = (await decodePayloads(converter, attributes.input?.payloads)) as [SubagentRunInput];
        if (!input.carried) {
          yield draft('start', {
            provider: input.provider,
            driver: input.driver,
            request: input.request,
            settings: input.settings,
          });
        } else {
          yield draft('continue', {
            segment: input.carried.segment,
            turn: input.carried.turn,
            pendingMessages: input.carried.pending.length,
          });
        }
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: {
        const attributes = event.workflowExecutionSignaledEventAttributes!;
        const [args] = await decodePayloads(converter, attributes.input?.payloads);
        if (attributes.signalName === 'sendMessage') {
          // A signal retried after a lost response is one message, as the workflow counts it.
          // (A raw client's signal may carry no object at all: recorded as it came.)
          const { content, id } = (args ?? {}) as { content?: unknown; id?: string };
          if (id !== undefined && !rememberMessageId(messageIds, id)) break;
          yield draft('message', { content });
        } else if (attributes.signalName === 'childStarted') yield draft('child.start', args);
        else if (attributes.signalName === 'childSettled') yield draft('child.settled', args);
        else if (attributes.signalName === 'permissionDecided') yield draft('permission', args);
        else if (attributes.signalName === 'textDelta') yield draft('text.delta', args);
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: {
        const request = event.workflowExecutionUpdateAcceptedEventAttributes!.acceptedRequest?.input;
        if (request?.name === 'resume' || request?.name === 'dispose') {
          const [args] = await decodePayloads(converter, request.args?.payloads);
          if (request.name === 'resume') {
            // One resume, however often it was sent.
            const { fromSegment } = args as { fromSegment: number };
            if (!segments.firstResume(fromSegment + 1)) break;
          }
          yield draft(request.name, args);
        } else if (request?.name === 'approve') {
          // Who answered: the caller's identity as its client gave it.
          const [args] = await decodePayloads(converter, request.args?.payloads);
          const identity = event.workflowExecutionUpdateAcceptedEventAttributes!.acceptedRequest?.meta?.identity;
          yield draft('approval.answer', { ...(args as object), ...(identity ? { identity } : {}) });
        }
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
      case EventType.EVENT_TYPE_MARKER_RECORDED: {
        const change = await approvalChange(converter, event);
        if (change) {
          const { state, ...approval } = change;
          yield draft(state === 'requested' ? 'approval.requested' : 'approval.decided', approval);
        }
        // The settle point (a memo change, or a local activity's marker): the segment's outcome,
        // recorded once however many wait on it.
        const settled = await settledOutcome(converter, event);
        if (settled && segments.firstSettle(settled.segment)) {
          yield draft('result', settled);
        }
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED: {
        const success = event.workflowExecutionUpdateCompletedEventAttributes!.outcome?.success;
        if (!success?.payloads?.length) break;
        const reply = (await decodePayload(converter, success.payloads)) as SegmentResultReply | undefined;
        // Histories from before the settle record: every caller's wait for a segment answers
        // with the same result; record it once.
        if (reply && typeof reply === 'object' && 'settled' in reply && segments.firstSettle(reply.settled.segment)) {
          yield draft('result', reply.settled);
        }
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: {
        const attributes = event.activityTaskScheduledEventAttributes!;
        const [input] = await decodePayloads(converter, attributes.input?.payloads);
        activities.scheduled(current, event.eventId, { type: attributes.activityType?.name ?? '', input });
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
        const attributes = event.activityTaskCompletedEventAttributes!;
        const activity = activities.closed(current, attributes.scheduledEventId);
        if (!activity) break;
        const result = await decodePayload(converter, attributes.result?.payloads);
        for (const record of activityRecords(activity.type, activity.input, result)) {
          yield draft(record.type, record.data);
        }
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
      case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
      case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: {
        const attributes =
          event.activityTaskFailedEventAttributes ??
          event.activityTaskTimedOutEventAttributes ??
          event.activityTaskCanceledEventAttributes;
        const activity = activities.closed(current, attributes?.scheduledEventId);
        const failure =
          event.activityTaskFailedEventAttributes?.failure ?? event.activityTaskTimedOutEventAttributes?.failure;
        const outcome = event.activityTaskCanceledEventAttributes
          ? 'cancelled'
          : event.activityTaskTimedOutEventAttributes
            ? 'timed out'
            : 'failed';
        // A model call cancelled mid-stream reports what it had used (charged to the run's spend).
        const cancelDetails = (await decodePayload(
          converter,
          event.activityTaskCanceledEventAttributes?.details?.payloads,
        )) as { partialUsage?: unknown } | undefined;
        const partialUsage = cancelDetails?.partialUsage;
        yield draft('activity.failed', {
          activity: activity?.type,
          outcome,
          ...(failure?.message ? { failure: failure.message } : {}),
          ...(partialUsage === undefined ? {} : { partialUsage }),
        });
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
        yield draft('cancel', { cause: event.workflowExecutionCancelRequestedEventAttributes?.cause ?? '' });
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: {
        const outcome = await closedOutcome(converter, event);
        // A segment that closed the run records no settle point: its result is the workflow's.
        if (segments.firstSettle(outcome.segment)) {
          const { segment, result, usage, spend, resumableUntil } = outcome;
          yield draft('result', {
            segment,
            result,
            ...(usage === undefined ? {} : { usage }),
            ...(spend === undefined ? {} : { spend }),
            ...(resumableUntil === undefined ? {} : { resumableUntil }),
          });
        }
        yield draft('close', {
          closedBy: outcome.closedBy,
          segment: outcome.segment,
          stopReason: outcome.result.stopReason,
          undeliveredMessages: outcome.undeliveredMessages,
        });
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        // Where a reset's run goes its own way: what the run read after its reset point, up to
        // here, was undone.
        if (isResetPoint(event, current)) {
          const attributes = event.workflowTaskFailedEventAttributes!;
          yield draft('reset', {
            reason: attributes.failure?.message ?? '',
            baseRunId: attributes.baseRunId ?? '',
            ...(attributes.identity ? { identity: attributes.identity } : {}),
          });
        }
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        yield draft('close', {
          closedBy: 'terminated',
          reason: event.workflowExecutionTerminatedEventAttributes?.reason ?? '',
        });
        break;
      default:
        break;
    }
  }
}

/** The seam-level records one completed activity stands for. */
function activityRecords(type: string, input: unknown, result: unknown): { type: string; data: unknown }[] {
  const permissions = (decisions: SubagentPermissionDecision[] | undefined) =>
    (decisions ?? []).map((decision) => ({ type: 'permission', data: decision }));
  if (type === TURN_ACTIVITY) {
    // Since store-once a turn counts its messages, each recorded where it entered (a message, the start, a resume).
    const turnInput = input as { turn: number; input?: unknown; inputLength?: number };
    const turn = result as TurnActivityResult;
    return [
      ...permissions(turn.permissions),
      {
        type: 'turn',
        data: {
          turn: turnInput.turn,
          ...(turnInput.input === undefined ? { inputMessages: turnInput.inputLength } : { input: turnInput.input }),
          output: turn.output,
          stopReason: turn.stopReason,
          ...(turn.structured === undefined ? {} : { structured: turn.structured }),
          ...(turn.diagnostic ? { diagnostic: turn.diagnostic } : {}),
        },
      },
    ];
  }
  if (type === MODEL_CALL_ACTIVITY) {
    // Since store-once a call counts what came after the last answer (tool results and messages, each recorded already).
    const call = input as { turn: number; delta?: unknown; deltaLength?: number };
    const response = result as ModelCallResult;
    return [
      {
        type: 'model.call',
        data: {
          turn: call.turn,
          ...(call.delta === undefined ? { inputEntries: call.deltaLength } : { input: call.delta }),
          output: response.content,
          stopReason: response.stopReason,
          ...(response.usage ? { usage: response.usage } : {}),
          ...(response.costUsd === undefined ? {} : { costUsd: response.costUsd }),
          ...(response.structured === undefined ? {} : { structured: response.structured }),
          ...(response.diagnostic ? { diagnostic: response.diagnostic } : {}),
        },
      },
      // The calls an inline tool answered within the model call, in the order the model made them.
      ...response.content.flatMap((block) => {
        if (block.type !== 'tool-call') return [];
        const answer = response.answers?.[block.id] ?? response.toolCalls?.find((c) => c.id === block.id)?.answer;
        if (!answer?.ranInline) return [];
        const { ranInline: _, ...outcome } = answer;
        const data = { tool: block.name, callId: block.id, arguments: block.arguments, result: outcome, inline: true };
        return [{ type: 'tool.call', data }];
      }),
    ];
  }
  if (RESERVED_ACTIVITY_NAMES.includes(type)) return [];
  const call = input as { callId: string; arguments: string };
  return [{ type: 'tool.call', data: { tool: type, callId: call.callId, arguments: call.arguments, result } }];
}
