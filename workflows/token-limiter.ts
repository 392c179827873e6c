// One endpoint's token quota, shared by every worker of a fleet: a token bucket held by one
// workflow per provider (`tokenLimiterId`), which each model call reserves its estimated tokens
// from before it is sent. The bucket refills at the quota's rate up to its burst, as the large
// providers' own limiters do; a reservation it cannot cover yet is scheduled for the moment it
// can (the bucket goes into debt), so calls leave at the quota however many workers send them.
// The workflow ends once its bucket is full again (a new one would start the same) and continues
// as new before its history grows long.
import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { ReserveTokensArgs, TokenQuota } from '../activities/types';
import { isPlainObject } from '../src/seam/json';
import { type TokenBucketState, type TokenLimiterInput, chargeTokensSignal, reserveTokensUpdate } from './definitions';

/** Reservations one run takes before it continues as new: the server refuses a run's 2,000th update. */
const RESERVATIONS_PER_RUN = 500;
/** How long a full bucket waits for a call before its workflow ends (the next call would start it again). */
const LINGER_MS = 60_000;

/**
 * A charge our workers never send (a raw client's: no arguments, null, a number that is not finite,
 * more tokens than the bucket holds) is ignored. Before, null failed every workflow task of the
 * limiter, so no call of the provider left, fleet-wide; Infinity put the bucket in a debt it never
 * paid. Asked with `patched()`, and only by a limiter that gets one.
 */
export const MALFORMED_CHARGES_PATCH = 'malformed-charges-ignored';

/**
 * A limiter started with input that is not an object, or with a bucket that is not one (a raw
 * client's: our workers start it with `{}`, and carry finite numbers) starts as a new one. Before,
 * null failed every workflow task of the limiter, so no call of the provider left, fleet-wide; a
 * bucket of text answered each reservation with a start of NaN, so no call waited for the quota.
 * Asked with `patched()`, and only by such a limiter.
 */
export const MALFORMED_LIMITER_INPUT_PATCH = 'malformed-limiter-input-ignored';

export async function tokenLimiterWorkflow(input: TokenLimiterInput): Promise<void> {
  const started = isLimiterInput(input) || !patched(MALFORMED_LIMITER_INPUT_PATCH) ? input : {};
  let bucket = started.bucket;
  let quota: TokenQuota | undefined;
  let reservations = 0;
  let changes = 0;
  /** The bucket at `now`, after the newest quota's refill since it was last touched. */
  const touch = (declared: TokenQuota): TokenBucketState => {
    quota = { tokensPerMinute: declared.tokensPerMinute, burst: declared.burst };
    bucket = refilled(bucket, quota, Date.now());
    changes++;
    return bucket;
  };

  setHandler(
    reserveTokensUpdate,
    (args) => {
      const now = Date.now();
      const level = touch(args).level - args.tokens;
      bucket = { level, at: now };
      reservations++;
      // What the bucket owes comes in at the quota's rate: the call leaves once it has.
      return { startAt: level >= 0 ? now : Math.ceil(now + (-level * 60_000) / args.tokensPerMinute) };
    },
    { validator: validateReservation },
  );
  setHandler(chargeTokensSignal, (args) => {
    if (!isCharge(args) && patched(MALFORMED_CHARGES_PATCH)) return;
    if (!(args.tokens > 0 && args.tokensPerMinute > 0 && args.burst > 0)) return;
    const touched = touch(args);
    bucket = { level: touched.level - args.tokens, at: touched.at };
  });

  for (;;) {
    const seen = changes;
    const untilFull = bucket && quota ? msUntilFull(refilled(bucket, quota, Date.now()), quota) : 0;
    const due = await condition(
      () => reservations >= RESERVATIONS_PER_RUN || workflowInfo().continueAsNewSuggested,
      Math.max(untilFull, LINGER_MS),
    );
    if (due) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof tokenLimiterWorkflow>({ ...(bucket ? { bucket } : {}) });
    }
    // Nothing reserved or charged for as long as the bucket needed to fill: it is full, as a new one.
    if (changes === seen) return;
  }
}

function validateReservation(args: unknown): void {
  // A raw client's null was refused with the SDK's TypeError.
  if (!isPlainObject(args)) {
    throw ApplicationFailure.nonRetryable(
      'a token reservation is { tokens, tokensPerMinute, burst }',
      'INVALID_REQUEST',
    );
  }
  const { tokens, tokensPerMinute, burst } = args as ReserveTokensArgs;
  const positive = (value: number) => typeof value === 'number' && Number.isFinite(value) && value > 0;
  if (!positive(tokens) || !positive(tokensPerMinute) || !positive(burst)) {
    throw ApplicationFailure.nonRetryable(
      `a token reservation needs positive tokens, tokensPerMinute and burst (got ${tokens}, ${tokensPerMinute}, ${burst})`,
      'INVALID_CONFIG',
    );
  }
  if (tokens > burst) {
    throw ApplicationFailure.nonRetryable(
      `a model call estimated at ${tokens} tokens is over the endpoint's token burst of ${burst}: no wait lets it through (raise endpoint.tokenBurst or lower endpoint.maxTokens)`,
      'OVER_TOKEN_BURST',
    );
  }
}

/** Input as our workers start a limiter with, or carry through continue-as-new. */
function isLimiterInput(input: unknown): boolean {
  if (!isPlainObject(input)) return false;
  const { bucket } = input;
  return bucket === undefined || (isPlainObject(bucket) && Number.isFinite(bucket.level) && Number.isFinite(bucket.at));
}

/** A charge as our workers send it: finite, positive numbers, and no more tokens than the bucket holds. */
function isCharge(args: unknown): boolean {
  const { tokens, tokensPerMinute, burst } = (args ?? {}) as Partial<TokenQuota & { tokens: unknown }>;
  const positive = (value: unknown) => typeof value === 'number' && Number.isFinite(value) && value > 0;
  return positive(tokens) && positive(tokensPerMinute) && positive(burst) && (tokens as number) <= burst!;
}

/** `bucket` refilled at `quota`'s rate from when it was last touched until `now`, up to the burst; a new bucket starts full. */
function refilled(bucket: TokenBucketState | undefined, quota: TokenQuota, now: number): TokenBucketState {
  if (!bucket) return { level: quota.burst, at: now };
  const elapsed = Math.max(0, now - bucket.at);
  return { level: Math.min(quota.burst, bucket.level + (elapsed * quota.tokensPerMinute) / 60_000), at: now };
}

function msUntilFull(bucket: TokenBucketState, quota: TokenQuota): number {
  return Math.ceil(((quota.burst - bucket.level) * 60_000) / quota.tokensPerMinute);
}
