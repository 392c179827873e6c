// Tests of this project run against the multi-service cluster (test/setup/cluster-setup.ts).
process.env.TEMPORAL_TEST_ADDRESS = process.env.TEMPORAL_CLUSTER_ADDRESS;
