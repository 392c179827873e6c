// Reading the run workflow's history events: what a start carries and where a segment settled.
// Observers (client/run-outcomes.ts) and the audit (audit/history.ts) read the same events.
import type { LoadedDataConverter } from '@temporalio/common';
import { decodeArrayFromPayloads, decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { SETTLED_ACTIVITY } from '../../activities/types';
import type { SegmentOutcome, SubagentRunInput, SubagentRunOutcome } from '../../workflows/definitions';

export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
export const { EventType } = temporal.api.enums.v1;

/** The marker core writes for a local activity's result. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** The workflow's input, from its `WorkflowExecutionStarted` event. */
export async function runInput(converter: LoadedDataConverter, event: HistoryEvent): Promise<SubagentRunInput> {
  const attributes = event.workflowExecutionStartedEventAttributes!;
  const [input] = (await decodeArrayFromPayloads(converter, attributes.input?.payloads)) as [SubagentRunInput];
  return input;
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
  const data = (await decodeFromPayloadsAtIndex(converter, 0, marker.details?.data?.payloads)) as
    { activity_type?: string } | undefined;
  if (data?.activity_type !== SETTLED_ACTIVITY) return undefined;
  return (await decodeFromPayloadsAtIndex(converter, 0, marker.details?.result?.payloads)) as SegmentOutcome;
}

/** The workflow's own result, from its `WorkflowExecutionCompleted` event. */
export async function closedOutcome(converter: LoadedDataConverter, event: HistoryEvent): Promise<SubagentRunOutcome> {
  const payloads = event.workflowExecutionCompletedEventAttributes?.result?.payloads;
  return (await decodeFromPayloadsAtIndex(converter, 0, payloads)) as SubagentRunOutcome;
}
