// A hostile or broken model endpoint: each LLM child here talks to a raw loopback HTTP server (a
// test double for an OpenAI-compatible endpoint, misbehaving as the fake model server cannot) and
// must end with a stop reason, or retry within a bound: never wait forever, never ask again at
// once in a loop, never read an answer without end.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { decodePayload } from '../../src/temporal/run-history';
import { runStarted } from '../../src';
import { createSpawnProvider } from '../../src/worker';
import { eventually, testRuns, text, uniqueName } from '../helpers/temporal';

/** One request the double took: when it came, and whether the client hung up before its end. */
interface Asked {
  at: number;
  stream: boolean;
  closed: Promise<void>;
}
type Answer = (res: ServerResponse, asked: Asked, index: number) => unknown;

let server: Server;
let baseURL = '';
let answer: Answer = (res) => res.writeHead(500).end();
let asked: Asked[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => {
      const closed = once(res, 'close').then(() => undefined);
      const entry: Asked = { at: Date.now(), stream: JSON.parse(raw).stream === true, closed };
      asked.push(entry);
      Promise.resolve()
        .then(() => answer(res, entry, asked.length - 1))
        .catch(() => res.destroy());
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
});
beforeEach(() => {
  asked = [];
});

/** Three attempts a call, a second apart at most; a whole turn may take 30 minutes. */
const runSettings = { retry: { initialInterval: '100 ms', maximumInterval: '1 second', maximumAttempts: 3 } };
const made = {} as Record<
  'streamed' | 'plain' | 'timed' | 'timedPlain' | 'tooled',
  ReturnType<typeof createSpawnProvider>
>;
/** A tool that runs as an activity of its own, as tools that are not inline do. */
const noop = {
  name: 'noop',
  description: 'Does nothing.',
  parameters: { type: 'object', properties: {} },
  execute: async () => ({ content: text('done'), isError: false }),
};
const runs = testRuns(() => {
  const endpoint = { baseURL, model: 'm' };
  const spawn = (name: string, extra: object = {}) =>
    createSpawnProvider({ name: uniqueName(name), endpoint: { ...endpoint, ...extra }, tools: [], runSettings });
  made.streamed = spawn('hostile-streamed');
  made.plain = spawn('hostile-plain', { stream: false });
  made.timed = spawn('hostile-timed', { timeoutMs: 1500 });
  made.timedPlain = spawn('hostile-timed-plain', { timeoutMs: 1500, stream: false });
  made.tooled = createSpawnProvider({
    name: uniqueName('hostile-tooled'),
    endpoint: { ...endpoint, stream: false },
    tools: [noop],
    runSettings,
  });
  return Object.values(made);
});

const parent = { id: 'parent' };
let started: string[] = [];
const start = (provider: keyof typeof made) => {
  const run = runs.service.start(made[provider].name, { prompt: text('hello'), parent });
  started.push(run.id);
  return run;
};
// A test that failed part way leaves its run asking the endpoint, which the next test answers.
afterEach(async () => {
  const open = started;
  started = [];
  await Promise.all(
    open.map((id) =>
      runs.temporal.client.workflow
        .getHandle(id)
        .terminate('the test is over')
        .catch(() => undefined),
    ),
  );
});

const completion = (content: string) => ({
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
const answered = (res: ServerResponse, content: string) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(content)));
const tooMany = (res: ServerResponse, retryAfter: string) =>
  res
    .writeHead(429, { 'content-type': 'application/json', 'retry-after': retryAfter })
    .end(JSON.stringify({ error: { message: 'slow down', type: 'rate_limit_error' } }));

/**
 * Writes `piece()` to `res` as fast as the client reads, until it hangs up or `capBytes` went out
 * (then nothing more: a client still reading waits for ever).
 */
async function endless(res: ServerResponse, piece: () => string, capBytes = 64 * 1024 * 1024): Promise<void> {
  let sent = 0;
  while (!res.destroyed && sent < capBytes) {
    const chunk = piece();
    sent += chunk.length;
    if (!res.write(chunk)) await drainedOrClosed(res);
  }
}

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });
}

it('asks an endpoint configured with stream: false without streaming, and takes its JSON answer', async () => {
  answer = (res) => answered(res, 'not streamed');
  const run = start('plain');
  expect(await run.result).toEqual({ output: text('not streamed'), stopReason: 'completed' });
  expect(asked.map((each) => each.stream)).toEqual([false]);
  await run.dispose();
});

describe('a 429 whose Retry-After asks for no wait, or a wait no timer holds', () => {
  const past = new Date(Date.now() - 3_600_000).toUTCString();
  it.each([
    ['0', '0'],
    ['negative', '-30'],
    ['a date in the past', past],
  ])('is asked again a second later, not at once (Retry-After %s)', async (_label, retryAfter) => {
    answer = (res, _asked, index) => (index < 3 ? tooMany(res, retryAfter) : answered(res, 'at last'));
    const run = start('plain');
    expect(await run.result).toEqual({ output: text('at last'), stopReason: 'completed' });
    expect(asked).toHaveLength(4);
    for (let i = 1; i < asked.length; i++) expect(asked[i]!.at - asked[i - 1]!.at).toBeGreaterThanOrEqual(900);
    await run.dispose();
  });

  it('waits a Retry-After of a year (its attempt is cut off by its timeout) instead of asking again at once', async () => {
    answer = (res) => tooMany(res, String(365 * 24 * 3600));
    const run = start('plain');
    await runStarted(run);
    // The wait the attempt heartbeats, a year ahead: by then a loop that asks at once has asked again.
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    await eventually(async () => {
      const [activity] = (await handle.describe()).raw.pendingActivities ?? [];
      const payloads = activity?.heartbeatDetails?.payloads;
      if (!payloads?.length) return undefined;
      const details = (await decodePayload(runs.temporal.client.options.loadedDataConverter, payloads)) as
        { rateLimitedUntil?: number } | undefined;
      return (details?.rateLimitedUntil ?? 0) > Date.now() + 20 * 24 * 3600 * 1000 ? true : undefined;
    });
    expect(asked).toHaveLength(1);
    run.cancel('enough');
    expect((await run.result).stopReason).toBe('aborted');
    expect(asked).toHaveLength(1);
    await run.dispose();
  });
});

it("a 503 whose Retry-After is a year is retried after the retry policy's longest interval, and the run ends error", async () => {
  answer = (res) =>
    res
      .writeHead(503, { 'content-type': 'application/json', 'retry-after': String(365 * 24 * 3600) })
      .end(JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }));
  const run = start('plain');
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('503');
  expect(asked).toHaveLength(3);
  await run.dispose();
});

describe('an answer without end', () => {
  it.each([
    ['streamed', 'tokens for ever (server-sent events)'],
    ['plain', 'a JSON body for ever'],
  ] as const)('%s: %s is cut off at the payload limit, and the run ends error saying so', async (provider, _label) => {
    answer = async (res, { stream }) => {
      if (stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const delta = JSON.stringify({
          id: 'c',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'm',
          choices: [{ index: 0, delta: { content: 'word '.repeat(200) }, finish_reason: null }],
        });
        await endless(res, () => `data: ${delta}\n\n`);
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(
          '{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"',
        );
        await endless(res, () => 'word '.repeat(2000));
      }
    };
    const run = start(provider);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/the model endpoint's answer passed \d+ bytes/);
    await asked[0]!.closed;
    expect(asked).toHaveLength(1);
    await run.dispose();
  });

  it('a long answer in small pieces is not cut off: each piece counts what it adds, not its wrapping', async () => {
    const chunk = (delta: object, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    // 60,000 pieces of one character: 60 KB of arguments, 2.6 MB with each piece's wrapping.
    answer = async (res, _asked, index) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (index > 0) return res.end(chunk({ role: 'assistant', content: 'read it' }, 'stop') + 'data: [DONE]\n\n');
      res.write(
        chunk({
          role: 'assistant',
          tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'noop', arguments: '' } }],
        }),
      );
      for (let i = 0; i < 60_000; i++) {
        if (!res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: 'x' } }] }))) await drainedOrClosed(res);
      }
      res.end(chunk({}, 'tool_calls') + 'data: [DONE]\n\n');
    };
    const run = start('streamed');
    expect(await run.result).toEqual({ output: text('read it'), stopReason: 'completed' });
    expect(asked).toHaveLength(2);
    await run.dispose();
  });

  it('one server-sent event line without end is cut off, and the run ends error', async () => {
    answer = async (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"');
      await endless(res, () => 'word '.repeat(2000));
    };
    const run = start('streamed');
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toMatch(/the model endpoint's answer passed \d+ bytes/);
    await asked[0]!.closed;
    await run.dispose();
  });
});

describe('an endpoint that goes quiet after its headers, under timeoutMs', () => {
  it.each([
    [
      'timed',
      'silence after the headers of an event stream',
      (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders(),
    ],
    [
      'timed',
      'keep-alive comments for ever',
      async (res: ServerResponse) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        while (!res.destroyed) {
          res.write(': keep-alive\n\n');
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      },
    ],
    [
      'timedPlain',
      'silence after the headers of a JSON answer',
      (res: ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders(),
    ],
  ] as const)(
    '%s: %s is cut off at timeoutMs, retried within the policy, and the run ends error',
    async (provider, _label, quiet) => {
      answer = quiet;
      const run = start(provider);
      const result = await run.result;
      expect(result.stopReason).toBe('error');
      expect(result.diagnostic).toContain('timeoutMs');
      expect(asked).toHaveLength(3);
      await Promise.all(asked.map((each) => each.closed));
      await run.dispose();
    },
  );
});

it('an answer of 2,500 tool calls ends the run error saying so, and schedules no activity for them', async () => {
  const calls = Array.from({ length: 2500 }, (_, i) => ({
    id: `call_${i}`,
    type: 'function',
    function: { name: 'noop', arguments: '{}' },
  }));
  answer = (res) => {
    const body = completion('');
    body.choices[0]!.message = { role: 'assistant', content: null, tool_calls: calls } as never;
    body.choices[0]!.finish_reason = 'tool_calls';
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const run = start('tooled');
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('2500 tool calls');
  const history = await runs.temporal.client.workflow.getHandle(run.id).fetchHistory();
  const scheduled = history.events!.filter((event) => event.activityTaskScheduledEventAttributes);
  expect(scheduled.map((event) => event.activityTaskScheduledEventAttributes!.activityType!.name)).toEqual([
    'subagentModelCall',
  ]);
  await run.dispose();
});

describe('an answer of the wrong shape', () => {
  const call = { id: 'call_1', type: 'function', function: { name: 'noop', arguments: '{}' } };
  it.each([
    ['a null message', null],
    ['content that is a number', { role: 'assistant', content: 5 }],
    ['tool_calls that is not a list', { role: 'assistant', content: null, tool_calls: { 0: call } }],
    ['a tool call without an id', { role: 'assistant', content: null, tool_calls: [{ ...call, id: undefined }] }],
    [
      'tool call arguments that are an object',
      { role: 'assistant', content: null, tool_calls: [{ ...call, function: { name: 'noop', arguments: {} } }] },
    ],
  ])('%s ends the run error saying so, asked once', async (_label, message) => {
    answer = (res) => {
      const body = completion('');
      body.choices[0]!.message = message as never;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const run = start('tooled');
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain("the model endpoint's answer is not a chat completion");
    expect(asked).toHaveLength(1);
    await run.dispose();
  });
});

describe('usage that is not a count of tokens', () => {
  it.each([
    ['fractions', { prompt_tokens: 1.5, completion_tokens: 2.25 }],
    ['negative counts', { prompt_tokens: -1_000_000, completion_tokens: -5 }],
    ['strings', { prompt_tokens: 'many', completion_tokens: '12' }],
    ['a count past what an integer holds', { prompt_tokens: 1e300, completion_tokens: 1 }],
  ])('%s: the run completes, and counts whole tokens', async (_label, usage) => {
    answer = (res) => {
      const body = { ...completion('counted'), usage };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const run = start('plain');
    expect(await run.result).toEqual({ output: text('counted'), stopReason: 'completed' });
    const counted = (await runs.status(run.id)).usage;
    for (const tokens of [counted.promptTokens, counted.completionTokens]) {
      expect(Number.isSafeInteger(tokens) && tokens >= 0).toBe(true);
    }
    await run.dispose();
  });
});

describe('HTTP that is not an answer', () => {
  it.each([
    [
      'a redirect to itself, for ever',
      (res: ServerResponse) => res.writeHead(307, { location: '/v1/chat/completions' }).end(),
    ],
    [
      'a 200 whose body is HTML',
      (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>'),
    ],
    [
      'a connection reset part way through a stream',
      (res: ServerResponse) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'half' }, finish_reason: null }] })}\n\n`,
        );
        setImmediate(() => res.destroy());
      },
    ],
  ])('%s: retried within the policy, then the run ends error', async (_label, reply) => {
    answer = (res) => reply(res);
    const run = start('streamed');
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toBeTruthy();
    // Three attempts; a redirect is followed up to the client's limit within each.
    expect(asked.length).toBeGreaterThanOrEqual(3);
    expect(asked.length).toBeLessThanOrEqual(3 * 21);
    await run.dispose();
  });
});

describe('a worker whose payloads may be large (offloaded to a store)', () => {
  const roomy = {} as { provider: ReturnType<typeof createSpawnProvider> };
  const big = testRuns(
    () => {
      roomy.provider = createSpawnProvider({
        name: uniqueName('hostile-roomy'),
        endpoint: { baseURL, model: 'm' },
        tools: [],
        runSettings,
      });
      return [roomy.provider];
    },
    { worker: { maxPayloadBytes: 256 * 1024 * 1024 } },
  );

  it('still cuts tokens for ever off at 16 MiB, not at its payload limit of 256 MiB', async () => {
    const delta = JSON.stringify({
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { content: 'word '.repeat(2000) }, finish_reason: null }],
    });
    // Past 16 MiB of answer, then silence: a worker reading on waits for ever.
    answer = async (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      await endless(res, () => `data: ${delta}\n\n`, 40 * 1024 * 1024);
    };
    const run = big.service.start(roomy.provider.name, { prompt: text('hello'), parent });
    started.push(run.id);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain(`passed ${16 * 1024 * 1024} bytes`);
    await run.dispose();
  });
});

it('two tool calls of one answer under the same id: the run goes on to its next model call', async () => {
  const call = { id: 'call_same', type: 'function', function: { name: 'noop', arguments: '{}' } };
  answer = (res, _asked, index) => {
    const body = completion('both done');
    if (index === 0) {
      body.choices[0]!.message = { role: 'assistant', content: null, tool_calls: [call, call] } as never;
      body.choices[0]!.finish_reason = 'tool_calls';
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const run = start('tooled');
  expect(await run.result).toEqual({ output: text('both done'), stopReason: 'completed' });
  expect(asked).toHaveLength(2);
  await run.dispose();
});

describe('an error whose message is huge', () => {
  it.each([400, 503])('%s: the run ends error with the start of the message', async (status) => {
    answer = (res) =>
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `huge ${'x'.repeat(1_900_000)}`, type: 'server_error' } }));
    const run = start('plain');
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain(`answered ${status}: `);
    expect(result.diagnostic!.length).toBeLessThan(10_000);
    await run.dispose();
  });
});
