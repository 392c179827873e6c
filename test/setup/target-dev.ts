// Tests of this project run against the shared dev server (test/setup/global-setup.ts).
process.env.TEMPORAL_TEST_ADDRESS = process.env.TEMPORAL_DEV_ADDRESS;
