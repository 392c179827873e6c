// The baselines the benchmarks compare against: bare Temporal workflows with no agent in them.
import { proxyActivities } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '1 minute' });

/** One activity: the least a durable delegation can cost. */
export async function bareRoundTrip(): Promise<void> {
  await noop();
}

/** An agent loop's shape with nothing in it: per step, one activity for the model and one for the tool. */
export async function bareToolLoop(steps: number): Promise<void> {
  for (let step = 0; step < steps; step++) {
    await noop();
    if (step < steps - 1) await noop();
  }
}
