// The baselines the benchmarks compare against: bare Temporal workflows with no agent in them.
import {
  type ActivityOptions,
  ApplicationFailure,
  condition,
  continueAsNew,
  defineUpdate,
  proxyActivities,
  setHandler,
  upsertMemo,
} from '@temporalio/workflow';

/**
 * The activities, with the options a run's own activities have (`turnActivityOptions` of the
 * same settings, from the caller): the same timeouts, heartbeat timeout and retry policy.
 */
const activities = (options: ActivityOptions) =>
  proxyActivities<{ noop(): Promise<void>; parkedTurn(): Promise<void> }>(options);

export const resumeParkedUpdate = defineUpdate<void>('resume');
export const wakeParkedUpdate = defineUpdate<void>('wake');

/** One activity: the least a durable delegation can cost. */
export async function bareRoundTrip(options: ActivityOptions): Promise<void> {
  await activities(options).noop();
}

/**
 * A resumable delegation's shape with nothing in it: one activity, its settle point in the memo
 * (where its caller sees it in history), then parked until a `resume` update continues it as new,
 * whose run starts with an activity (`parkedTurn`). `wake` is refused, as the run workflow's is.
 */
export async function bareParked(options: ActivityOptions, resumed = false): Promise<void> {
  const { noop, parkedTurn } = activities(options);
  await (resumed ? parkedTurn() : noop());
  upsertMemo({ settled: true });
  let resume = false;
  setHandler(resumeParkedUpdate, () => {
    resume = true;
  });
  setHandler(wakeParkedUpdate, () => undefined, {
    validator: () => {
      throw ApplicationFailure.nonRetryable('nothing to do', 'WOKEN');
    },
  });
  if (await condition(() => resume, '1 hour')) await continueAsNew<typeof bareParked>(options, true);
}

export const settledUpdate = defineUpdate<void>('settled');

/**
 * The bare parked workflow whose caller learns its settle point from the answer to an update sent
 * with its start (update-with-start, Temporal's early return), not from history: the same activity,
 * memo change and park. Such a start cannot be eager. Not ours: the reference for that way to wait.
 */
export async function bareEarlyReturn(options: ActivityOptions): Promise<void> {
  let settled = false;
  setHandler(settledUpdate, () => condition(() => settled));
  await activities(options).noop();
  upsertMemo({ settled: true });
  settled = true;
  await condition(() => false, '1 hour');
}

/**
 * The resumable shape that settles by continuing as new, with nothing in it: one activity, then a
 * continue-as-new whose run parks until a `resume` update, which it takes in place: its activity
 * (`parkedTurn`), then the next continue-as-new. Its caller reads the close alone. Not ours: the
 * reference for the shape ours could take (docs/benchmarks.md).
 */
export async function bareContinuedAtSettle(options: ActivityOptions, parked = false): Promise<void> {
  const { noop, parkedTurn } = activities(options);
  if (parked) {
    let resume = false;
    setHandler(resumeParkedUpdate, () => {
      resume = true;
    });
    if (!(await condition(() => resume, '1 hour'))) return;
    await parkedTurn();
  } else {
    await noop();
  }
  await continueAsNew<typeof bareContinuedAtSettle>(options, true);
}

/** An agent loop's shape with nothing in it: per step, one activity for the model and one for the tool. */
export async function bareToolLoop(options: ActivityOptions, steps: number): Promise<void> {
  const { noop } = activities(options);
  for (let step = 0; step < steps; step++) {
    await noop();
    if (step < steps - 1) await noop();
  }
}
