// Stops the cluster project's cluster.
import type { TemporalCluster } from '../../src/testing/cluster';

export default async function clusterTeardown(): Promise<void> {
  const state = globalThis as { __temporalCluster?: Promise<TemporalCluster> };
  const cluster = state.__temporalCluster;
  state.__temporalCluster = undefined;
  await (await cluster)?.stop();
}
