// Stops the shared dev server once, whichever project's teardown comes first.
import type { DevServer } from '../../src/testing';

export default async function globalTeardown(): Promise<void> {
  const state = globalThis as { __temporalDevServer?: Promise<DevServer> };
  const server = state.__temporalDevServer;
  state.__temporalDevServer = undefined;
  await (await server)?.stop();
}
