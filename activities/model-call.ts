// `subagentModelCall`: one model call of an agent-loop child, as an activity. It rebuilds the
// run's conversation (from the worker's cache, or the workflow), waits until the endpoint's token
// quota lets the call go (model-spend.ts), asks the endpoint (chat-endpoint.ts) with the
// activity's cancellation signal in the request, and waits out a rate limit (429) without
// spending an attempt; other transient failures are retried by Temporal. Then it holds the calls
// a tool's `needsApproval` asks about and runs the answer's inline tools.
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import OpenAI from 'openai';
import { requestedModel } from '../src/seam/delegation';
import { MAX_TIMER_MS, payloadBytes } from '../src/seam/constants';
import type { SubagentAgentProvider } from '../src/seam/provider';
import { type SubagentTool, type SubagentToolContext, type ToolCallOutcome, toolError } from '../src/seam/tool';
import { type ActivityHost, newEntryId, runOf } from './host';
import { errorText, runToolCall } from './tool-call';
import type { ModelCallInput, ModelCallResult, ModelToolCall, ToolActivityResult } from './types';
import { type ModelCallOutcome, RATE_LIMITED, callModel } from './chat-endpoint';
import { type ModelPrice, charsOf, costOf, estimatedUsage, tokenAdmission } from './model-spend';

/**
 * One model call with the run's whole conversation, rebuilt from the worker's cache (or the
 * workflow) plus the input's delta. See `callModel` for its outcomes.
 */
export function modelCallActivity(host: ActivityHost): (input: ModelCallInput) => Promise<ModelCallResult> {
  const clients = new Map<string, OpenAI>();
  const clientFor = (provider: SubagentAgentProvider): OpenAI => {
    let client = clients.get(provider.name);
    if (!client) {
      const { baseURL, apiKey } = provider.endpoint;
      // Local endpoints (Ollama, vLLM) take any key; the client insists on one.
      client = new OpenAI({ baseURL, apiKey: apiKey || 'unused', maxRetries: 0 });
      clients.set(provider.name, client);
    }
    return client;
  };
  return async function subagentModelCall(input) {
    const provider = host.hosted(input.provider, 'agent-loop');
    const runId = runOf(input);
    // What a call cancelled mid-stream had used: the conversation sent, the text received so far.
    let partial: { promptChars: number; completionChars: number; price?: ModelPrice } | undefined;
    const cancelDetails = () => partial && { partialUsage: estimatedUsage(partial) };
    return host.heartbeating(
      async (setDetails) => {
        const context = await host.conversation(runId, input.transcript, input.request, {
          ...(input.delta ? { entries: input.delta } : { length: input.deltaLength ?? 0 }),
          ...(input.toolResultIds ? { toolResultIds: input.toolResultIds } : {}),
        });
        const conversation = [...context.entries, ...context.tail];
        const signal = Context.current().cancellationSignal;
        const model = requestedModel(context.request) ?? provider.endpoint.model;
        const price = model === undefined ? undefined : host.deps.modelPrices?.[model];
        // Charged only while a request is out: not while it waits for a quota, nor after a 429.
        const counted = { promptChars: charsOf(conversation), completionChars: 0, ...(price ? { price } : {}) };
        const onSend = () => {
          counted.completionChars = 0;
          partial = counted;
        };
        const publisher = provider.endpoint.stream === false ? undefined : host.textPublisher(runId, input.turn);
        const onText = (delta: string) => {
          counted.completionChars += delta.length;
          publisher?.add(delta);
        };
        const onReasoning = (delta: string) => {
          counted.completionChars += delta.length;
          publisher?.addReasoning(delta);
        };
        let outcome: ModelCallOutcome;
        try {
          // An endpoint at its rate limit is waited for here, as long as it asks, without spending
          // one of the call's attempts; the wait is in the heartbeat, where `subagents show` reads it.
          const tokens = tokenAdmission(host, provider, setDetails, signal);
          for (;;) {
            try {
              outcome = await callModel(clientFor(provider), provider, context.request, conversation, signal, {
                // An endpoint that cannot stream is asked without (`endpoint.stream: false`).
                ...(provider.endpoint.stream === false ? {} : { onText, onReasoning }),
                onSend,
                ...(tokens ? { admit: tokens.admit } : {}),
                maxAnswerBytes: Math.min(host.deps.maxPayloadBytes, MAX_ANSWER_BYTES),
                maxRetryDelayMs: maxRetryInterval(),
              });
              await tokens?.charge(outcome.usage);
              break;
            } catch (err) {
              const asked = rateLimitWait(err);
              if (asked === undefined) throw err;
              // "Retry now" (0, a negative wait, a date past) asked again and again would be a loop
              // of requests; a wait past what a timer holds would fire at once.
              const waitMs = Math.min(Math.max(asked, MIN_RATE_LIMIT_WAIT_MS), MAX_TIMER_MS);
              partial = undefined;
              setDetails({ rateLimitedUntil: Date.now() + waitMs });
              await sleep(waitMs, undefined, { signal });
              setDetails(undefined);
            }
          }
        } finally {
          await publisher?.close();
        }
        partial = undefined;
        host.assertWithinLimit(outcome, 'the model response');
        const outputId = newEntryId();
        host.cache.put(runId, {
          request: context.request,
          entries: [
            ...conversation,
            { kind: 'assistant', id: outputId, content: outcome.content, stopReason: outcome.stopReason },
          ],
        });
        host.cache.dropToolResults(runId, input.toolResultIds ?? []);
        const held = await heldForApproval(provider, outcome.toolCalls, input.asksApproval === true);
        await runInlineTools(host, provider, outcome, held, {
          cwd: context.request.parent.cwd,
          signal,
          runId,
          callKeyPrefix: `${Context.current().info.workflowExecution?.runId ?? runId}/${outputId}`,
        });
        // The answers given here enter the next call's tool entry, and are kept as the tools' results are.
        const { toolCalls, ...result } = outcome;
        // Keyed by the model's call ids, which the workflow looks up as plain properties: an id that
        // names one every object has ("constructor", "__proto__") is set as an own key, null when
        // the call is not answered here. Otherwise "__proto__" dropped its answer (a refused call
        // ran after all) and "constructor" found one (Object, a call taken as answered).
        const answers: Record<string, ToolActivityResult | null> = Object.create(null);
        const calls = toolCalls.map((call) => {
          if (!call.answer) {
            if (call.id in Object.prototype && !(call.id in answers)) answers[call.id] = null;
            return call;
          }
          const resultId = `${outputId}/${call.id}`;
          const { content, isError } = call.answer;
          host.cache.putToolResult(runId, resultId, { type: 'tool-result', toolCallId: call.id, content, isError });
          const answer = { ...call.answer, resultId };
          answers[call.id] = answer;
          return { ...call, answer };
        });
        // A workflow that reads the calls from `content` gets them only there (workflow code from
        // before that reads `toolCalls`).
        const costUsd = price && result.usage ? costOf(result.usage, price) : undefined;
        if (!input.callsInContent) return { ...result, toolCalls: calls, outputId };
        return {
          ...result,
          ...(costUsd === undefined ? {} : { costUsd }),
          ...(Object.values(answers).some(Boolean) ? { answers: answers as Record<string, ToolActivityResult> } : {}),
          ...(held.length > 0 ? { approvals: held } : {}),
          outputId,
        };
      },
      { cancelDetails },
    );
  };
}

/**
 * Answers the calls of `outcome` that an inline tool takes (not answered already, not held for
 * approval), running them concurrently. A tool that rejects answers with an error result, unless
 * the run was cancelled. Answers that would take the result past the payload limit are left out,
 * largest first: their calls run as activities.
 */
async function runInlineTools(
  host: ActivityHost,
  provider: SubagentAgentProvider,
  outcome: ModelCallOutcome,
  held: readonly string[],
  { callKeyPrefix, ...context }: Omit<SubagentToolContext, 'callId' | 'callKey'> & { callKeyPrefix: string },
): Promise<void> {
  const inline = outcome.toolCalls.flatMap((call) => {
    const tool = call.answer || held.includes(call.id) ? undefined : provider.tools.find((t) => t.name === call.name);
    return tool?.inline ? [{ call, tool }] : [];
  });
  if (inline.length === 0) return;
  await Promise.all(
    inline.map(async ({ call, tool }) => {
      let answer: ToolCallOutcome;
      try {
        answer = await runToolCall(host, tool, call.arguments, {
          ...context,
          callId: call.id,
          callKey: `${callKeyPrefix}/${call.id}`,
        });
      } catch (err) {
        if (context.signal.aborted) throw err;
        answer = toolError(`tool ${call.name} failed: ${errorText(err)}`);
      }
      call.answer = { ...answer, ranInline: true };
    }),
  );
  const ran = inline.map(({ call }) => call).sort((a, b) => payloadBytes(b.answer) - payloadBytes(a.answer));
  for (const call of ran) {
    if (payloadBytes(outcome) <= host.deps.maxPayloadBytes) break;
    delete call.answer;
  }
}

/**
 * The most answer one call reads, whatever the payload limit (256 MiB with a payload store): far
 * past what a model writes in one answer, and what the worker's memory can hold of several calls.
 */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** The shortest wait after a 429, whatever its Retry-After says (as when it sends none). */
const MIN_RATE_LIMIT_WAIT_MS = 1000;

/** The longest interval of the current attempt's retry policy, if the server sent one. */
function maxRetryInterval(): number | undefined {
  const interval = Context.current().info.retryPolicy?.maximumInterval;
  return interval === undefined ? undefined : msToNumber(interval);
}

/** How long to wait when `err` is the endpoint's rate limit (429), else undefined. */
function rateLimitWait(err: unknown): number | undefined {
  if (!(err instanceof ApplicationFailure) || err.type !== RATE_LIMITED) return undefined;
  return err.nextRetryDelay === undefined || err.nextRetryDelay === null ? 1000 : msToNumber(err.nextRetryDelay);
}

/**
 * The ids of the calls the tools' `needsApproval` holds, for a workflow that parks them
 * (`canAsk`). Where the workflow cannot ask (code from before approvals), such a call is answered
 * here with a denial instead: an unapproved call never runs. A policy that throws, or that has not
 * decided within `POLICY_TIMEOUT_MS`, holds the call.
 */
async function heldForApproval(
  provider: SubagentAgentProvider,
  calls: ModelToolCall[],
  canAsk: boolean,
): Promise<string[]> {
  // Decided at once: one answer's calls (up to 128) each waiting out a slow policy in turn held
  // the model call for as long as all of them.
  const decided = await Promise.all(
    calls.map((call) => {
      const policy = call.answer ? undefined : provider.tools.find((tool) => tool.name === call.name)?.needsApproval;
      return policy ? needsApproval(policy, call.arguments) : false;
    }),
  );
  const held: string[] = [];
  calls.forEach((call, index) => {
    if (!decided[index]) return;
    if (canAsk) held.push(call.id);
    else call.answer = toolError(`${call.name} needs approval, and this run cannot ask for it`);
  });
  return held;
}

async function needsApproval(policy: NonNullable<SubagentTool['needsApproval']>, args: string): Promise<boolean> {
  if (typeof policy === 'boolean') return policy;
  // A policy that never settles held the model call until its timeout (30 minutes by default),
  // then its every retry, asking the model again each time: past its time it holds the call.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<true>((resolve) => (timer = setTimeout(() => resolve(true), POLICY_TIMEOUT_MS)));
  try {
    return await Promise.race([Promise.resolve(policy(args.trim() === '' ? {} : JSON.parse(args))), late]);
  } catch {
    return true;
  } finally {
    clearTimeout(timer);
  }
}

/** How long a tool's `needsApproval` function may take to decide a call; past it, the call is held. */
const POLICY_TIMEOUT_MS = 10_000;
