// Starts one real Temporal dev server (in memory, 127.0.0.1, a free port) and bundles the workflow
// code once; test files connect to the server (TEMPORAL_DEV_ADDRESS, which test/setup/target-dev.ts
// makes theirs) and reuse the bundle through the environment. The integration, conformance and
// fault projects all name this setup: the second call finds the server running.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type DevServer, startDevServer } from '../../src/testing';
import { bundleSubagentWorkflows } from '../../src/worker';

export const TEST_NAMESPACES = ['isolated'];

const state = globalThis as { __temporalDevServer?: Promise<DevServer> };

/** Bundles the workflow code once and hands it to the tests (TEMPORAL_TEST_BUNDLE). */
export async function writeTestBundle(): Promise<void> {
  if (process.env.TEMPORAL_TEST_BUNDLE) return;
  const dataDir = resolve(__dirname, '../../.data/test');
  mkdirSync(dataDir, { recursive: true });
  const bundlePath = join(dataDir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await bundleSubagentWorkflows()).code);
  process.env.TEMPORAL_TEST_BUNDLE = bundlePath;
}

export default async function globalSetup(): Promise<void> {
  state.__temporalDevServer ??= (async () => {
    const [server] = await Promise.all([startDevServer({ extraNamespaces: TEST_NAMESPACES }), writeTestBundle()]);
    process.env.TEMPORAL_DEV_ADDRESS = server.address;
    return server;
  })();
  await state.__temporalDevServer;
}
