/** Tests run against a real Temporal dev server that globalSetup starts once for the whole run. */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)s$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }],
  },
  // The ACP SDK ships ES modules only; jest loads it through the same transform.
  transformIgnorePatterns: ['/node_modules/(?!@agentclientprotocol/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  testTimeout: 60_000,
  maxWorkers: 2,
};
