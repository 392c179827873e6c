// Figure 1 step by step (bench/steps.ts): a sample's time split at the events of its history.
import Long from 'long';
import { medianSteps, stepsOf } from '../../bench/steps';
import { EventType, type HistoryEvent } from '../../src/temporal/run-history';

const T0 = 1_800_000_000_000;
/** An event of `type` at `ms` after T0, with the server's precision (nanoseconds). */
const at = (ms: number, type: number): HistoryEvent => ({
  eventType: type,
  eventTime: { seconds: Long.fromNumber(Math.floor((T0 + ms) / 1000)), nanos: Math.round(((T0 + ms) % 1000) * 1e6) },
});
const {
  EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: STARTED,
  EVENT_TYPE_WORKFLOW_TASK_SCHEDULED: TASK_SCHEDULED,
  EVENT_TYPE_WORKFLOW_TASK_STARTED: TASK_STARTED,
  EVENT_TYPE_WORKFLOW_TASK_COMPLETED: TASK_COMPLETED,
  EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: ACTIVITY_SCHEDULED,
  EVENT_TYPE_ACTIVITY_TASK_STARTED: ACTIVITY_STARTED,
  EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ACTIVITY_COMPLETED,
  EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: MEMO_CHANGED,
  EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: UPDATE_ACCEPTED,
  EVENT_TYPE_TIMER_STARTED: TIMER_STARTED,
} = EventType;

/** A parked delegation's history: start, a task, the activity, the task that settles and parks. */
const parked = [
  at(1.25, STARTED),
  at(1.25, TASK_SCHEDULED),
  at(1.3, TASK_STARTED),
  at(8.5, TASK_COMPLETED),
  at(8.5, ACTIVITY_SCHEDULED),
  at(8.6, ACTIVITY_STARTED),
  at(11.75, ACTIVITY_COMPLETED),
  at(11.75, TASK_SCHEDULED),
  at(13, TASK_STARTED),
  at(18.5, TASK_COMPLETED),
  at(18.5, MEMO_CHANGED),
  at(18.5, TIMER_STARTED),
];

describe('figure 1 step by step', () => {
  it('splits a sample at its start, its first task, its activity and the task that settles it', () => {
    const steps = stepsOf(parked, { calledAt: T0, hadAt: T0 + 20.5 })!;
    const rounded = Object.fromEntries(Object.entries(steps).map(([step, ms]) => [step, Number(ms.toFixed(3))]));
    expect(rounded).toEqual({
      to_start_event: 1.25,
      first_task: 7.25,
      activity: 3.25,
      to_settle_task: 1.25,
      settle_task: 5.5,
      to_caller: 2,
    });
    // The steps are the whole sample.
    expect(Object.values(steps).reduce((sum, ms) => sum + ms, 0)).toBeCloseTo(20.5, 6);
  });

  it('takes the task after the activity as the settling one, not one that came between', () => {
    // An update's workflow task while the activity ran.
    const withUpdate = [
      ...parked.slice(0, 6),
      at(9, TASK_SCHEDULED),
      at(9.5, TASK_STARTED),
      at(10, TASK_COMPLETED),
      at(10, UPDATE_ACCEPTED),
      ...parked.slice(6),
    ];
    expect(stepsOf(withUpdate, { calledAt: T0, hadAt: T0 + 20.5 })).toMatchObject({
      to_settle_task: expect.closeTo(1.25, 6),
      settle_task: expect.closeTo(5.5, 6),
    });
  });

  it('has no steps for a history without the shape', () => {
    const noActivity = parked.filter(({ eventType }) => eventType !== ACTIVITY_COMPLETED);
    expect(stepsOf(noActivity, { calledAt: T0, hadAt: T0 + 20.5 })).toBeUndefined();
    expect(stepsOf(parked.slice(0, 8), { calledAt: T0, hadAt: T0 + 20.5 })).toBeUndefined();
  });

  it('reports the median of each step', () => {
    const one = stepsOf(parked, { calledAt: T0, hadAt: T0 + 20.5 })!;
    const samples = [1, 2, 3].map((late) => ({ ...one, to_caller: one.to_caller + late }));
    expect(medianSteps(samples)).toMatchObject({ first_task: 7.25, to_caller: 4 });
  });
});
