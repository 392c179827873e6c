// Names and defaults shared by the facade and the worker. Environment-derived settings live in config.ts.

export const TEMPORAL_CLI_VERSION = '1.9.1';
export const TEMPORAL_TEST_SERVER_VERSION = '1.40.0';

/** The task queue a provider's runs (workflow and activities) use unless its descriptor names one. */
export function defaultTaskQueue(provider: string): string {
  return `subagents.${provider}`;
}

/** Prefix of every run id (= workflow id), so runs are easy to find among other workflows. */
export const RUN_ID_PREFIX = 'subagent-';

/** Temporal refuses payloads over 2 MiB; stay under it with room for the envelope. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 2 * 1024 * 1024 - 64 * 1024;

/** Deadline of the call that creates a run or a resume on the server. */
export const DEFAULT_START_TIMEOUT_MS = 10_000;

/** How long waiting for a result rides out an unreachable server before it gives up. */
export const DEFAULT_RECONNECT_WINDOW_MS = 10 * 60_000;
