// One call of a chat-completions endpoint (any OpenAI-compatible one), through the official
// `openai` client: the request built from the conversation and the tools the run may call, the
// answer read (streamed or not) within its bounds, and every way it can fail read as an outcome.
// Calls of `structured_output`, and of tools the run may not call, are answered right here. A
// transient failure rejects for Temporal to retry; a 429 rejects for the activity to wait out.
import { ApplicationFailure } from '@temporalio/common';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { type ContentBlock, textOf } from '../src/seam/content';
import { delegatesPastDepth, offeredTools, requestedModel } from '../src/seam/delegation';
import { systemPromptFor } from './system-prompt';
import type { SubagentAgentProvider } from '../src/seam/provider';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { SubagentStopReason } from '../src/seam/result';
import type { StructuredOutputSchema } from '../src/seam/structured';
import { toolError } from '../src/seam/tool';
import { createStructuredOutputRuntime } from '../src/structured/runtime';
import type { ModelCallResult, ModelToolCall } from './types';

/** What one call of the model came to: the result without its id, its calls listed with their answers. */
export type ModelCallOutcome = Omit<ModelCallResult, 'outputId' | 'toolCalls' | 'answers'> & {
  toolCalls: ModelToolCall[];
};

/** The failure type of an endpoint's rate limit (429): the activity waits it out, retrying nothing. */
export const RATE_LIMITED = 'MODEL_RATE_LIMITED';

/**
 * The tools a run may call: the provider's, narrowed by the request's filter (deny wins), less the
 * delegation tools whose every call its depth cap refuses (the run is at the bottom of the tree).
 */
export function allowedToolNames(
  provider: SubagentAgentProvider,
  request: Pick<ResolvedSubagentRequest, 'toolFilter' | 'depth' | 'maxDepth'>,
): Set<string> {
  const { allow, deny } = request.toolFilter ?? {};
  return new Set(
    provider.tools
      .filter((tool) => !delegatesPastDepth(tool, request.depth, request.maxDepth))
      .map((tool) => tool.name)
      .filter((name) => (!allow || allow.includes(name)) && !deny?.includes(name)),
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
  const definitions = offeredTools(provider.tools, allowed);
  const offered = (structured ? structured.withTool(definitions) : definitions).map(toChatTool);
  const base = systemPromptFor(provider, definitions, request.parent.cwd);
  const system = structured ? structured.systemPrompt(base) : base;

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
      // Content null only beside tool calls: OpenAI refuses (400) an assistant message with
      // neither, which an answer with no text and no calls (or a seed's empty one) would be. Sent
      // as an empty string, it keeps the turn the model took, a user message after it answered.
      const said = textOf(entry.content);
      messages.push(
        calls.length > 0
          ? { role: 'assistant', content: said || null, tool_calls: calls }
          : { role: 'assistant', content: said },
      );
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
