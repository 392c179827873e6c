// Reading the run workflow's history events: what a start carries and where a segment settled.
// Observers (client/run-outcomes.ts) and the audit (audit/history.ts) read the same events.
import type { LoadedDataConverter, Payload } from '@temporalio/common';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { SETTLED_ACTIVITY } from '../../activities/types';
import type { SegmentOutcome, SubagentRunInput, SubagentRunOutcome } from '../../workflows/definitions';
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
  return decodeArrayFromPayloads(converter, await retrievePayloads(converter, payloads));
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

/** The workflow's own result, from its `WorkflowExecutionCompleted` event. */
export async function closedOutcome(converter: LoadedDataConverter, event: HistoryEvent): Promise<SubagentRunOutcome> {
  const payloads = event.workflowExecutionCompletedEventAttributes?.result?.payloads;
  return (await decodePayload(converter, payloads)) as SubagentRunOutcome;
}
