// `subagentModelCall`: one model call of an agent-loop child against any OpenAI-compatible
// chat-completions endpoint, through the official `openai` client. The activity's cancellation
// signal goes into the HTTP request; a rate limit (429) is waited out here, other transient
// endpoint failures are retried by Temporal, others end the turn with `error` and a diagnostic.
// An endpoint with a token quota is asked only once its limiter lets the call go. Structured-output
// calls are validated right here. What the endpoint sends is bounded: an answer past its size or
// its `timeoutMs` is cut off, and one of the wrong shape ends the turn with `error`.
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { type ContentBlock, textOf } from '../src/seam/content';
import { requestedModel } from '../src/seam/delegation';
import { payloadBytes } from '../src/seam/constants';
import { causeChain } from '../src/seam/errors';
import type { SubagentAgentProvider, SubagentModelPrices } from '../src/seam/provider';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { SubagentStopReason, SubagentUsage } from '../src/seam/result';
import type { StructuredOutputSchema } from '../src/seam/structured';
import { type SubagentTool, type SubagentToolContext, type ToolCallOutcome, toolError } from '../src/seam/tool';
import { createStructuredOutputRuntime } from '../src/structured/runtime';
import { type ActivityHost, newEntryId, runOf } from './host';
import { errorText, runToolCall } from './tool-call';
import type { ModelCallInput, ModelCallResult, ModelToolCall, ToolActivityResult } from './types';

/** What one call of the model came to: the result without its id, its calls listed with their answers. */
export type ModelCallOutcome = Omit<ModelCallResult, 'outputId' | 'toolCalls' | 'answers'> & {
  toolCalls: ModelToolCall[];
};

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
function tokenAdmission(
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
        await sleep(startAt - Date.now(), undefined, { signal });
        setDetails(undefined);
      }
      return undefined;
    },
    async charge(usage) {
      const over = usage ? usage.promptTokens + usage.completionTokens - reserved : 0;
      if (over <= 0 || !chargeTokens) return;
      // Best effort: a lost charge only lets the next calls leave a little early.
      await chargeTokens(provider.name, { ...quota, tokens: over }).catch(() => undefined);
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

type ModelPrice = SubagentModelPrices[string];

/** USD for `usage` at `price` (per million tokens). */
function costOf(usage: SubagentUsage, price: ModelPrice): number {
  return (
    (usage.promptTokens * price.inputPerMillionTokens + usage.completionTokens * price.outputPerMillionTokens) / 1e6
  );
}

/**
 * The tokens of a call cut off mid-stream, estimated at four characters a token (the endpoint
 * reports usage only at the end), and their cost.
 */
function estimatedUsage({
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

function charsOf(conversation: readonly TranscriptEntry[]): number {
  let chars = 0;
  for (const entry of conversation) {
    const blocks = entry.kind === 'tool' ? entry.results.flatMap((result) => result.content) : entry.content;
    for (const block of blocks) chars += block.type === 'text' ? block.text.length : JSON.stringify(block).length;
  }
  return chars;
}

/**
 * The most answer one call reads, whatever the payload limit (256 MiB with a payload store): far
 * past what a model writes in one answer, and what the worker's memory can hold of several calls.
 */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

const RATE_LIMITED = 'MODEL_RATE_LIMITED';
/** The shortest wait after a 429, whatever its Retry-After says (as when it sends none). */
const MIN_RATE_LIMIT_WAIT_MS = 1000;
/** The longest a Node timer waits: a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

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

/** The tools a run may call: the provider's, narrowed by the request's filter (deny wins). */
export function allowedToolNames(provider: SubagentAgentProvider, request: ResolvedSubagentRequest): Set<string> {
  const { allow, deny } = request.toolFilter ?? {};
  return new Set(
    provider.tools.map((tool) => tool.name).filter((name) => (!allow || allow.includes(name)) && !deny?.includes(name)),
  );
}

/** The chat-completions request one call sends. */
export interface ChatRequestBody {
  model: string;
  messages: ChatCompletionMessageParam[];
  tools?: ChatCompletionTool[];
  max_tokens?: number;
}

export interface ModelCallHooks {
  /** Streams the call (server-sent events), handing each piece of text to it as it comes. */
  onText?(delta: string): void;
  /** With `onText`: each piece of the model's reasoning, as an endpoint that sends it streams it. */
  onReasoning?(delta: string): void;
  /** Waits until the request may be sent; resolves with why it never may (the call ends `error`). */
  admit?(body: ChatRequestBody): Promise<string | undefined>;
  /** Called as the request leaves, once `admit` let it. */
  onSend?(): void;
  /**
   * The most answer a call takes, in bytes: a body (or one server-sent event line) of twice this,
   * or streamed text, reasoning and tool calls past it, end the call with `error`. Default: none.
   */
  maxAnswerBytes?: number;
  /** The longest wait before a retry an endpoint's Retry-After may ask for (the retry policy's). */
  maxRetryDelayMs?: number;
}

/**
 * Calls the model once with the whole conversation. Resolves with the assistant message, its
 * stop reason and tool calls (answered here when they are `structured_output`, denied or
 * unknown); rejects with a retryable `ApplicationFailure` for a transient endpoint failure, and
 * with the abort error when `signal` aborts.
 */
export async function callModel(
  client: OpenAI,
  provider: SubagentAgentProvider,
  request: ResolvedSubagentRequest,
  conversation: readonly TranscriptEntry[],
  signal: AbortSignal,
  { onText, onReasoning, admit, onSend, maxAnswerBytes, maxRetryDelayMs }: ModelCallHooks = {},
): Promise<ModelCallOutcome> {
  const model = requestedModel(request) ?? provider.endpoint.model;
  if (!model) {
    return failed(`no model is configured for provider "${provider.name}": set SUBAGENT_MODEL or agentOptions.model`);
  }
  const allowed = allowedToolNames(provider, request);
  const schema = request.outputSchema as StructuredOutputSchema | undefined;
  const structured = schema ? createStructuredOutputRuntime(schema) : undefined;
  const definitions = provider.tools.filter((tool) => allowed.has(tool.name));
  const offered = (structured ? structured.withTool(definitions) : definitions).map(toChatTool);
  const system = structured ? structured.systemPrompt(provider.systemPrompt) : provider.systemPrompt;

  let completion: OpenAI.Chat.Completions.ChatCompletion;
  const body: ChatRequestBody = {
    model,
    messages: toChatMessages(system, withinContext(conversation, provider.endpoint.maxContextChars)),
    ...(offered.length > 0 ? { tools: offered } : {}),
    ...(provider.endpoint.maxTokens ? { max_tokens: provider.endpoint.maxTokens } : {}),
  };
  const refusal = await admit?.(body);
  if (refusal) return failed(refusal);
  onSend?.();
  // The call has its own signal: the activity's cancellation aborts it, and so do its timeout
  // (the whole answer, not only its headers, within `timeoutMs`) and an answer past its bound.
  const call = new AbortController();
  let cutOff: { message: string; transient: boolean } | undefined;
  const cut = (message: string, transient: boolean) => {
    cutOff ??= { message, transient };
    call.abort();
  };
  const follow = () => call.abort(signal.reason);
  if (signal.aborted) follow();
  else signal.addEventListener('abort', follow, { once: true });
  const { timeoutMs } = provider.endpoint;
  const timer = timeoutMs
    ? setTimeout(
        () => cut(`the model endpoint did not finish its answer within ${timeoutMs} ms (timeoutMs)`, true),
        timeoutMs,
      )
    : undefined;
  const overLimit = (what: string) =>
    cut(`the model endpoint's answer passed ${what}, more than a run can hold: cut off`, false);
  const bounded =
    maxAnswerBytes === undefined
      ? client
      : client.withOptions({ fetch: boundedFetch(2 * maxAnswerBytes + 64 * 1024, Boolean(onText), overLimit) });
  const options = {
    signal: call.signal,
    maxRetries: 0,
    ...(timeoutMs ? { timeout: timeoutMs } : {}),
  };
  // Reasoning comes in a field OpenAI's API lacks; the client's stream keeps only its last piece.
  let reasoning = '';
  try {
    if (onText) {
      const stream = bounded.chat.completions.stream({ ...body, stream_options: { include_usage: true } }, options);
      let answered = 0;
      stream.on('content.delta', ({ delta }) => onText(delta));
      stream.on('chunk', (chunk) => {
        answered += answerBytesOf(chunk);
        if (maxAnswerBytes !== undefined && answered > maxAnswerBytes) overLimit(`${maxAnswerBytes} bytes`);
        const delta = reasoningOf(chunk.choices[0]?.delta);
        if (!delta) return;
        reasoning += delta;
        onReasoning?.(delta);
      });
      completion = await stream.finalChatCompletion();
    } else {
      completion = await bounded.chat.completions.create(body, options);
      reasoning = reasoningOf(completion.choices?.[0]?.message);
    }
  } catch (err) {
    if (signal.aborted) throw err;
    if (cutOff) return cutOffFailure(cutOff);
    return endpointFailure(err, maxRetryDelayMs);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', follow);
  }
  if (cutOff) return cutOffFailure(cutOff);

  const choice = completion.choices?.[0];
  if (!choice) return failed('the model endpoint returned no choices');
  const malformed = malformedChoice(choice);
  if (malformed) return failed(`the model endpoint's answer is not a chat completion: ${malformed}`);
  const { message } = choice;
  const calls = message.tool_calls?.length ?? 0;
  if (calls > MAX_TOOL_CALLS_PER_ANSWER) {
    return failed(
      `the model asked for ${calls} tool calls in one answer, more than the ${MAX_TOOL_CALLS_PER_ANSWER} one answer may make`,
    );
  }
  const content: ContentBlock[] = [];
  if (reasoning) content.push({ type: 'reasoning', text: reasoning });
  if (message.content) content.push({ type: 'text', text: message.content });
  if (message.refusal) content.push({ type: 'text', text: message.refusal });
  const toolCalls: ModelToolCall[] = [];
  for (const call of message.tool_calls ?? []) {
    if (call.type !== 'function') continue;
    const { name, arguments: args } = call.function;
    content.push({ type: 'tool-call', id: call.id, name, arguments: args });
    toolCalls.push({ id: call.id, name, arguments: args, ...answerHere(name, args) });
  }
  const usage = completion.usage
    ? {
        promptTokens: tokenCount(completion.usage.prompt_tokens, JSON.stringify(body.messages)),
        completionTokens: tokenCount(completion.usage.completion_tokens, JSON.stringify(content)),
      }
    : undefined;
  const stop = stopReasonOf(choice.finish_reason, Boolean(message.refusal));
  return {
    content,
    stopReason: stop.stopReason,
    ...(stop.diagnostic ? { diagnostic: stop.diagnostic } : {}),
    toolCalls,
    ...(structured?.captured ? { structured: structured.captured.value } : {}),
    ...(usage ? { usage } : {}),
  };

  /** Calls in one response run in order: after a capture every later call is denied. */
  function answerHere(name: string, args: string): Pick<ModelToolCall, 'answer'> {
    if (structured?.captured) return { answer: structured.deny(name) };
    if (structured && name === structured.tool.name) return { answer: structured.call(args) };
    if (!allowed.has(name)) {
      const available = [...allowed].join(', ') || 'none';
      return { answer: toolError(`tool "${brief(name)}" is not available to this subagent (available: ${available})`) };
    }
    return {};
  }
}

/**
 * The reasoning in a message or a stream's delta: `reasoning_content` (DeepSeek, vLLM, SGLang) or
 * `reasoning` (OpenRouter, Ollama); '' when there is none. It is never sent back to the model.
 */
function reasoningOf(part: object | undefined): string {
  const { reasoning_content: content, reasoning } = (part ?? {}) as {
    reasoning_content?: unknown;
    reasoning?: unknown;
  };
  if (typeof content === 'string') return content;
  return typeof reasoning === 'string' ? reasoning : '';
}

/**
 * The conversation a call sends under a budget of `maxChars`: walking back from the newest entry,
 * every tool output past the budget is replaced by a note (user and assistant messages always go
 * whole). Measured in characters of text, which costs nothing per call however long the turn.
 */
export function withinContext(entries: readonly TranscriptEntry[], maxChars: number | undefined): TranscriptEntry[] {
  if (maxChars === undefined) return [...entries];
  const chars = (content: readonly ContentBlock[]) =>
    content.reduce((sum, block) => sum + (block.type === 'text' ? block.text.length : 0), 0);
  let used = 0;
  const fitted = [...entries];
  for (let index = fitted.length - 1; index >= 0; index--) {
    const entry = fitted[index]!;
    if (entry.kind !== 'tool') {
      used += chars(entry.content);
      continue;
    }
    fitted[index] = {
      kind: 'tool',
      results: entry.results.map((result) => {
        const size = chars(result.content);
        if (used + size <= maxChars) {
          used += size;
          return result;
        }
        const note = `[output left out: ${size} characters, over the conversation's budget of ${maxChars}]`;
        return { ...result, content: [{ type: 'text', text: note }] };
      }),
    };
  }
  return fitted;
}

/** The conversation in chat-completions form: system, then user, assistant and tool messages. */
export function toChatMessages(system: string, entries: readonly TranscriptEntry[]): ChatCompletionMessageParam[] {
  const messages: ChatCompletionMessageParam[] = system ? [{ role: 'system', content: system }] : [];
  for (const entry of entries) {
    if (entry.kind === 'user') {
      messages.push({ role: 'user', content: textOf(entry.content) });
    } else if (entry.kind === 'assistant') {
      const calls = entry.content.flatMap((block) =>
        block.type === 'tool-call'
          ? [{ id: block.id, type: 'function' as const, function: { name: block.name, arguments: block.arguments } }]
          : [],
      );
      messages.push({
        role: 'assistant',
        content: textOf(entry.content) || null,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
    } else {
      for (const result of entry.results) {
        messages.push({ role: 'tool', tool_call_id: result.toolCallId, content: textOf(result.content) });
      }
    }
  }
  return messages;
}

function toChatTool(tool: { name: string; description: string; parameters: object }): ChatCompletionTool {
  return {
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters as Record<string, unknown>,
    },
  };
}

function stopReasonOf(
  finishReason: string | null,
  refused: boolean,
): { stopReason: SubagentStopReason; diagnostic?: string } {
  if (refused || finishReason === 'content_filter') return { stopReason: 'refusal' };
  if (finishReason === 'length') return { stopReason: 'max-tokens' };
  if (finishReason === 'stop' || finishReason === 'tool_calls' || finishReason === 'function_call') {
    return { stopReason: 'completed' };
  }
  return {
    stopReason: 'error',
    diagnostic: `the model endpoint gave an unknown finish_reason: ${brief(String(finishReason))}`,
  };
}

/**
 * A failed call: 429, 408, 409, 5xx and connection failures are retried by Temporal after the
 * endpoint's Retry-After (if it sent one; at most `maxRetryDelayMs`, except a 429's, which is
 * waited out within the attempt); any other HTTP error ends the turn with `error`.
 */
function endpointFailure(err: unknown, maxRetryDelayMs: number | undefined): ModelCallOutcome {
  if (err instanceof OpenAI.APIConnectionError) {
    throw ApplicationFailure.create({
      message: `model endpoint unreachable: ${brief(err.message)}`,
      type: 'MODEL_UNAVAILABLE',
    });
  }
  if (err instanceof OpenAI.APIError && err.status !== undefined) {
    const transient = err.status === 429 || err.status === 408 || err.status === 409 || err.status >= 500;
    if (transient) {
      // A rate limit is waited out within the attempt (`subagentModelCall`), as long as it asks.
      // Another failure's retry waits what the endpoint asks, up to the retry policy's longest
      // interval (a Retry-After of a year would park the run for a year); "now" leaves the policy's.
      const rateLimited = err.status === 429;
      const asked = retryAfterMs(err.headers);
      const delay =
        rateLimited || asked === undefined ? asked : asked > 0 ? Math.min(asked, maxRetryDelayMs ?? asked) : undefined;
      throw ApplicationFailure.create({
        message: `model endpoint answered ${err.status}: ${brief(err.message)}`,
        type: rateLimited ? RATE_LIMITED : 'MODEL_TRANSIENT',
        ...(delay === undefined ? {} : { nextRetryDelay: delay }),
      });
    }
    return failed(`model endpoint answered ${err.status}: ${brief(err.message)}`);
  }
  throw err;
}

function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * The most tool calls one answer may make. Each call that is not inline is an activity of the
 * run, all scheduled at once, and the server fails every workflow task that would take a run past
 * its pending activities (2,000 by default): the run would retry that task for ever.
 */
const MAX_TOOL_CALLS_PER_ANSWER = 128;

/** What makes a choice something other than a chat completion's, or undefined if nothing does. */
function malformedChoice(choice: unknown): string | undefined {
  const { message } = (choice ?? {}) as { message?: unknown };
  if (typeof message !== 'object' || message === null) return 'its choice has no message';
  const { content, refusal, tool_calls: calls } = message as Record<string, unknown>;
  if (content !== undefined && content !== null && typeof content !== 'string') return 'content is not a string';
  if (refusal !== undefined && refusal !== null && typeof refusal !== 'string') return 'refusal is not a string';
  if (calls === undefined || calls === null) return undefined;
  if (!Array.isArray(calls)) return 'tool_calls is not a list';
  for (const [index, call] of calls.entries()) {
    const { id, type, function: fn } = (call ?? {}) as { id?: unknown; type?: unknown; function?: unknown };
    if (type !== 'function') continue;
    const { name, arguments: args } = (fn ?? {}) as { name?: unknown; arguments?: unknown };
    if (typeof id !== 'string' || typeof name !== 'string' || typeof args !== 'string') {
      return `tool call ${index} lacks a string id, function name or arguments`;
    }
  }
  return undefined;
}

/**
 * The tokens the endpoint reported, if they are a count (a whole number, not negative); else
 * `text`'s estimate at four characters a token. The run adds them up into its budget and into a
 * search attribute of integer type, which the server refuses (and with it every workflow task
 * that sets it) for a fraction or a string.
 */
function tokenCount(reported: unknown, text: string): number {
  return Number.isSafeInteger(reported) && (reported as number) >= 0
    ? (reported as number)
    : Math.ceil(text.length / 4);
}

/** A call this side cut off: a timeout is retried as an unreachable endpoint; an answer too large ends `error`. */
function cutOffFailure({ message, transient }: { message: string; transient: boolean }): ModelCallOutcome {
  if (transient) throw ApplicationFailure.create({ message, type: 'MODEL_UNAVAILABLE' });
  return failed(message);
}

/**
 * The bytes of answer one streamed chunk adds to what the client accumulates: text, refusals,
 * reasoning, tool calls and log probabilities, of every choice.
 */
function answerBytesOf(chunk: OpenAI.Chat.Completions.ChatCompletionChunk): number {
  let bytes = 0;
  const choices: unknown = chunk.choices;
  if (!Array.isArray(choices)) return 0;
  for (const choice of choices as { delta?: Record<string, unknown> | null; logprobs?: unknown }[]) {
    const { delta, logprobs } = choice ?? {};
    for (const [key, value] of Object.entries(delta ?? {})) {
      if (key === 'tool_calls' && Array.isArray(value)) {
        // Each piece of a call's arguments comes wrapped in its index: count what accumulates.
        for (const call of value as { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]) {
          for (const part of [call?.id, call?.function?.name, call?.function?.arguments]) {
            if (typeof part === 'string') bytes += Buffer.byteLength(part);
          }
        }
      } else if (typeof value === 'string') bytes += Buffer.byteLength(value);
      else if (value !== null && value !== undefined) bytes += JSON.stringify(value).length;
    }
    if (logprobs) bytes += JSON.stringify(logprobs).length;
  }
  return bytes;
}

/**
 * `fetch` whose response body fails, and calls `over`, once it passes `maxBytes` (a server-sent
 * event stream: once one line does, as the client buffers a line until its end). Bounds what a
 * call reads into memory whatever the endpoint sends.
 */
function boundedFetch(maxBytes: number, streamed: boolean, over: (what: string) => void): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    let bytes = 0;
    const counted = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const first = streamed ? chunk.indexOf(10) : -1;
        const longest = first === -1 ? bytes + chunk.length : Math.max(bytes + first, chunk.length - first - 1);
        bytes = first === -1 ? bytes + chunk.length : chunk.length - chunk.lastIndexOf(10) - 1;
        if (longest > maxBytes) {
          const what = streamed ? `${maxBytes} bytes in one line` : `${maxBytes} bytes`;
          over(what);
          controller.error(new Error(`the model endpoint's answer passed ${what}`));
          return;
        }
        controller.enqueue(chunk);
      },
    });
    const { status, statusText, headers } = response;
    return new Response(response.body.pipeThrough(counted), { status, statusText, headers });
  };
}

/** The most of an endpoint's own words a diagnostic quotes. */
const MAX_QUOTED_CHARS = 2000;

/**
 * `text` as a diagnostic quotes it: its start, and how much was left out. What the endpoint says
 * lands in the run's result, its history and its audit.
 */
function brief(text: string): string {
  if (text.length <= MAX_QUOTED_CHARS) return text;
  return `${text.slice(0, MAX_QUOTED_CHARS)}… (${text.length - MAX_QUOTED_CHARS} more characters)`;
}

function failed(diagnostic: string): ModelCallOutcome {
  return { content: [], stopReason: 'error', diagnostic, toolCalls: [] };
}
