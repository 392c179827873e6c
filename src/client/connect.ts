// `connectClient`: the connection a process that only starts and watches runs uses. A plain
// gRPC client connection, so the process never loads the Temporal worker's native runtime.
import { Client, Connection } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { resolve } from 'node:path';
import { MAX_TIMER_MS, isWholeNumber } from '../seam/constants';
import { SubagentError } from '../seam/errors';
import { clientFromEnv, connectionOptionsOf, temporalSettingsFromEnv, unreachable } from '../temporal/config';

/** Where `subagents dev` serves, and where a client looks when no server is configured. */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';

export interface SubagentClientConnection {
  readonly address: string;
  readonly namespace: string;
  readonly connection: Connection;
  /** With the environment's data converter: encryption, large payloads out of the history. */
  readonly client: Client;
  readonly dataConverter?: DataConverter;
  close(): Promise<void>;
}

export interface ConnectClientOptions {
  env?: NodeJS.ProcessEnv;
  /** How long to wait for the server to answer; default 10 s. */
  connectTimeoutMs?: number;
}

/**
 * Connects a client to the configured server (see `temporalSettingsFromEnv`), or to
 * 127.0.0.1:7233 when none is. Rejects with `UNAVAILABLE` when the server does not answer in
 * time, `INVALID_CONFIG` for a configuration that cannot work (a `connectTimeoutMs` that is not a
 * whole number of ms from 1 to 2,147,483,647 among it). The caller must `close()`.
 */
export async function connectClient(options: ConnectClientOptions = {}): Promise<SubagentClientConnection> {
  const { connectTimeoutMs } = options;
  // NaN, 0, a negative or a huge timeout failed at once, as a server that cannot be reached;
  // Infinity waited for ever.
  if (connectTimeoutMs !== undefined && !isWholeNumber(connectTimeoutMs, 1, MAX_TIMER_MS)) {
    throw new SubagentError(
      `connectTimeoutMs must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS} (got ${connectTimeoutMs})`,
      'INVALID_CONFIG',
    );
  }
  const configured = temporalSettingsFromEnv(options.env);
  const settings = configured ?? { address: DEFAULT_TEMPORAL_ADDRESS, namespace: 'default' };
  let connection: Connection;
  try {
    connection = await Connection.connect({
      ...connectionOptionsOf(settings),
      ...(connectTimeoutMs === undefined ? {} : { connectTimeout: connectTimeoutMs }),
    });
  } catch (err) {
    throw unreachable(settings.address, err);
  }
  return {
    address: settings.address,
    namespace: settings.namespace,
    connection,
    // No server configured: `subagents dev`'s, whose payloads are files under its data directory.
    ...clientFromEnv(
      connection,
      settings.namespace,
      options.env,
      configured ? undefined : defaultPayloadDir(options.env),
    ),
    close: () => connection.close(),
  };
}

/** Where the embedded default keeps offloaded payloads: `payloads/` in its data directory. */
export function defaultPayloadDir(env: NodeJS.ProcessEnv = process.env, dataDir?: string): string {
  return resolve(dataDir ?? env.SUBAGENTS_DATA_DIR ?? '.data', 'payloads');
}
