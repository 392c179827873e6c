// Starts one real Temporal dev server (in memory, 127.0.0.1, a free port) and bundles the workflow
// code once; test files connect to the server and reuse the bundle through the environment.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bundleSubagentWorkflows } from '../../src/worker';
import { startDevServer } from '../../src/dev-server';

export const TEST_NAMESPACES = ['isolated'];

export default async function globalSetup(): Promise<void> {
  const dataDir = resolve(__dirname, '../../.data/test');
  mkdirSync(dataDir, { recursive: true });
  const [server, bundle] = await Promise.all([
    startDevServer({ extraNamespaces: TEST_NAMESPACES }),
    bundleSubagentWorkflows(),
  ]);
  const bundlePath = join(dataDir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  process.env.TEMPORAL_TEST_ADDRESS = server.address;
  process.env.TEMPORAL_TEST_BUNDLE = bundlePath;
  (globalThis as { __temporalDevServer?: unknown }).__temporalDevServer = server;
}
