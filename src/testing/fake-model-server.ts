// Test double for an OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek, vLLM, Ollama): a real HTTP
// server on loopback that answers POST /v1/chat/completions from a per-request script and records every request,
// so tests can drive the official `openai` client without a network or an API key. A request OpenAI refuses for
// its messages' shape (an assistant message with neither content nor tool calls) is refused with its 400. A request with
// `stream: true` is answered with the same completion as server-sent events, a chunk per word.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface FakeChatRequest {
  index: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  /** true once the client closed the connection before the response was complete (e.g. an aborted request). */
  aborted: boolean;
  /** settles when the request is finished: 'answered' | 'aborted'. */
  done: Promise<'answered' | 'aborted'>;
}

export type FakeReply =
  | {
      kind: 'json';
      status?: number;
      headers?: Record<string, string>;
      body: unknown;
      delayMs?: number;
      /** Streamed (`stream: true`): the wait before each word of the content. */
      tokenDelayMs?: number;
      /** Streamed: after `afterWords` words of the content, the rest waits until `until` settles. */
      hold?: StreamHold;
    }
  | { kind: 'hang' };

/** A streamed answer held part way, so a test sees what came before it while the rest cannot come yet. */
export interface StreamHold {
  afterWords: number;
  until: PromiseLike<unknown>;
}

export type FakeHandler = (request: FakeChatRequest) => FakeReply | Promise<FakeReply>;

export interface FakeOpenAI {
  readonly baseURL: string;
  readonly requests: FakeChatRequest[];
  /**
   * With a `quota`: requests served and refused (429, `refusedForTokens` of them for the token
   * quota), the most served in one window, and the tokens charged.
   */
  readonly quota: { served: number; refused: number; refusedForTokens: number; maxInWindow: number; tokens: number };
  /**
   * Queue replies for the next requests, in order (FIFO). A promise is a reply the test decides
   * on later: its request waits, in flight, until it settles.
   */
  enqueue(...replies: (FakeReply | Promise<FakeReply>)[]): void;
  /**
   * Drops the queued replies no request has taken yet, and says how many there were: a failed
   * test's leftovers would otherwise answer the next test's requests.
   */
  discardQueued(): number;
  /** Fallback when the queue is empty (default: a 500 JSON error saying the script is exhausted). */
  setHandler(handler: FakeHandler): void;
  /** Resolves once `count` requests have arrived (in total); rejects after `timeoutMs` (default 10 s) or on close(). */
  waitForRequests(count: number, timeoutMs?: number): Promise<FakeChatRequest[]>;
  /** Closes the server and destroys open connections, hanging ones included. */
  close(): Promise<void>;
}

const CHAT_PATH = '/v1/chat/completions';
const CREATED = 1_700_000_000;
const DEFAULT_MODEL = 'fake-model';
const DEFAULT_WAIT_MS = 10_000;

interface RenderContext {
  model: string;
  completionId: string;
  nextCallId(): string;
}

/**
 * Builders attach a renderer under this key; the server re-renders the body when it sends it, so completion ids
 * and default tool-call ids are unique per server and `model` echoes the request. The plain `body` is a preview.
 * The key is an enumerable own property, so `{ ...textReply('x'), status: 201 }` keeps it.
 */
const RENDER = Symbol('fake-openai.render');
type Renderable = { [RENDER]?: (ctx: RenderContext) => unknown };

type Usage = { prompt: number; completion: number };
type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls';

interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  refusal: string | null;
  /** The model's reasoning before its answer, as DeepSeek and vLLM send it (not in OpenAI's own API). */
  reasoning_content?: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
}

function chatCompletion(ctx: RenderContext, message: AssistantMessage, finishReason: FinishReason, usage?: Usage) {
  const prompt = usage?.prompt ?? 10;
  const completion = usage?.completion ?? 5;
  return {
    id: ctx.completionId,
    object: 'chat.completion',
    created: CREATED,
    model: ctx.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

function previewContext(model: string | undefined): RenderContext {
  let calls = 0;
  return { model: model ?? DEFAULT_MODEL, completionId: 'chatcmpl-fake-0', nextCallId: () => `call_${++calls}` };
}

function completionReply(
  render: (ctx: RenderContext) => unknown,
  delayMs: number | undefined,
  model?: string,
): FakeReply {
  const reply: FakeReply & Renderable = { kind: 'json', body: render(previewContext(model)) };
  if (delayMs !== undefined) reply.delayMs = delayMs;
  reply[RENDER] = (ctx) => render(model === undefined ? ctx : { ...ctx, model });
  return reply;
}

export function textReply(
  text: string,
  options: {
    finishReason?: 'stop' | 'length' | 'content_filter';
    usage?: Usage;
    delayMs?: number;
    tokenDelayMs?: number;
    /** Streamed: the rest of the words after `afterWords` wait until `until` settles. */
    hold?: StreamHold;
    model?: string;
    /** Reasoning sent before the text (`reasoning_content`), streamed a word at a time like it. */
    reasoning?: string;
  } = {},
): FakeReply {
  return withStreaming(
    options,
    completionReply(
      (ctx) =>
        chatCompletion(
          ctx,
          {
            role: 'assistant',
            content: text,
            refusal: null,
            ...(options.reasoning === undefined ? {} : { reasoning_content: options.reasoning }),
          },
          options.finishReason ?? 'stop',
          options.usage,
        ),
      options.delayMs,
      options.model,
    ),
  );
}

function withStreaming(
  { tokenDelayMs, hold }: { tokenDelayMs?: number; hold?: StreamHold },
  reply: FakeReply,
): FakeReply {
  if (reply.kind !== 'json') return reply;
  if (tokenDelayMs !== undefined) reply.tokenDelayMs = tokenDelayMs;
  if (hold) reply.hold = hold;
  return reply;
}

/** `arguments`: a string is sent as is, anything else is JSON-encoded (undefined becomes '{}'). */
export function toolCallReply(
  calls: { id?: string; name: string; arguments: unknown }[],
  options: { text?: string; usage?: Usage; delayMs?: number; reasoning?: string } = {},
): FakeReply {
  return completionReply(
    (ctx) =>
      chatCompletion(
        ctx,
        {
          role: 'assistant',
          content: options.text ?? null,
          refusal: null,
          ...(options.reasoning === undefined ? {} : { reasoning_content: options.reasoning }),
          tool_calls: calls.map((call) => ({
            id: call.id ?? ctx.nextCallId(),
            type: 'function' as const,
            function: {
              name: call.name,
              arguments:
                typeof call.arguments === 'string'
                  ? call.arguments
                  : call.arguments === undefined
                    ? '{}'
                    : JSON.stringify(call.arguments),
            },
          })),
        },
        'tool_calls',
        options.usage,
      ),
    options.delayMs,
  );
}

export function refusalReply(refusal: string): FakeReply {
  return completionReply(
    (ctx) => chatCompletion(ctx, { role: 'assistant', content: null, refusal }, 'stop'),
    undefined,
  );
}

export function errorReply(
  status: number,
  message: string,
  options: { headers?: Record<string, string>; type?: string; code?: string } = {},
): FakeReply {
  const type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
  const reply: FakeReply = {
    kind: 'json',
    status,
    body: { error: { message, type, param: null, code: options.code ?? null } },
  };
  if (options.headers) reply.headers = { ...options.headers };
  return reply;
}

export function hangReply(): FakeReply {
  return { kind: 'hang' };
}

function errorBody(message: string, type: string, code: string | null) {
  return { error: { message, type, param: null, code } };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
    req.on('aborted', () => reject(new Error('request aborted while its body was being read')));
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed || res.writableEnded) return;
  const payload = JSON.stringify(body) ?? 'null';
  const extra: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) extra[name.toLowerCase()] = value;
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(payload)),
    ...extra,
  });
  res.end(payload);
}

/** Resolves true after `ms`, or false as soon as the request is aborted (the timer is then cleared). */
function delayUnlessAborted(ms: number, done: Promise<'answered' | 'aborted'>): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(true), ms);
    void done.then((outcome) => {
      if (outcome === 'aborted') {
        clearTimeout(timer);
        resolve(false);
      }
    });
  });
}

export async function startFakeOpenAI(
  options: {
    handler?: FakeHandler;
    /** Called with each piece of streamed content as it is written (for latency measurements). */
    onStreamText?: (text: string) => void;
    /**
     * A quota, as a rate-limited endpoint enforces one: at most `requests` chat requests are served
     * in any `windowMs` (default a minute), and tokens from a bucket of `tokenBurst` (default
     * `tokensPerMinute`) that refills at `tokensPerMinute`. A request is charged as the large
     * providers charge one when it arrives, its messages' characters over four plus its
     * `max_tokens`, and then whatever its answer's usage reports beyond that. One over either
     * limit is answered 429 with `Retry-After` (whole seconds until there is room) and counted in
     * `quota.refused`.
     */
    quota?: { requests?: number; windowMs?: number; tokensPerMinute?: number; tokenBurst?: number };
  } = {},
): Promise<FakeOpenAI> {
  const requests: FakeChatRequest[] = [];
  const queue: (FakeReply | Promise<FakeReply>)[] = [];
  const sockets = new Set<Socket>();
  const waiters = new Set<{ count: number; resolve: (all: FakeChatRequest[]) => void; reject: (err: Error) => void }>();
  let handler: FakeHandler | undefined = options.handler;
  const quota = options.quota && {
    ...options.quota,
    windowMs: options.quota.windowMs ?? 60_000,
    served: [] as number[],
  };
  const quotaStats = { served: 0, refused: 0, refusedForTokens: 0, maxInWindow: 0, tokens: 0 };
  const perMinute = options.quota?.tokensPerMinute;
  const burst = options.quota?.tokenBurst ?? perMinute ?? 0;
  const bucket = perMinute ? { size: burst, level: burst, at: Date.now() } : undefined;
  /** Takes `tokens` from the token bucket (it may go below 0 for usage beyond the charge). */
  const chargeTokens = (tokens: number) => {
    quotaStats.tokens += tokens;
    if (bucket) bucket.level -= tokens;
  };
  /** Seconds until the quota has room for `tokens`, or 0 when it has some now (and the request takes it). */
  const quotaWait = (tokens: number): number => {
    if (!quota) return 0;
    const now = Date.now();
    while (quota.served.length > 0 && quota.served[0]! <= now - quota.windowMs) quota.served.shift();
    if (quota.requests !== undefined && quota.served.length >= quota.requests) {
      quotaStats.refused++;
      return Math.max(1, Math.ceil((quota.served[0]! + quota.windowMs - now) / 1000));
    }
    if (bucket && perMinute) {
      bucket.level = Math.min(bucket.size, bucket.level + ((now - bucket.at) * perMinute) / 60_000);
      bucket.at = now;
      if (bucket.level < tokens) {
        quotaStats.refused++;
        quotaStats.refusedForTokens++;
        return Math.max(1, Math.ceil(((tokens - bucket.level) * 60) / perMinute));
      }
    }
    quota.served.push(now);
    quotaStats.served++;
    quotaStats.maxInWindow = Math.max(quotaStats.maxInWindow, quota.served.length);
    chargeTokens(tokens);
    return 0;
  };
  let completions = 0;
  let toolCalls = 0;
  let closing: Promise<void> | undefined;

  const context = (model: string): RenderContext => ({
    model,
    completionId: `chatcmpl-fake-${++completions}`,
    nextCallId: () => `call_${++toolCalls}`,
  });

  const record = (request: FakeChatRequest): void => {
    request.index = requests.length;
    requests.push(request);
    for (const waiter of waiters) {
      if (requests.length >= waiter.count) {
        waiters.delete(waiter);
        waiter.resolve(requests.slice());
      }
    }
  };

  const nextReply = async (request: FakeChatRequest): Promise<FakeReply> => {
    const queued = queue.shift();
    if (queued) return await queued;
    if (handler) {
      try {
        return await handler(request);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        return {
          kind: 'json',
          status: 500,
          body: errorBody(`fake-openai: handler threw: ${message}`, 'server_error', 'handler_error'),
        };
      }
    }
    return {
      kind: 'json',
      status: 500,
      body: errorBody(
        `fake-openai: script exhausted at request #${request.index} (no queued reply and no handler)`,
        'server_error',
        'script_exhausted',
      ),
    };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let settle!: (outcome: 'answered' | 'aborted') => void;
    const done = new Promise<'answered' | 'aborted'>((resolve) => (settle = resolve));
    const request: FakeChatRequest = {
      index: -1,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: { ...req.headers },
      body: undefined,
      aborted: false,
      done,
    };
    let settled = false;
    const finish = (outcome: 'answered' | 'aborted'): void => {
      if (settled) return;
      settled = true;
      if (outcome === 'aborted') request.aborted = true;
      settle(outcome);
    };
    res.on('error', () => finish('aborted'));
    res.on('finish', () => finish('answered'));
    res.on('close', () => {
      if (!res.writableEnded) finish('aborted');
    });

    let raw: string;
    try {
      raw = await readBody(req);
    } catch {
      finish('aborted');
      record(request);
      return;
    }

    let parsed: { ok: true; value: unknown } | { ok: false } = { ok: true, value: undefined };
    if (raw.length > 0) {
      try {
        parsed = { ok: true, value: JSON.parse(raw) };
      } catch {
        parsed = { ok: false };
      }
    }
    if (parsed.ok) request.body = parsed.value;
    record(request);

    const pathname = request.path.split('?')[0];
    if (request.method !== 'POST' || pathname !== CHAT_PATH) {
      sendJson(
        res,
        404,
        errorBody(`fake-openai: no route for ${request.method} ${request.path}`, 'invalid_request_error', 'not_found'),
      );
      return;
    }
    if (!parsed.ok) {
      sendJson(
        res,
        400,
        errorBody('fake-openai: request body is not valid JSON', 'invalid_request_error', 'invalid_json'),
      );
      return;
    }

    const invalid = invalidMessage(request.body);
    if (invalid) {
      sendJson(res, 400, { error: { ...invalid, type: 'invalid_request_error', code: null } });
      return;
    }
    const charged = chargedTokens(request.body);
    const retryAfter = quotaWait(charged);
    if (retryAfter > 0) {
      const body = errorBody('fake-openai: rate limit reached', 'requests', 'rate_limit_exceeded');
      sendJson(res, 429, body, { 'retry-after': String(retryAfter) });
      return;
    }
    const reply = await nextReply(request);
    if (request.aborted) return;
    if (reply.kind === 'hang') return;
    if (reply.delayMs !== undefined && reply.delayMs > 0 && !(await delayUnlessAborted(reply.delayMs, done))) return;
    if (request.aborted) return;

    const render = (reply as FakeReply & Renderable)[RENDER];
    const model = typeof request.body?.model === 'string' ? (request.body.model as string) : DEFAULT_MODEL;
    const body = render ? render(context(model)) : reply.body;
    const status = reply.status ?? 200;
    const used = isCompletion(body) ? (body.usage?.total_tokens ?? 0) : 0;
    if (quota && used > charged) chargeTokens(used - charged);
    if (request.body?.stream === true && status === 200 && isCompletion(body)) {
      const includeUsage = request.body?.stream_options?.include_usage === true;
      const pace = { tokenDelayMs: reply.tokenDelayMs ?? 0, ...(reply.hold ? { hold: reply.hold } : {}) };
      await streamCompletion(res, body, includeUsage, pace, done, options.onStreamText);
      return;
    }
    sendJson(res, status, body, reply.headers);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      sendJson(res, 500, errorBody(`fake-openai: internal error: ${message}`, 'server_error', 'fake_internal'));
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    quota: quotaStats,
    enqueue(...replies: (FakeReply | Promise<FakeReply>)[]) {
      queue.push(...replies);
    },
    discardQueued() {
      return queue.splice(0).length;
    },
    setHandler(next: FakeHandler) {
      handler = next;
    },
    waitForRequests(count: number, timeoutMs = DEFAULT_WAIT_MS) {
      if (requests.length >= count) return Promise.resolve(requests.slice());
      if (closing) return Promise.reject(new Error(`fake-openai: closed with ${requests.length}/${count} requests`));
      return new Promise<FakeChatRequest[]>((resolve, reject) => {
        const waiter = {
          count,
          resolve: (all: FakeChatRequest[]) => {
            clearTimeout(timer);
            resolve(all);
          },
          reject: (err: Error) => {
            clearTimeout(timer);
            reject(err);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`fake-openai: ${requests.length}/${count} requests arrived within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const waiter of waiters) {
          waiter.reject(new Error(`fake-openai: closed with ${requests.length}/${waiter.count} requests`));
        }
        waiters.clear();
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      });
      return closing;
    },
  };
}

type Completion = ReturnType<typeof chatCompletion>;

/**
 * What a request is charged against the token quota when it arrives, as the large providers
 * estimate it: the characters of its messages' text and tool calls over four, plus its
 * `max_tokens` (the most its answer may take).
 */
function chargedTokens(body: any): number {
  let chars = 0;
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    if (typeof message?.content === 'string') chars += message.content.length;
    for (const call of Array.isArray(message?.tool_calls) ? message.tool_calls : []) {
      chars += String(call?.function?.name ?? '').length + String(call?.function?.arguments ?? '').length;
    }
  }
  const maxTokens = Number(body?.max_tokens ?? body?.max_completion_tokens ?? 0);
  return Math.ceil(chars / 4) + (Number.isFinite(maxTokens) ? maxTokens : 0);
}

/**
 * A message OpenAI refuses (400, in its words) that a client's conversation can hold: an assistant
 * message with neither content nor tool calls.
 */
function invalidMessage(body: any): { message: string; param: string } | undefined {
  const messages: unknown[] = Array.isArray(body?.messages) ? body.messages : [];
  for (const [index, message] of messages.entries()) {
    const { role, content, tool_calls: calls } = (message ?? {}) as Record<string, unknown>;
    if (role !== 'assistant' || (Array.isArray(calls) && calls.length > 0)) continue;
    const param = `messages.[${index}].content`;
    if (content === undefined) return { message: `Missing required parameter: '${param}'.`, param };
    if (content === null) return { message: "Invalid value for 'content': expected a string, got null.", param };
  }
  return undefined;
}

function isCompletion(body: unknown): body is Completion {
  return (body as { object?: unknown } | undefined)?.object === 'chat.completion';
}

/**
 * A completion as the chunks of a stream: the role, the reasoning and then the content a word at
 * a time (`tokenDelayMs` before each, and the `hold` before the content's word it names), each
 * tool call whole, the finish reason, the usage if asked, then `[DONE]`.
 */
async function streamCompletion(
  res: ServerResponse,
  completion: Completion,
  includeUsage: boolean,
  { tokenDelayMs, hold }: { tokenDelayMs: number; hold?: StreamHold },
  done: Promise<'answered' | 'aborted'>,
  onText?: (text: string) => void,
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const { id, created, model } = completion;
  const choice = completion.choices[0]!;
  const send = (delta: object, extra: object = {}) =>
    res.write(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }] })}\n\n`,
    );
  send({ role: 'assistant', content: '' });
  const words = (text: string | null | undefined) => text?.match(/\S+\s*|\s+/g) ?? [];
  for (const word of words(choice.message.reasoning_content)) {
    if (tokenDelayMs > 0 && !(await delayUnlessAborted(tokenDelayMs, done))) return;
    send({ reasoning_content: word });
  }
  for (const [index, word] of words(choice.message.content).entries()) {
    if (index === hold?.afterWords) {
      const held = Promise.resolve(hold.until).then(() => 'released' as const);
      if ((await Promise.race([held, done])) === 'aborted') return;
    }
    if (tokenDelayMs > 0 && !(await delayUnlessAborted(tokenDelayMs, done))) return;
    onText?.(word);
    send({ content: word });
  }
  if (choice.message.refusal) send({ refusal: choice.message.refusal });
  for (const [index, call] of (choice.message.tool_calls ?? []).entries()) {
    send({ tool_calls: [{ index, id: call.id, type: 'function', function: call.function }] });
  }
  send({}, { finish_reason: choice.finish_reason });
  if (includeUsage) {
    res.write(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: completion.usage })}\n\n`,
    );
  }
  res.end('data: [DONE]\n\n');
}
