/**
 * Tests in layers, each a jest project: `unit` (pure code, no server: seconds), then
 * `integration`, `conformance` (the seam spec clause by clause) and `faults` against one real
 * Temporal dev server that the global setup starts once for them all (and stops), and `cluster`
 * against a multi-service cluster on PostgreSQL. `npm test` runs every layer; `npm run test:unit`
 * is the fast loop.
 */
const base = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)s$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }],
  },
  // The ACP SDK ships ES modules only; jest loads it through the same transform.
  transformIgnorePatterns: ['/node_modules/(?!@agentclientprotocol/)'],
};
const withServer = {
  ...base,
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  setupFiles: ['<rootDir>/test/setup/target-dev.ts'],
};
// The fault suites again, on a multi-service Temporal cluster on PostgreSQL, and the faults only a
// cluster has (test/cluster/).
const onCluster = {
  ...base,
  globalSetup: '<rootDir>/test/setup/cluster-setup.ts',
  globalTeardown: '<rootDir>/test/setup/cluster-teardown.ts',
  setupFiles: ['<rootDir>/test/setup/target-cluster.ts'],
};

module.exports = {
  testTimeout: 60_000,
  maxWorkers: 2,
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...withServer, displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.test.ts'] },
    { ...withServer, displayName: 'conformance', testMatch: ['<rootDir>/test/conformance/**/*.test.ts'] },
    { ...withServer, displayName: 'faults', testMatch: ['<rootDir>/test/faults/**/*.test.ts'] },
    {
      ...onCluster,
      displayName: 'cluster',
      testMatch: [
        '<rootDir>/test/faults/{worker-kills,worker-crash,caller,deploy}.test.ts',
        '<rootDir>/test/cluster/**/*.test.ts',
      ],
    },
  ],
};
