// Self-test of the fake OpenAI-compatible endpoint in test/helpers/fake-openai.ts, driven with Node's global fetch.
import {
  errorReply,
  type FakeOpenAI,
  hangReply,
  refusalReply,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';

let fake: FakeOpenAI;

beforeEach(async () => {
  fake = await startFakeOpenAI();
});

afterEach(async () => {
  await fake.close();
});

function chat(body: unknown, init: { signal?: AbortSignal; path?: string; raw?: string } = {}): Promise<Response> {
  return fetch(`${fake.baseURL}${init.path ?? '/chat/completions'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-fake' },
    body: init.raw ?? JSON.stringify(body),
    signal: init.signal,
  });
}

const json = (res: Response): Promise<any> => res.json() as Promise<any>;

const request = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] };

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

test('listens on loopback with a baseURL ending in /v1', () => {
  expect(fake.baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
});

test('a text reply comes back as a chat.completion echoing the request model, and the request is recorded', async () => {
  fake.enqueue(textReply('hello there'));
  const res = await chat(request);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  const body = await json(res);
  expect(body).toEqual({
    id: expect.stringMatching(/^chatcmpl-fake-\d+$/),
    object: 'chat.completion',
    created: expect.any(Number),
    model: 'gpt-test',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'hello there', refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });

  expect(fake.requests).toHaveLength(1);
  const [recorded] = fake.requests;
  expect(recorded).toMatchObject({
    index: 0,
    method: 'POST',
    path: '/v1/chat/completions',
    aborted: false,
    body: request,
  });
  expect(recorded.headers.authorization).toBe('Bearer sk-fake');
  await expect(recorded.done).resolves.toBe('answered');
});

test('text reply options set finish reason, usage totals and model', async () => {
  fake.enqueue(textReply('cut', { finishReason: 'length', usage: { prompt: 7, completion: 3 }, model: 'other-model' }));
  const body = await json(await chat(request));
  expect(body.model).toBe('other-model');
  expect(body.choices[0].finish_reason).toBe('length');
  expect(body.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
});

test('completion ids are unique per server', async () => {
  fake.enqueue(textReply('a'), textReply('a'));
  const first = await json(await chat(request));
  const second = await json(await chat(request));
  expect(first.id).not.toBe(second.id);
});

test('a tool-call reply carries function calls with JSON arguments, finish_reason tool_calls, and server-unique default ids', async () => {
  const reply = toolCallReply(
    [
      { name: 'search', arguments: { query: 'temporal' } },
      { id: 'call_given', name: 'raw', arguments: '{"already":"json"}' },
      { name: 'noargs', arguments: undefined },
    ],
    { text: 'calling tools', usage: { prompt: 20, completion: 8 } },
  );
  fake.enqueue(reply, reply);
  const body = await json(await chat(request));
  expect(body.choices).toEqual([
    {
      index: 0,
      message: {
        role: 'assistant',
        content: 'calling tools',
        refusal: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'search', arguments: '{"query":"temporal"}' } },
          { id: 'call_given', type: 'function', function: { name: 'raw', arguments: '{"already":"json"}' } },
          { id: 'call_2', type: 'function', function: { name: 'noargs', arguments: '{}' } },
        ],
      },
      logprobs: null,
      finish_reason: 'tool_calls',
    },
  ]);
  expect(body.usage).toEqual({ prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 });

  const again = await json(await chat(request));
  expect(again.choices[0].message.tool_calls.map((call: { id: string }) => call.id)).toEqual([
    'call_3',
    'call_given',
    'call_4',
  ]);
});

test('a tool-call reply without text has null content', async () => {
  fake.enqueue(toolCallReply([{ name: 'f', arguments: {} }]));
  const body = await json(await chat(request));
  expect(body.choices[0].message.content).toBeNull();
});

test('a refusal reply has null content, the refusal text and finish_reason stop', async () => {
  fake.enqueue(refusalReply('I cannot help with that.'));
  const body = await json(await chat(request));
  expect(body.choices[0]).toMatchObject({
    message: { role: 'assistant', content: null, refusal: 'I cannot help with that.' },
    finish_reason: 'stop',
  });
});

test('queued replies are served in FIFO order, then the handler answers', async () => {
  fake.enqueue(textReply('first'), textReply('second'));
  fake.setHandler((req) => textReply(`handler saw #${req.index} ${req.body.messages[0].content}`));
  const contents: string[] = [];
  for (const content of ['a', 'b', 'c', 'd']) {
    const body = await json(await chat({ model: 'm', messages: [{ role: 'user', content }] }));
    contents.push(body.choices[0].message.content);
  }
  expect(contents).toEqual(['first', 'second', 'handler saw #2 c', 'handler saw #3 d']);
});

test('discardQueued drops the replies not yet taken, and the handler answers the next request', async () => {
  fake.enqueue(textReply('taken'), textReply('left over'), hangReply());
  fake.setHandler(() => textReply('handler'));
  expect((await json(await chat(request))).choices[0].message.content).toBe('taken');
  expect(fake.discardQueued()).toBe(2);
  expect(fake.discardQueued()).toBe(0);
  expect((await json(await chat(request))).choices[0].message.content).toBe('handler');
});

test('a handler given at start answers, and may be async', async () => {
  await fake.close();
  fake = await startFakeOpenAI({
    handler: async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return textReply('async');
    },
  });
  const body = await json(await chat(request));
  expect(body.choices[0].message.content).toBe('async');
});

test('an exhausted script answers 500 with a JSON error', async () => {
  const res = await chat(request);
  expect(res.status).toBe(500);
  const body = await json(res);
  expect(body.error).toMatchObject({ type: 'server_error', code: 'script_exhausted' });
  expect(body.error.message).toMatch(/script exhausted/);
  expect(fake.requests).toHaveLength(1);
});

test('a throwing handler answers 500 with its message', async () => {
  fake.setHandler(() => {
    throw new Error('boom');
  });
  const res = await chat(request);
  expect(res.status).toBe(500);
  expect((await json(res)).error.message).toMatch(/boom/);
});

test('an error reply carries its status, OpenAI error body and extra headers such as retry-after', async () => {
  fake.enqueue(
    errorReply(429, 'Rate limit reached', {
      headers: { 'Retry-After': '1' },
      type: 'requests',
      code: 'rate_limit_exceeded',
    }),
  );
  const res = await chat(request);
  expect(res.status).toBe(429);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(await json(res)).toEqual({
    error: { message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' },
  });
});

test('error reply types default by status', async () => {
  fake.enqueue(errorReply(400, 'bad'), errorReply(503, 'down'));
  expect((await json(await chat(request))).error).toEqual({
    message: 'bad',
    type: 'invalid_request_error',
    param: null,
    code: null,
  });
  expect((await json(await chat(request))).error.type).toBe('server_error');
});

test('other paths answer 404 JSON and are still recorded', async () => {
  const res = await chat({ input: 'x' }, { path: '/embeddings' });
  expect(res.status).toBe(404);
  expect((await json(res)).error.message).toMatch(/no route for POST \/v1\/embeddings/);
  expect(fake.requests[0]).toMatchObject({ index: 0, method: 'POST', path: '/v1/embeddings', body: { input: 'x' } });
});

test('an invalid JSON body answers 400 and is recorded with an undefined body without consuming the queue', async () => {
  fake.enqueue(textReply('kept'));
  const res = await chat(undefined, { raw: '{not json' });
  expect(res.status).toBe(400);
  expect((await json(res)).error.code).toBe('invalid_json');
  expect(fake.requests[0].body).toBeUndefined();
  expect((await json(await chat(request))).choices[0].message.content).toBe('kept');
});

test('a hanging request aborted by the client is recorded aborted and done resolves aborted', async () => {
  fake.enqueue(hangReply());
  const controller = new AbortController();
  const pending = chat(request, { signal: controller.signal });
  const [recorded] = await fake.waitForRequests(1);
  expect(recorded.aborted).toBe(false);
  controller.abort();
  await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  await expect(withTimeout(recorded.done, 2_000, 'done')).resolves.toBe('aborted');
  expect(recorded.aborted).toBe(true);
});

test('a delayed reply waits delayMs before answering', async () => {
  fake.enqueue(textReply('late', { delayMs: 150 }));
  const started = Date.now();
  const body = await json(await chat(request));
  expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  expect(body.choices[0].message.content).toBe('late');
});

test('a client that disconnects during delayMs is recorded aborted and gets no answer', async () => {
  fake.enqueue(textReply('never seen', { delayMs: 30_000 }));
  const controller = new AbortController();
  const pending = chat(request, { signal: controller.signal });
  const [recorded] = await fake.waitForRequests(1);
  controller.abort();
  await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  await expect(withTimeout(recorded.done, 2_000, 'done')).resolves.toBe('aborted');
  expect(recorded.aborted).toBe(true);
});

test('a streamed reply held after some words sends those, and the rest only once the hold settles', async () => {
  const written: string[] = [];
  const server = await startFakeOpenAI({ onStreamText: (text) => written.push(text) });
  try {
    let release = () => {};
    const until = new Promise<void>((resolve) => (release = resolve));
    server.enqueue(textReply('one two three four five', { hold: { afterWords: 2, until } }));
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, stream: true }),
    });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = '';
    const content = () => [...received.matchAll(/"content":"([^"]*)"/g)].map((match) => match[1]).join('');
    while (content() !== 'one two ') {
      const chunk = await reader.read();
      if (chunk.done) throw new Error(`the stream ended at: ${content()}`);
      received += chunk.value;
    }
    // Nothing past the hold has been written, though nothing else delays it.
    expect(written).toEqual(['one ', 'two ']);
    release();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value;
    expect(content()).toBe('one two three four five');
    expect(received.trimEnd().endsWith('data: [DONE]')).toBe(true);
  } finally {
    await server.close();
  }
});

test('waitForRequests resolves once the total count has arrived, in arrival order', async () => {
  fake.setHandler(() => textReply('ok'));
  const waiting = fake.waitForRequests(3);
  await chat(request);
  expect(fake.requests).toHaveLength(1);
  await Promise.all([chat(request), chat(request)]);
  const all = await waiting;
  expect(all.map((r) => r.index)).toEqual([0, 1, 2]);
  await expect(fake.waitForRequests(2)).resolves.toHaveLength(3);
});

test('waitForRequests rejects after its timeout, naming how many arrived', async () => {
  await expect(fake.waitForRequests(1, 50)).rejects.toThrow('0/1 requests arrived within 50 ms');
});

test('close() with a hanging request does not hang, and the request is recorded aborted', async () => {
  fake.enqueue(hangReply());
  const pending = chat(request).then(
    () => 'answered',
    () => 'failed',
  );
  const [recorded] = await fake.waitForRequests(1);
  const waiting = fake.waitForRequests(5);
  await withTimeout(fake.close(), 2_000, 'close()');
  await expect(waiting).rejects.toThrow(/closed/);
  await expect(withTimeout(recorded.done, 2_000, 'done')).resolves.toBe('aborted');
  expect(recorded.aborted).toBe(true);
  await expect(pending).resolves.toBe('failed');
  await fake.close();
});

test.each([
  ['content null', { role: 'assistant', content: null }, "Invalid value for 'content': expected a string, got null."],
  ['no content', { role: 'assistant' }, "Missing required parameter: 'messages.[1].content'."],
  [
    'content null and an empty list of tool calls',
    { role: 'assistant', content: null, tool_calls: [] },
    "Invalid value for 'content': expected a string, got null.",
  ],
])(
  'refuses, as OpenAI does, a request holding an assistant message with %s (400, taking no queued reply)',
  async (_case, assistant, message) => {
    fake.enqueue(textReply('kept for the next request'));
    const refused = await chat({
      ...request,
      messages: [request.messages[0], assistant, { role: 'user', content: 'go on' }],
    });
    expect(refused.status).toBe(400);
    expect(await json(refused)).toEqual({
      error: { message, type: 'invalid_request_error', param: 'messages.[1].content', code: null },
    });
    const call = { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } };
    const taken = [
      { role: 'assistant', content: '' },
      { role: 'assistant', content: null, tool_calls: [call] },
    ];
    const res = await chat({ ...request, messages: [request.messages[0], ...taken] });
    expect(res.status).toBe(200);
    expect((await json(res)).choices[0].message.content).toBe('kept for the next request');
  },
);

describe('token quota', () => {
  it('charges a request its characters over four plus max_tokens, and refuses one the bucket cannot cover with 429 and Retry-After', async () => {
    // A bucket of 300 tokens refilled at 10 a second: the second request comes long before it could.
    const limited = await startFakeOpenAI({ quota: { tokensPerMinute: 600, tokenBurst: 300 } });
    try {
      limited.setHandler(() => textReply('ok'));
      const body = { model: 'm', max_tokens: 200, messages: [{ role: 'user', content: 'x'.repeat(40) }] };
      const send = () =>
        fetch(`${limited.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      expect((await send()).status).toBe(200);
      const refused = await send();
      expect(refused.status).toBe(429);
      // 210 tokens short of 90 left, at 10 a second.
      expect(refused.headers.get('retry-after')).toBe('12');
      expect(limited.quota).toMatchObject({ served: 1, refused: 1, refusedForTokens: 1, tokens: 210 });
    } finally {
      await limited.close();
    }
  });

  it('charges what an answer reports beyond the estimate', async () => {
    const limited = await startFakeOpenAI({ quota: { tokensPerMinute: 60_000 } });
    try {
      limited.setHandler(() => textReply('ok', { usage: { prompt: 500, completion: 20 } }));
      const res = await fetch(`${limited.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(40) }] }),
      });
      expect(res.status).toBe(200);
      // Charged 10 on arrival, then the rest of the 520 its usage reported.
      expect(limited.quota.tokens).toBe(520);
    } finally {
      await limited.close();
    }
  });
});
