// `connectTemporal`: the connection a process that hosts workers uses, one `NativeConnection`
// shared by its client and its workers (which lets the server start workflows eagerly on a local
// worker). With no server configured it starts the embedded one (`temporal server start-dev`).
import { resolve } from 'node:path';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection } from '@temporalio/worker';
import { defaultPayloadDir } from '../client/connect';
import { clientFromEnv, connectionOptionsOf, temporalSettingsFromEnv, unreachable } from '../temporal/config';
import { DevServer, DevServerOptions, startDevServer } from '../temporal/dev-server';
import { ensureSearchAttributes } from '../temporal/search-attributes';

export interface TemporalEnvironment {
  readonly address: string;
  readonly namespace: string;
  /** Shared by client and workers, which lets the server start workflows eagerly on a local worker. */
  readonly connection: NativeConnection;
  readonly client: Client;
  /** Set when the embedded dev server was started. */
  readonly devServer?: DevServer;
  /** The environment's data converter (encryption, offloaded payloads), already on `client`; give it to workers too. */
  readonly dataConverter?: DataConverter;
  /** Closes the connection and stops the embedded server, if any. */
  close(): Promise<void>;
}

export interface ConnectTemporalOptions {
  env?: NodeJS.ProcessEnv;
  /** Start the embedded server even when a server is configured (`subagents dev`). */
  embedded?: boolean;
  /** Where the embedded server keeps its SQLite file; default `.data/` under the working directory. */
  dataDir?: string;
  devServer?: DevServerOptions;
}

/**
 * Connects to the configured server (see `temporalSettingsFromEnv`), or starts the embedded one.
 * Rejects with `UNAVAILABLE` when the server does not answer (an embedded server it started is
 * stopped again) and `INVALID_CONFIG` for a configuration that cannot work. The caller must `close()`.
 */
export async function connectTemporal(options: ConnectTemporalOptions = {}): Promise<TemporalEnvironment> {
  const configured = options.embedded ? undefined : temporalSettingsFromEnv(options.env);
  const devServer = configured
    ? undefined
    : await startDevServer({ dbFilename: resolve(options.dataDir ?? '.data', 'temporal.db'), ...options.devServer });
  const settings = configured ?? { address: devServer!.address, namespace: devServer!.namespace };
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect(connectionOptionsOf(settings));
  } catch (err) {
    await devServer?.stop();
    throw unreachable(settings.address, err);
  }
  // A database file made before the runs' search attributes existed lacks them: add them.
  if (devServer) await ensureSearchAttributes(connection, settings.namespace);
  return {
    address: settings.address,
    namespace: settings.namespace,
    connection,
    ...clientFromEnv(
      connection,
      settings.namespace,
      options.env,
      devServer ? defaultPayloadDir(options.env, options.dataDir) : undefined,
    ),
    ...(devServer ? { devServer } : {}),
    async close() {
      await connection.close();
      await devServer?.stop();
    },
  };
}
