// Run settings: the documented defaults, merged with service- and provider-level overrides and
// resolved to milliseconds before any workflow starts, so workflows carry no hidden defaults.
import { msToNumber } from '@temporalio/common/lib/time';
import { SubagentError } from '../seam/errors';
import type { SubagentDuration, SubagentRunSettings } from '../seam/provider';
import type { ResolvedRunSettings } from '../../workflows/definitions';

/** The defaults, with the reason for each in the Settings table of docs/operations.md. */
export const DEFAULT_RUN_SETTINGS = {
  resumeWindow: '24 hours',
  turnTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
  structuredNudgeRetries: 1,
  maxStepsPerTurn: 200,
  approvalTimeout: '24 hours',
} as const satisfies SubagentRunSettings;

/**
 * Later layers win; `maxPayloadBytes` is the service's. Throws `SubagentError('INVALID_CONFIG')`
 * for a value that cannot work.
 */
export function resolveRunSettings(
  maxPayloadBytes: number,
  ...layers: (SubagentRunSettings | undefined)[]
): ResolvedRunSettings {
  const merged: SubagentRunSettings = { ...DEFAULT_RUN_SETTINGS, retry: { ...DEFAULT_RUN_SETTINGS.retry } };
  for (const layer of layers) {
    if (!layer) continue;
    Object.assign(merged, { ...layer, retry: { ...merged.retry, ...layer.retry } });
  }
  const retry = merged.retry!;
  const backoffCoefficient = retry.backoffCoefficient!;
  const maximumAttempts = retry.maximumAttempts!;
  if (!(backoffCoefficient >= 1)) {
    invalidConfig(`retry.backoffCoefficient must be at least 1 (got ${backoffCoefficient})`);
  }
  // The server counts attempts in 32 bits: 2 ** 31 read as negative (it refused every workflow
  // task of the run), 2 ** 32 as 0 (retry for ever).
  count(maximumAttempts, 'retry.maximumAttempts', 1, MAX_INT32);
  const nonRetryable: unknown = retry.nonRetryableErrorTypes ?? [];
  if (!(Array.isArray(nonRetryable) && nonRetryable.every((type) => typeof type === 'string'))) {
    invalidConfig(`retry.nonRetryableErrorTypes must be a list of error types (got ${JSON.stringify(nonRetryable)})`);
  }
  const structuredNudgeRetries = count(merged.structuredNudgeRetries!, 'structuredNudgeRetries', 0);
  const maxStepsPerTurn = count(merged.maxStepsPerTurn!, 'maxStepsPerTurn', 1);
  const initialIntervalMs = duration(retry.initialInterval!, 'retry.initialInterval');
  const maximumIntervalMs = duration(retry.maximumInterval!, 'retry.maximumInterval');
  // The SDK refuses such a policy only when a run schedules its first turn: the run would start,
  // then settle `error`.
  if (maximumIntervalMs < initialIntervalMs) {
    invalidConfig(
      `retry.maximumInterval must be at least retry.initialInterval (got ${JSON.stringify(retry.maximumInterval)} and ${JSON.stringify(retry.initialInterval)})`,
    );
  }
  return {
    resumeWindowMs: duration(merged.resumeWindow!, 'resumeWindow', 0),
    turnStartToCloseMs: duration(merged.turnTimeout!, 'turnTimeout'),
    turnHeartbeatMs: duration(merged.heartbeatTimeout!, 'heartbeatTimeout'),
    turnRetry: {
      initialIntervalMs,
      backoffCoefficient,
      maximumIntervalMs,
      maximumAttempts,
      // The types no retry can fix fail for good where they are thrown (activities/host.ts), so
      // no activity carries them in its retry policy.
      nonRetryableErrorTypes: [...new Set(nonRetryable as string[])],
    },
    structuredNudgeRetries,
    maxStepsPerTurn,
    maxPayloadBytes,
    approvalTimeoutMs: duration(merged.approvalTimeout!, 'approvalTimeout'),
  };
}

const MAX_INT32 = 2 ** 31 - 1;

function count(value: number, name: string, minimum: number, maximum = Number.MAX_SAFE_INTEGER): number {
  if (!(Number.isSafeInteger(value) && value >= minimum && value <= maximum)) {
    invalidConfig(`${name} must be an integer from ${minimum} to ${maximum} (got ${value})`);
  }
  return value;
}

function duration(value: SubagentDuration, name: string, minimum = 1): number {
  let ms: number;
  try {
    ms = msToNumber(value as Parameters<typeof msToNumber>[0]);
  } catch (err) {
    invalidConfig(`${name} must be a duration such as 10000 or '10 seconds' (got ${JSON.stringify(value)})`, err);
  }
  if (!(Number.isFinite(ms) && ms >= minimum)) {
    invalidConfig(`${name} must be at least ${minimum} ms (got ${JSON.stringify(value)})`);
  }
  return ms;
}

function invalidConfig(message: string, cause?: unknown): never {
  throw new SubagentError(message, 'INVALID_CONFIG', { cause });
}
