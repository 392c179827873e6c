// The baselines the benchmarks compare against: bare Temporal workflows with no agent in them.
import {
  ApplicationFailure,
  condition,
  continueAsNew,
  defineUpdate,
  proxyActivities,
  setHandler,
  upsertMemo,
} from '@temporalio/workflow';

const { noop, parkedTurn } = proxyActivities<{ noop(): Promise<void>; parkedTurn(): Promise<void> }>({
  startToCloseTimeout: '1 minute',
});

export const resumeParkedUpdate = defineUpdate<void>('resume');
export const wakeParkedUpdate = defineUpdate<void>('wake');

/** One activity: the least a durable delegation can cost. */
export async function bareRoundTrip(): Promise<void> {
  await noop();
}

/**
 * A resumable delegation's shape with nothing in it: one activity, its settle point in the memo
 * (where its caller sees it in history), then parked until a `resume` update continues it as new,
 * whose run starts with an activity (`parkedTurn`). `wake` is refused, as the run workflow's is.
 */
export async function bareParked(resumed = false): Promise<void> {
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
  if (await condition(() => resume, '1 hour')) await continueAsNew<typeof bareParked>(true);
}

/** An agent loop's shape with nothing in it: per step, one activity for the model and one for the tool. */
export async function bareToolLoop(steps: number): Promise<void> {
  for (let step = 0; step < steps; step++) {
    await noop();
    if (step < steps - 1) await noop();
  }
}
