// Environment-derived settings: which Temporal to use. With no TEMPORAL_ADDRESS the project
// starts its embedded dev server; otherwise it connects to the given server (TLS / API key too).
// Variable names follow the Temporal CLI's, so one environment serves both.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection, TLSConfig } from '@temporalio/worker';
import { DevServer, DevServerOptions, startDevServer } from './dev-server';
import type { DataConverter } from '@temporalio/common';
import { codecFromEnv } from './codec';
import { SubagentError } from './errors';
import { ensureSearchAttributes } from './search-attributes';

export interface TemporalConnectionSettings {
  address: string;
  namespace: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
}

/**
 * Reads `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` (default `default`), `TEMPORAL_API_KEY`,
 * `TEMPORAL_TLS` (`true`/`false`; on by default with an API key or a client certificate),
 * `TEMPORAL_TLS_CLIENT_CERT_PATH`, `TEMPORAL_TLS_CLIENT_KEY_PATH`,
 * `TEMPORAL_TLS_SERVER_CA_CERT_PATH` and `TEMPORAL_TLS_SERVER_NAME`.
 * Returns undefined when `TEMPORAL_ADDRESS` is unset: use the embedded server.
 */
export function temporalSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TemporalConnectionSettings | undefined {
  const address = env.TEMPORAL_ADDRESS?.trim();
  if (!address) return undefined;
  const namespace = env.TEMPORAL_NAMESPACE?.trim() || 'default';
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  const certPath = env.TEMPORAL_TLS_CLIENT_CERT_PATH;
  const keyPath = env.TEMPORAL_TLS_CLIENT_KEY_PATH;
  if (Boolean(certPath) !== Boolean(keyPath)) {
    throw new SubagentError(
      'TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH must be set together',
      'INVALID_CONFIG',
    );
  }
  const caPath = env.TEMPORAL_TLS_SERVER_CA_CERT_PATH;
  const serverName = env.TEMPORAL_TLS_SERVER_NAME;
  const tlsFlag = env.TEMPORAL_TLS?.trim().toLowerCase();
  const tlsWanted = tlsFlag ? tlsFlag === 'true' || tlsFlag === '1' : Boolean(apiKey || certPath || caPath);
  let tls: TLSConfig | boolean | undefined;
  if (tlsWanted) {
    const config: TLSConfig = {
      ...(serverName ? { serverNameOverride: serverName } : {}),
      ...(caPath ? { serverRootCACertificate: readFileSync(caPath) } : {}),
      ...(certPath && keyPath ? { clientCertPair: { crt: readFileSync(certPath), key: readFileSync(keyPath) } } : {}),
    };
    tls = Object.keys(config).length > 0 ? config : true;
  }
  return { address, namespace, ...(tls === undefined ? {} : { tls }), ...(apiKey ? { apiKey } : {}) };
}

export interface TemporalEnvironment {
  readonly address: string;
  readonly namespace: string;
  /** Shared by client and workers, which lets the server start workflows eagerly on a local worker. */
  readonly connection: NativeConnection;
  readonly client: Client;
  /** Set when the embedded dev server was started. */
  readonly devServer?: DevServer;
  /** Encryption from SUBAGENT_ENCRYPTION_KEYS, already on `client`; give it to workers too. */
  readonly dataConverter?: DataConverter;
  /** Closes the connection and stops the embedded server, if any. */
  close(): Promise<void>;
}

export interface ConnectTemporalOptions {
  env?: NodeJS.ProcessEnv;
  /** Where the embedded server keeps its SQLite file; default `.data/` under the working directory. */
  dataDir?: string;
  devServer?: DevServerOptions;
}

/** Connects to the configured server, or starts the embedded one. The caller must `close()`. */
export async function connectTemporal(options: ConnectTemporalOptions = {}): Promise<TemporalEnvironment> {
  const settings = temporalSettingsFromEnv(options.env);
  const devServer = settings
    ? undefined
    : await startDevServer({ dbFilename: resolve(options.dataDir ?? '.data', 'temporal.db'), ...options.devServer });
  const address = settings?.address ?? devServer!.address;
  const namespace = settings?.namespace ?? devServer!.namespace;
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect({
      address,
      ...(settings?.tls === undefined ? {} : { tls: settings.tls }),
      ...(settings?.apiKey ? { apiKey: settings.apiKey } : {}),
    });
  } catch (err) {
    await devServer?.stop();
    throw new SubagentError(`cannot reach the Temporal server at ${address}: ${(err as Error).message}`, 'UNAVAILABLE', {
      cause: err,
    });
  }
  // A database file made before the runs' search attributes existed lacks them: add them.
  if (devServer) await ensureSearchAttributes(connection, namespace);
  const codec = codecFromEnv(options.env);
  const dataConverter: DataConverter | undefined = codec ? { payloadCodecs: [codec] } : undefined;
  return {
    address,
    namespace,
    connection,
    client: new Client({ connection, namespace, ...(dataConverter ? { dataConverter } : {}) }),
    devServer,
    ...(dataConverter ? { dataConverter } : {}),
    async close() {
      await connection.close();
      await devServer?.stop();
    },
  };
}
