// Which Temporal server to use, read the way the Temporal CLI reads it, through
// `@temporalio/envconfig`: the TEMPORAL_* variables over a profile of the CLI's config file
// (TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml; TEMPORAL_PROFILE picks the
// profile). The library, the worker entry, the main job and the CLI all connect through here.
import { Client, type ConnectionLike, type TLSConfig } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { loadClientConfigProfile, toClientOptions } from '@temporalio/envconfig';
import { SubagentError } from '../seam/errors';
import { isPlainObject } from '../seam/json';
import type { SubagentModelPrices } from '../seam/provider';
import { codecFromEnv } from './codec';
import { ENCRYPTED_FAILURE_CONVERTER_PATH } from './failure-converter';
import {
  DEFAULT_OFFLOAD_BYTES,
  FilePayloadStore,
  MAX_OFFLOAD_BYTES,
  type SubagentPayloadStore,
  payloadStorage,
} from './payload-store';
import { PostgresPayloadStore } from './postgres-payload-store';

export interface TemporalConnectionSettings {
  address: string;
  namespace: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
  /** gRPC metadata: TEMPORAL_GRPC_META_* or the profile's `grpc_meta`. */
  metadata?: Record<string, string>;
}

/**
 * The configured server: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` (default `default`),
 * `TEMPORAL_API_KEY`, `TEMPORAL_TLS` (`true`/`false`; on by default with an API key or any TLS
 * setting), `TEMPORAL_TLS_CLIENT_CERT_PATH` / `_DATA`, `TEMPORAL_TLS_CLIENT_KEY_PATH` / `_DATA`,
 * `TEMPORAL_TLS_SERVER_CA_CERT_PATH` / `_DATA`, `TEMPORAL_TLS_SERVER_NAME`, `TEMPORAL_GRPC_META_*`,
 * each over the same field of the config file's profile. Returns undefined when no address is
 * configured: use the embedded server. Throws `INVALID_CONFIG` for a config file that cannot be
 * read, a profile that does not exist, or a client certificate without its key (or the reverse).
 */
export function temporalSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TemporalConnectionSettings | undefined {
  let profile: ReturnType<typeof loadClientConfigProfile>;
  try {
    profile = loadClientConfigProfile(env === process.env ? {} : { overrideEnvVars: env as Record<string, string> });
  } catch (err) {
    throw new SubagentError(
      `the Temporal client configuration cannot be read: ${(err as Error).message}`,
      'INVALID_CONFIG',
      {
        cause: err,
      },
    );
  }
  if (Boolean(profile.tls?.clientCert) !== Boolean(profile.tls?.clientKey)) {
    throw new SubagentError(
      'a TLS client certificate and its key must be set together (TEMPORAL_TLS_CLIENT_CERT_* and TEMPORAL_TLS_CLIENT_KEY_*)',
      'INVALID_CONFIG',
    );
  }
  const { namespace, connectionOptions } = toClientOptions(profile);
  const address = connectionOptions.address?.trim();
  if (!address) return undefined;
  const tls = tlsOf(connectionOptions.tls);
  const { apiKey, metadata } = connectionOptions;
  return {
    address,
    namespace: namespace?.trim() || 'default',
    ...(tls === undefined ? {} : { tls }),
    ...(apiKey ? { apiKey: apiKey as string } : {}),
    ...(metadata && Object.keys(metadata).length > 0 ? { metadata: metadata as Record<string, string> } : {}),
  };
}

/** Options for `Connection.connect` and `NativeConnection.connect`. */
export function connectionOptionsOf(settings: TemporalConnectionSettings) {
  return {
    address: settings.address,
    ...(settings.tls === undefined ? {} : { tls: settings.tls }),
    ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    ...(settings.metadata ? { metadata: settings.metadata } : {}),
  };
}

/**
 * The data converter the environment configures, if any: encryption (SUBAGENT_ENCRYPTION_KEYS)
 * and large payloads out of the history (SUBAGENT_PAYLOAD_STORE, SUBAGENT_PAYLOAD_OFFLOAD_BYTES;
 * files under `defaultPayloadDir` when no store is named). Throws `INVALID_CONFIG`.
 */
export function dataConverterFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  defaultPayloadDir?: string,
): DataConverter | undefined {
  const codec = codecFromEnv(env);
  const store = payloadStoreFromEnv(env, defaultPayloadDir);
  if (!codec && !store) return undefined;
  return {
    // Failure messages and stack traces are payloads too once encryption is on.
    ...(codec ? { payloadCodecs: [codec], failureConverterPath: ENCRYPTED_FAILURE_CONVERTER_PATH } : {}),
    ...(store ? { externalStorage: payloadStorage(store, { thresholdBytes: offloadThresholdFromEnv(env) }) } : {}),
  };
}

/**
 * A client on `connection` with the environment's data converter (`dataConverterFromEnv`), and
 * that data converter, for the workers sharing the connection.
 */
export function clientFromEnv(
  connection: ConnectionLike,
  namespace: string,
  env: NodeJS.ProcessEnv = process.env,
  defaultPayloadDir?: string,
): { client: Client; dataConverter?: DataConverter } {
  const dataConverter = dataConverterFromEnv(env, defaultPayloadDir);
  return {
    client: new Client({ connection, namespace, ...(dataConverter ? { dataConverter } : {}) }),
    ...(dataConverter ? { dataConverter } : {}),
  };
}

/** The error every connect function throws for a server that does not answer. */
export function unreachable(address: string, err: unknown): SubagentError {
  const reason = (err as Error).message.split('\n')[0];
  return new SubagentError(`cannot reach the Temporal server at ${address}: ${reason}`, 'UNAVAILABLE', { cause: err });
}

/** TLS as the settings carry it: off is omitted, on without any setting is `true`. */
function tlsOf(tls: TLSConfig | boolean | null | undefined): TLSConfig | true | undefined {
  if (!tls) return undefined;
  if (tls === true) return true;
  const set = Object.entries(tls).filter(([, value]) => value !== undefined);
  return set.length > 0 ? (Object.fromEntries(set) as TLSConfig) : true;
}

/**
 * The payload store the environment configures: `SUBAGENT_PAYLOAD_STORE` is `file:<dir>`, a
 * PostgreSQL URL (`postgres://...`), or `off`; unset, it is files under `defaultDir` when one is
 * given (the embedded default), else none. Throws `INVALID_CONFIG` for any other value.
 */
export function payloadStoreFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  defaultDir?: string,
): SubagentPayloadStore | undefined {
  const configured = env.SUBAGENT_PAYLOAD_STORE?.trim();
  if (!configured) return defaultDir === undefined ? undefined : new FilePayloadStore(defaultDir);
  if (configured === 'off') return undefined;
  if (configured.startsWith('file:') && configured.length > 'file:'.length) {
    return new FilePayloadStore(configured.slice('file:'.length));
  }
  // A URL that does not parse (a port that is not a number) failed only at each blob's write or
  // read, with a TypeError.
  if (/^postgres(ql)?:\/\//.test(configured) && URL.canParse(configured)) return new PostgresPayloadStore(configured);
  throw new SubagentError(
    'SUBAGENT_PAYLOAD_STORE must be "file:<directory>", a PostgreSQL URL ("postgres://...") or "off"',
    'INVALID_CONFIG',
  );
}

/**
 * `SUBAGENT_PAYLOAD_OFFLOAD_BYTES`: the offload threshold, a whole number of bytes up to
 * `MAX_OFFLOAD_BYTES` (default 32 KiB).
 */
export function offloadThresholdFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SUBAGENT_PAYLOAD_OFFLOAD_BYTES?.trim();
  if (!raw) return DEFAULT_OFFLOAD_BYTES;
  const bytes = Number(raw);
  if (!Number.isInteger(bytes) || bytes < 0 || bytes > MAX_OFFLOAD_BYTES) {
    throw new SubagentError(
      `SUBAGENT_PAYLOAD_OFFLOAD_BYTES must be a whole number of bytes from 0 to ${MAX_OFFLOAD_BYTES} (got "${raw}"): Temporal refuses a payload over 2 MiB that stays in the history`,
      'INVALID_CONFIG',
    );
  }
  return bytes;
}

/**
 * `SUBAGENT_WORKER_CACHED_RUNS`: how many runs a worker keeps in memory between their workflow
 * tasks (the SDK's `maxCachedWorkflows`); undefined for the SDK's default, which grows with the
 * heap (about 2,300 runs on a 4 GiB heap). Each cached run costs the worker about 0.35 MB, and a
 * parked run stays cached until newer runs push it out: a worker that parks many runs should set
 * it (docs/operations.md, Settings). 0 turns the cache off; otherwise at least 2.
 */
export function workerCachedRunsFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.SUBAGENT_WORKER_CACHED_RUNS?.trim();
  if (!raw) return undefined;
  const runs = Number(raw);
  if (!Number.isSafeInteger(runs) || runs < 0 || runs === 1) {
    throw new SubagentError('SUBAGENT_WORKER_CACHED_RUNS must be 0 or a whole number of at least 2', 'INVALID_CONFIG');
  }
  return runs;
}

/**
 * The price table `SUBAGENT_MODEL_PRICES` holds, as JSON: `{"gpt-4.1": {"inputPerMillionTokens":
 * 2, "outputPerMillionTokens": 8}}`; undefined when unset. Anything else is `INVALID_CONFIG`.
 */
export function modelPricesFromEnv(env: NodeJS.ProcessEnv = process.env): SubagentModelPrices | undefined {
  const raw = env.SUBAGENT_MODEL_PRICES?.trim();
  if (!raw) return undefined;
  const invalid = (why: string): never => {
    throw new SubagentError(`SUBAGENT_MODEL_PRICES ${why}`, 'INVALID_CONFIG');
  };
  let table: unknown;
  try {
    table = JSON.parse(raw);
  } catch {
    invalid('is not JSON');
  }
  checkModelPrices(table, 'SUBAGENT_MODEL_PRICES');
  return table;
}

/**
 * Throws `INVALID_CONFIG`, naming `name`, unless `table` is an object of model name to prices of
 * 0 or more: a negative price takes spend back from a budget, and a cost of NaN never reaches
 * `maxCostUsd`.
 */
export function checkModelPrices(table: unknown, name: string): asserts table is SubagentModelPrices {
  const invalid = (why: string): never => {
    throw new SubagentError(`${name} ${why}`, 'INVALID_CONFIG');
  };
  if (!isPlainObject(table)) invalid('must be a JSON object of model name to prices');
  for (const [model, price] of Object.entries(table as Record<string, unknown>)) {
    const { inputPerMillionTokens: input, outputPerMillionTokens: output } = (price ?? {}) as Record<string, unknown>;
    const valid = (value: unknown) => typeof value === 'number' && Number.isFinite(value) && value >= 0;
    if (!valid(input) || !valid(output)) {
      invalid(`needs inputPerMillionTokens and outputPerMillionTokens of 0 or more for "${model}"`);
    }
  }
}
