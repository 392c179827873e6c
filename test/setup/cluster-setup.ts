// The cluster project's global setup: a multi-service Temporal cluster on PostgreSQL (built from
// the Go module proxy on first use), which the fault suites run against as they run against the
// dev server. Its address goes to the tests through TEMPORAL_CLUSTER_ADDRESS (test/setup/target-cluster.ts).
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { type TemporalCluster, clusterBinaries, startCluster } from '../../src/testing/cluster';
import { writeTestBundle } from './global-setup';

const state = globalThis as { __temporalCluster?: Promise<TemporalCluster> };

export default async function clusterSetup(): Promise<void> {
  state.__temporalCluster ??= (async () => {
    const started = Date.now();
    const binaries = clusterBinaries(resolve(__dirname, '..', '..'), (line) => console.log(`\n${line}`));
    const built = Date.now();
    const dir = resolve(__dirname, '../../.data/cluster-test');
    rmSync(dir, { recursive: true, force: true });
    const [cluster] = await Promise.all([startCluster({ dir, binaries }), writeTestBundle()]);
    console.log(
      `\ncluster for the tests on ${cluster.address}: server ready in ${((built - started) / 1000).toFixed(1)} s, ` +
        `cluster up in ${((Date.now() - built) / 1000).toFixed(1)} s`,
    );
    process.env.TEMPORAL_CLUSTER_ADDRESS = cluster.address;
    return cluster;
  })();
  await state.__temporalCluster;
}
