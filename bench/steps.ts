// Figure 1 step by step: where a delegation's time goes, from the caller's `start` to its having
// the settle point, by the server's event times between the caller's own two readings of the
// clock (the same machine's clock: the bench runs beside its server).
import { EventType, type HistoryEvent } from '../src/temporal/run-history';
import { percentiles, round } from './stats';

/** The steps, in order: together they are the sample's latency. */
export const STEPS = [
  /** The caller's `start` (validation, the request) until the server records the start. */
  'to_start_event',
  /** The run's first workflow task, which schedules its activity, until it completes. */
  'first_task',
  /** Until the activity completes (its dispatch, the worker's call, the completion's request). */
  'activity',
  /** Until the workflow task that takes the activity's result starts. */
  'to_settle_task',
  /** That task, which writes the settle point (a memo change, a close, a continue-as-new). */
  'settle_task',
  /** Until the caller has it (its long poll's answer, read and handed on). */
  'to_caller',
] as const;

export type Step = (typeof STEPS)[number];

/** When the caller called `start` and when it had the settle point: milliseconds since the epoch. */
export interface CallerTimes {
  calledAt: number;
  hadAt: number;
}

/** Milliseconds since the epoch, now, to a fraction of a millisecond. */
export const epochNow = () => performance.timeOrigin + performance.now();

const msOf = (event: HistoryEvent) => {
  const at = event.eventTime;
  return at ? Number(at.seconds ?? 0) * 1000 + (at.nanos ?? 0) / 1e6 : NaN;
};

/**
 * One sample's steps, in milliseconds: the run's history (its first run's) read against the
 * caller's times. Undefined for a history without the events of the shape (a start, a workflow
 * task, an activity, a workflow task after it).
 */
export function stepsOf(events: HistoryEvent[], { calledAt, hadAt }: CallerTimes): Record<Step, number> | undefined {
  const first = (type: number, after = 0) => events.find((event, i) => i >= after && event.eventType === type);
  const started = events[0];
  const firstTask = first(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED);
  const activityIndex = events.findIndex((event) => event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED);
  const settleStarted = first(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, activityIndex);
  const settleTask = first(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, activityIndex);
  if (!started || !firstTask || activityIndex < 0 || !settleStarted || !settleTask) return undefined;
  const times = [calledAt, started, firstTask, events[activityIndex]!, settleStarted, settleTask, hadAt].map((at) =>
    typeof at === 'number' ? at : msOf(at),
  );
  return Object.fromEntries(STEPS.map((step, i) => [step, times[i + 1]! - times[i]!])) as Record<Step, number>;
}

/** The median of each step over `samples`, to 0.01 ms. */
export function medianSteps(samples: Record<Step, number>[]): Record<Step, number> {
  return Object.fromEntries(
    STEPS.map((step) => [step, round(percentiles(samples.map((sample) => sample[step])).p50, 2)]),
  ) as Record<Step, number>;
}
