// What a model call may spend and did: its place in the endpoint's token quota (the fleet's
// limiter workflow), the tokens of a request before it is sent, and the cost of an answer at the
// model's price.
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import { causeChain } from '../src/seam/errors';
import { MAX_TIMER_MS } from '../src/seam/constants';
import type { SubagentAgentProvider, SubagentModelPrices } from '../src/seam/provider';
import type { TranscriptEntry } from '../src/seam/request';
import type { SubagentUsage } from '../src/seam/result';
import type { ActivityHost } from './host';
import type { ChatRequestBody, ModelCallHooks } from './chat-endpoint';

/** What a call reserves for its answer when the endpoint sets no `maxTokens`. */
const DEFAULT_COMPLETION_ALLOWANCE = 1024;
/** The longest pause between two attempts to reach the token limiter. */
const MAX_LIMITER_BACKOFF_MS = 2000;

/**
 * One call's place in its endpoint's token quota (`endpoint.tokensPerMinute`), or undefined for an
 * endpoint without one. `admit` reserves the request's estimate from the provider's limiter and
 * waits until the call may leave (the wait in the heartbeat details, where `subagents show` reads
 * it), asking again while the limiter is out of reach; it resolves with why the call may never
 * leave, if so. `charge` sends what the answer reported beyond the estimate.
 */
export function tokenAdmission(
  host: ActivityHost,
  provider: SubagentAgentProvider,
  setDetails: (details: unknown) => void,
  signal: AbortSignal,
): (Pick<Required<ModelCallHooks>, 'admit'> & { charge(usage: SubagentUsage | undefined): Promise<void> }) | undefined {
  const { tokensPerMinute, tokenBurst } = provider.endpoint;
  const { reserveTokens, chargeTokens } = host.deps;
  if (tokensPerMinute === undefined || !reserveTokens) return undefined;
  const quota = { tokensPerMinute, burst: tokenBurst ?? tokensPerMinute };
  let reserved = 0;
  return {
    async admit(body) {
      const tokens = estimatedTokens(body);
      let startAt: number;
      for (let backoff = 100; ; backoff = Math.min(backoff * 2, MAX_LIMITER_BACKOFF_MS)) {
        try {
          ({ startAt } = await reserveTokens(provider.name, { ...quota, tokens }));
          break;
        } catch (err) {
          const refusal = causeChain(err).find((e) => e instanceof ApplicationFailure && e.nonRetryable);
          if (refusal) return refusal.message;
          // The limiter busy (its updates in flight), continuing as new, or the server away: ask again.
          await sleep(backoff, undefined, { signal });
        }
      }
      reserved = tokens;
      if (startAt > Date.now()) {
        setDetails({ rateLimitedUntil: startAt });
        // A Node timer past MAX_TIMER_MS fires at once: a longer wait takes several.
        while (startAt > Date.now()) await sleep(Math.min(startAt - Date.now(), MAX_TIMER_MS), undefined, { signal });
        setDetails(undefined);
      }
      return undefined;
    },
    async charge(usage) {
      const over = usage ? usage.promptTokens + usage.completionTokens - reserved : 0;
      if (over <= 0 || !chargeTokens) return;
      // Best effort: a lost charge only lets the next calls leave a little early. A call that
      // reports more than the whole bucket (an endpoint's usage can say anything) is charged the
      // bucket: its next calls wait one burst's refill, not days.
      const tokens = Math.min(over, quota.burst);
      await chargeTokens(provider.name, { ...quota, tokens }).catch(() => undefined);
    },
  };
}

/**
 * A request's tokens before it is sent, on the high side as a limiter needs: its messages and tools
 * as JSON at four characters a token, plus the most the answer may take.
 */
function estimatedTokens(body: ChatRequestBody): number {
  const chars = JSON.stringify(body.messages).length + (body.tools ? JSON.stringify(body.tools).length : 0);
  return Math.ceil(chars / 4) + (body.max_tokens ?? DEFAULT_COMPLETION_ALLOWANCE);
}

export type ModelPrice = SubagentModelPrices[string];

/** USD for `usage` at `price` (per million tokens). */
export function costOf(usage: SubagentUsage, price: ModelPrice): number {
  return (
    (usage.promptTokens * price.inputPerMillionTokens + usage.completionTokens * price.outputPerMillionTokens) / 1e6
  );
}

/**
 * The tokens of a call cut off mid-stream, estimated at four characters a token (the endpoint
 * reports usage only at the end), and their cost.
 */
export function estimatedUsage({
  promptChars,
  completionChars,
  price,
}: {
  promptChars: number;
  completionChars: number;
  price?: ModelPrice;
}): SubagentUsage & { costUsd?: number } {
  const usage = { promptTokens: Math.ceil(promptChars / 4), completionTokens: Math.ceil(completionChars / 4) };
  return { ...usage, ...(price ? { costUsd: costOf(usage, price) } : {}) };
}

export function charsOf(conversation: readonly TranscriptEntry[]): number {
  let chars = 0;
  for (const entry of conversation) {
    const blocks = entry.kind === 'tool' ? entry.results.flatMap((result) => result.content) : entry.content;
    for (const block of blocks) chars += block.type === 'text' ? block.text.length : JSON.stringify(block).length;
  }
  return chars;
}
