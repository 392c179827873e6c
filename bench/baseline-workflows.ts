// The baseline the benchmarks compare against: a bare Temporal workflow with one activity.
import { proxyActivities } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '1 minute' });

export async function bareRoundTrip(): Promise<void> {
  await noop();
}
