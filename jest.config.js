/**
 * Tests in three layers, each a jest project: `unit` (pure code, no server: seconds), then
 * `integration` and `faults` against one real Temporal dev server that the global setup starts
 * once for both (and stops). `npm test` runs all three; `npm run test:unit` the fast loop.
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
};

module.exports = {
  testTimeout: 60_000,
  maxWorkers: 2,
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...withServer, displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.test.ts'] },
    { ...withServer, displayName: 'faults', testMatch: ['<rootDir>/test/faults/**/*.test.ts'] },
  ],
};
