// A run's progress events (`run.events()`): what the history records, numbered, live, from any
// process, across resume (continue-as-new); a reader that restarts from its last offset + 1 sees
// every event once, a reader process killed part way included.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type SubagentRun,
  type SubagentRunEvent,
  SubagentError,
  createSubagentTool,
  runOpenAIToolCall,
} from '../../src';
import { type FakeReply, type ReadyProcess, spawnReadyProcess, textReply, toolCallReply } from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { fakeModelHarness } from '../helpers/fake-model';
import { connectTestTemporal, eventually, fixture, newService, text, uniqueName } from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-run-events-'));
writeFileSync(join(cwd, 'notes.txt'), 'listed here\n');
const parent = { id: 'parent', session: { header: { id: 's', cwd } } };

const harness = fakeModelHarness((endpoint) => ({
  spawn: createSpawnProvider({ name: uniqueName('spawn'), endpoint }),
}));

/** A model reply held until `release()`. */
function heldReply(reply: FakeReply): { reply: Promise<FakeReply>; release(): void } {
  let release = () => {};
  const held = new Promise<FakeReply>((resolve) => (release = () => resolve(reply)));
  return { reply: held, release };
}

/** Reads `run`'s events into `seen` until one of type `until` (or the stream's end). */
async function readUntil(
  events: AsyncIterable<SubagentRunEvent>,
  seen: SubagentRunEvent[],
  until?: SubagentRunEvent['type'],
) {
  for await (const event of events) {
    seen.push(event);
    if (event.type === until) return;
  }
}

/** An event as the reader process prints it: its offset, its type, and its text if it has one. */
interface Printed {
  offset: number;
  type: SubagentRunEvent['type'];
  text?: string;
}
const printed = (event: SubagentRunEvent): Printed => ({
  offset: event.offset,
  type: event.type,
  ...('text' in event ? { text: event.text } : {}),
});

/** Reader processes still to kill after the test (a failed one leaves them waiting). */
const readers: ReadyProcess[] = [];
afterEach(() => Promise.all(readers.splice(0).map((reader) => reader.kill())));

/**
 * A process of its own that follows `runId`'s events from `from` (test/fixtures/events-reader.ts),
 * stopping at `stopAfter` if given; `seen` fills with what it prints as it prints it, and `closed`
 * resolves with its exit code once its output is all read.
 */
async function readerProcess(runId: string, from: number, stopAfter?: number) {
  const seen: Printed[] = [];
  const reader = await spawnReadyProcess(
    fixture('events-reader'),
    {
      TEMPORAL_ADDRESS: harness.temporal.address,
      RUN_ID: runId,
      FROM: String(from),
      ...(stopAfter === undefined ? {} : { STOP_AFTER: String(stopAfter) }),
    },
    (line) => {
      if (line.startsWith('{')) seen.push(JSON.parse(line) as Printed);
    },
  );
  readers.push(reader);
  const closed = new Promise<number | null>((resolve) => reader.child.once('close', (code) => resolve(code)));
  return { seen, closed, kill: () => reader.kill() };
}

const shape = (events: SubagentRunEvent[]) =>
  events.map(({ offset: _, time: __, runId: ___, depth: ____, ...step }) => step);

describe('run.events()', () => {
  let run: SubagentRun;
  let resumed: SubagentRun;
  const live: SubagentRunEvent[] = [];

  it('yields each step as the history records it, live, before the run settles', async () => {
    const second = heldReply(textReply('listed'));
    harness.fake.enqueue(
      toolCallReply([
        { name: 'list_directory', arguments: {} },
        { name: 'no_such_tool', arguments: {} },
      ]),
      second.reply,
    );
    const startedAt = Date.now();
    run = harness.start('spawn', { prompt: text('list it'), parent });
    const reading = readUntil(run.events!(), live, 'settled');
    // The second model call is held: what came before it is already there to read.
    await eventually(() => live.find((event) => event.type === 'tool-call-end' && event.tool === 'list_directory'));
    expect(live.some((event) => event.type === 'settled')).toBe(false);
    second.release();
    await reading;
    await run.result;
    // Each event carries the time its history recorded it, within the run's life (the server runs
    // on this machine's clock).
    for (const event of live) {
      expect(Date.parse(event.time)).toBeGreaterThanOrEqual(startedAt - 1000);
      expect(Date.parse(event.time)).toBeLessThanOrEqual(Date.now());
    }

    expect(shape(live)).toEqual([
      { type: 'turn-start', turn: 0 },
      { type: 'usage', promptTokens: 10, completionTokens: 5 },
      // Both answered by the model call itself, in call order: list_directory is inline, and the
      // child has no such tool.
      { type: 'tool-call-start', callId: 'call_1', tool: 'list_directory', arguments: '{}' },
      { type: 'tool-call-end', callId: 'call_1', tool: 'list_directory', isError: false, summary: 'notes.txt' },
      { type: 'tool-call-start', callId: 'call_2', tool: 'no_such_tool', arguments: '{}' },
      {
        type: 'tool-call-end',
        callId: 'call_2',
        tool: 'no_such_tool',
        isError: true,
        summary: expect.stringContaining('is not available to this subagent'),
      },
      { type: 'text', text: 'listed' },
      { type: 'usage', promptTokens: 10, completionTokens: 5 },
      { type: 'turn-end', turn: 0, stopReason: 'completed' },
      { type: 'settled', segment: 0, result: { output: text('listed'), stopReason: 'completed' } },
    ]);
    expect(live.map((event) => event.offset)).toEqual(live.map((_, index) => index));
    expect(new Set(live.map((event) => `${event.runId} ${event.depth}`))).toEqual(new Set([`${run.id} 1`]));
  });

  it('continues its numbering across a resume, and reads the same from another connection', async () => {
    harness.fake.enqueue(textReply('again'));
    resumed = run.resume!(text('once more'));
    await resumed.result;

    const elsewhere = await connectTestTemporal();
    try {
      const attached = newService(elsewhere).attach(run.id);
      const all: SubagentRunEvent[] = [];
      await readUntil(attached.events!({ follow: false }), all);
      expect(all.slice(0, live.length)).toEqual(live);
      expect(shape(all.slice(live.length))).toEqual([
        { type: 'resumed', segment: 1 },
        { type: 'turn-start', turn: 1 },
        { type: 'text', text: 'again' },
        { type: 'usage', promptTokens: 10, completionTokens: 5 },
        { type: 'turn-end', turn: 1, stopReason: 'completed' },
        { type: 'settled', segment: 1, result: { output: text('again'), stopReason: 'completed' } },
      ]);
      expect(all.map((event) => event.offset)).toEqual(all.map((_, index) => index));

      // A reader that stops part way and starts again from its last offset + 1 (here in another
      // process's stead: another connection and service) sees every event once.
      const first: SubagentRunEvent[] = [];
      for await (const event of run.events!({ follow: false })) {
        first.push(event);
        if (first.length === 7) break;
      }
      const rest: SubagentRunEvent[] = [];
      await readUntil(attached.events!({ from: first.at(-1)!.offset + 1, follow: false }), rest);
      expect([...first, ...rest]).toEqual(all);
    } finally {
      await elsewhere.close();
    }
  });

  it('ends a followed stream with the close', async () => {
    const tail: SubagentRunEvent[] = [];
    const from = (await collect(resumed.events!({ follow: false }))).length;
    const reading = readUntil(resumed.events!({ from }), tail);
    await resumed.dispose();
    await reading;
    expect(shape(tail)).toEqual([{ type: 'closed', closedBy: 'disposed' }]);
    expect(tail[0]!.offset).toBe(from);
  });

  it('streams a model call’s text in batches as it comes, each in history before the call’s answer', async () => {
    const words = Array.from({ length: 40 }, (_, index) => `word${index}`).join(' ');
    // 40 words 40 ms apart: 1.6 s of streaming, so batches at 250 and 750 ms at least.
    harness.fake.enqueue(textReply(words, { tokenDelayMs: 40 }));
    const streamed = harness.start('spawn', { prompt: text('talk slowly'), parent });
    const seen: SubagentRunEvent[] = [];
    // A reader that stops at the first batch and comes back from its offset + 1.
    for await (const event of streamed.events!()) {
      seen.push(event);
      if (event.type === 'text-delta') break;
    }
    await readUntil(streamed.events!({ from: seen.at(-1)!.offset + 1 }), seen, 'settled');
    expect((await streamed.result).output).toEqual(text(words));

    expect(seen.map((event) => event.offset)).toEqual(seen.map((_, index) => index));
    const deltas = seen.filter((event) => event.type === 'text-delta');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas.every((event) => event.turn === 0 && event.attempt === 1)).toBe(true);
    const whole = seen.findIndex((event) => event.type === 'text');
    expect(seen[whole]).toMatchObject({ type: 'text', text: words });
    // Every batch precedes the whole text, and together they are how it began.
    expect(seen.findLastIndex((event) => event.type === 'text-delta')).toBeLessThan(whole);
    expect(words.startsWith(deltas.map((event) => (event.type === 'text-delta' ? event.text : '')).join(''))).toBe(
      true,
    );
    await streamed.dispose();
  });

  it('streams the model’s reasoning ahead of its text, keeps it in the output, and never sends it back', async () => {
    const thinking = Array.from({ length: 10 }, (_, index) => `thought${index}`).join(' ');
    const words = Array.from({ length: 40 }, (_, index) => `said${index}`).join(' ');
    // The first call reasons, then calls a tool; the second reasons and answers, 50 words 40 ms
    // apart: batches at 250 ms (reasoning), 750 ms (both) and 1750 ms (text alone).
    harness.fake.enqueue(
      toolCallReply([{ name: 'list_directory', arguments: {} }], { reasoning: 'look first' }),
      textReply(words, { reasoning: thinking, tokenDelayMs: 40 }),
    );
    const before = harness.fake.requests.length;
    const run = harness.start('spawn', { prompt: text('think aloud'), parent });
    const seen: SubagentRunEvent[] = [];
    await readUntil(run.events!(), seen, 'settled');
    expect((await run.result).output).toEqual([
      { type: 'reasoning', text: thinking },
      { type: 'text', text: words },
    ]);

    const types = seen.map((event) => event.type);
    const deltas = seen.filter((event) => event.type === 'reasoning-delta');
    expect(deltas.length).toBeGreaterThanOrEqual(1);
    expect(thinking.startsWith(deltas.map((event) => ('text' in event ? event.text : '')).join(''))).toBe(true);
    // Each call's reasoning comes before its text, its deltas before it whole.
    expect(
      seen.filter((event) => event.type === 'reasoning').map((event) => ('text' in event ? event.text : '')),
    ).toEqual(['look first', thinking]);
    const lastReasoning = types.lastIndexOf('reasoning');
    expect(types.lastIndexOf('reasoning-delta')).toBeLessThan(lastReasoning);
    expect(types.lastIndexOf('reasoning-delta')).toBeLessThan(types.indexOf('text-delta'));
    expect(lastReasoning).toBeLessThan(types.lastIndexOf('text'));
    // The second call was sent the first call's tool call, not its reasoning.
    const second = harness.fake.requests[before + 1]!.body as { messages: { role: string; content: unknown }[] };
    expect(JSON.stringify(second.messages)).not.toContain('look first');
    expect(second.messages.some((message) => message.role === 'assistant')).toBe(true);
    await run.dispose();
  });

  it('gives a reader process killed part way, and another started from its last offset + 1, every event once', async () => {
    const secondStep = heldReply(toolCallReply([{ name: 'list_directory', arguments: {} }]));
    let releaseRest = () => {};
    const rest = new Promise<void>((resolve) => (releaseRest = resolve));
    const words = Array.from({ length: 30 }, (_, index) => `part${index}`).join(' ');
    const answer = heldReply(textReply(words, { tokenDelayMs: 30, hold: { afterWords: 10, until: rest } }));
    harness.fake.enqueue(
      toolCallReply([
        { name: 'list_directory', arguments: {} },
        { name: 'no_such_tool', arguments: {} },
      ]),
      secondStep.reply,
      answer.reply,
    );
    const run = harness.start('spawn', {
      prompt: text('list it twice, then talk'),
      parent,
    });
    // The first reader stops part way through the second model call's events (usage, a call
    // answered inline): killed there, it has printed the usage and not the call.
    const first = await readerProcess(run.id, 0, 6);
    // The first model call's six events (its turn's start, usage, two calls answered inline) come
    // live while the second is held.
    await eventually(() => first.seen.find((event) => event.offset === 5));
    secondStep.release();
    await eventually(() => first.seen.find((event) => event.offset === 6));
    await first.kill();
    await first.closed;
    expect(first.seen.map((event) => event.type)).toEqual([
      'turn-start',
      'usage',
      'tool-call-start',
      'tool-call-end',
      'tool-call-start',
      'tool-call-end',
      'usage',
    ]);
    const last = first.seen.at(-1)!.offset;

    // With no reader, the answer begins: its first words are in the history as a text batch.
    answer.release();
    await eventually(async () =>
      (await collect(run.events!({ follow: false }))).some((event) => event.type === 'text-delta') ? true : undefined,
    );
    const second = await readerProcess(run.id, last + 1);
    await eventually(() => second.seen.find((event) => event.type === 'text-delta'));
    // The rest of the answer comes while the second reader follows.
    releaseRest();
    await eventually(() => second.seen.find((event) => event.type === 'settled'));
    expect((await run.result).output).toEqual(text(words));
    await run.dispose();
    expect(await second.closed).toBe(0);

    const whole = await collect(harness.service.attach(run.id).events!({ follow: false }));
    const read = [...first.seen, ...second.seen];
    expect(read.map((event) => event.offset)).toEqual(whole.map((_, index) => index));
    expect(read).toEqual(whole.map(printed));
    expect(read.at(-1)).toEqual({ offset: whole.length - 1, type: 'closed' });
    expect(read.filter((event) => event.type === 'text')).toEqual([
      { offset: expect.any(Number), type: 'text', text: words },
    ]);
  }, 60_000);

  it('hands a delegation’s progress to the OpenAI adapter’s onProgress while the parent waits', async () => {
    const tool = createSubagentTool(harness.service, { provider: harness.providers.spawn.name });
    const words = Array.from({ length: 40 }, (_, index) => `step${index}`).join(' ');
    harness.fake.enqueue(
      toolCallReply([{ name: 'list_directory', arguments: {} }]),
      textReply(words, { tokenDelayMs: 40 }),
    );
    const progress: SubagentRunEvent[] = [];
    const message = await runOpenAIToolCall(
      tool,
      {
        id: 'call-1',
        function: { name: 'subagent', arguments: JSON.stringify({ description: 'list', prompt: 'list it' }) },
      },
      {
        parent,
        onProgress: (event) => {
          progress.push(event);
          throw new Error('a display that fails is ignored');
        },
      },
    );
    expect(message).toEqual({ role: 'tool', tool_call_id: 'call-1', content: words });
    const types = progress.map((event) => event.type);
    expect(types.slice(0, 4)).toEqual(['turn-start', 'usage', 'tool-call-start', 'tool-call-end']);
    expect(types).toContain('text-delta');
    expect(types.indexOf('text-delta')).toBeLessThan(types.indexOf('text'));
  });

  it('ends a turn that no model call ended (the maxStepsPerTurn cap) before the settle point', async () => {
    const capped = newService(harness.temporal);
    capped.registerProvider(
      createSpawnProvider({
        name: harness.providers.spawn.name,
        endpoint: harness.providers.spawn.endpoint,
        runSettings: { maxStepsPerTurn: 1 },
      }),
    );
    harness.fake.enqueue(toolCallReply([{ name: 'list_directory', arguments: {} }]));
    const run = capped.start(harness.providers.spawn.name, { prompt: text('list forever'), parent });
    expect((await run.result).stopReason).toBe('error');
    const all: SubagentRunEvent[] = [];
    await readUntil(run.events!({ follow: false }), all);
    expect(shape(all.slice(-3))).toEqual([
      {
        type: 'tool-call-end',
        callId: expect.any(String),
        tool: 'list_directory',
        isError: false,
        summary: 'notes.txt',
      },
      {
        type: 'turn-end',
        turn: 0,
        stopReason: 'error',
        diagnostic: 'the child made 1 model calls in one turn (maxStepsPerTurn)',
      },
      { type: 'settled', segment: 0, result: expect.objectContaining({ stopReason: 'error' }) },
    ]);
    await run.dispose();
  });

  it('refuses an offset that is not one, and an id with no run', async () => {
    await expect(collect(run.events!({ from: -1 }))).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    const unknown = harness.service.attach(`${run.id}-nope`);
    await expect(unknown.result).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
    const refusal = collect(unknown.events!({ follow: false }));
    await expect(refusal).rejects.toBeInstanceOf(SubagentError);
    await expect(refusal).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
  });
});

async function collect(events: AsyncIterable<SubagentRunEvent>): Promise<SubagentRunEvent[]> {
  const all: SubagentRunEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}
