// Starts one real Temporal dev server (in memory, 127.0.0.1, a free port) and bundles the workflow
// code once; test files connect to the server and reuse the bundle through the environment. The
// integration and fault projects both name this setup: the second call finds the server running.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type DevServer, startDevServer } from '../../src/testing';
import { bundleSubagentWorkflows } from '../../src/worker';

export const TEST_NAMESPACES = ['isolated'];

const state = globalThis as { __temporalDevServer?: Promise<DevServer> };

export default async function globalSetup(): Promise<void> {
  state.__temporalDevServer ??= (async () => {
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
    return server;
  })();
  await state.__temporalDevServer;
}
