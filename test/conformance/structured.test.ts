// Seam §7.3 and §4, structured output made durable: the capture ends the turn, invalid values go
// back to the child, calls after a capture are denied, the nudge loop, cancellation during it,
// concurrent runs with their own schemas, the schema snapshot. Each test names its clause.
import { OutputSchemaError, StructuredOutputSchema, type SubagentProvider, type SubagentRun } from '../../src';
import { createScriptedProvider, ScriptedTurn, ScriptedTurnEvent } from '../../src/testing';
import {
  createStructuredOutputRuntime,
  hostSeamProvider,
  STRUCTURED_OUTPUT_INSTRUCTION,
  subagentSinks,
} from '../../src/worker';
import { STRUCTURED_OUTPUT_NUDGE } from '../../workflows/definitions';
import { eventually, newService, testRuns, text, uniqueName } from '../helpers/temporal';

const events: ScriptedTurnEvent[] = [];
let onEvent: (event: ScriptedTurnEvent) => unknown = () => undefined;
const observer = (event: ScriptedTurnEvent) => {
  events.push(event);
  return onEvent(event);
};
const scripted = createScriptedProvider({ name: uniqueName('structured'), observer });
const noNudge = createScriptedProvider({
  name: uniqueName('no-nudge'),
  observer,
  runSettings: { structuredNudgeRetries: 0 },
});
const innerStructured: SubagentProvider = {
  name: uniqueName('seam-structured'),
  capabilities: { outputSchema: true, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  start(request) {
    const prompt = request.prompt.map((block) => (block.type === 'text' ? block.text : '')).join('');
    const structured = JSON.parse(prompt) as unknown;
    return {
      id: 'inner',
      result: Promise.resolve({ output: [], structured, stopReason: 'completed' }),
      cancel() {},
      dispose: async () => {},
    };
  },
};
/** An in-process provider that answers in prose, never with a structured value, and counts its starts. */
const proseStarts: string[] = [];
const innerProse: SubagentProvider = {
  name: uniqueName('seam-prose'),
  capabilities: { outputSchema: true, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  start(request) {
    proseStarts.push(request.prompt.map((block) => (block.type === 'text' ? block.text : '')).join(''));
    return {
      id: 'inner-prose',
      result: Promise.resolve({ output: text('a prose answer'), stopReason: 'completed' }),
      cancel() {},
      dispose: async () => {},
    };
  },
};

const hosted = [hostSeamProvider(innerStructured), hostSeamProvider(innerProse)];
const runs = testRuns([scripted, noNudge, ...hosted], { worker: { heartbeatIntervalMs: 200 } });
afterEach(() => {
  onEvent = () => undefined;
});

const schema: StructuredOutputSchema = {
  type: 'object',
  properties: { answer: { type: 'string' }, confidence: { type: 'number' } },
  required: ['answer'],
  additionalProperties: false,
};
const capture = (args: unknown) => ({ name: 'structured_output', arguments: args });
const startStructured = (script: ScriptedTurn[], provider = scripted.name, outputSchema: object = schema) =>
  runs.service.start(provider, {
    prompt: text('answer me'),
    parent: { id: 'parent' },
    outputSchema: outputSchema as Record<string, unknown>,
    agentOptions: { script: script as never },
  });
const eventsOf = (run: SubagentRun, kind: ScriptedTurnEvent['kind']) =>
  events.filter((e) => e.runId === run.id && e.kind === kind);
const turnsOf = (run: SubagentRun) => eventsOf(run, 'turn-start').map((event) => event.input);

describe('§7.3 capture', () => {
  it('§7.3 a valid capture gives structured equal to its arguments and completed, and stops the turn: no further turn runs', async () => {
    const run = startStructured([{ calls: [capture({ answer: '42' })] }, { reply: 'never played' }]);
    const result = await run.result;
    expect(result).toEqual({
      output: [{ type: 'tool-call', id: 'call-0-0', name: 'structured_output', arguments: '{"answer":"42"}' }],
      structured: { answer: '42' },
      stopReason: 'completed',
    });
    expect(turnsOf(run)).toHaveLength(1);
    await run.dispose();
  });

  it('§7.3 an invalid call then a valid one in the same turn: structured is the second value, the first result isError', async () => {
    const run = startStructured([
      { calls: [capture({ answer: 5, extra: true }), capture({ answer: 'five', confidence: 0.5 })] },
    ]);
    const result = await run.result;
    expect(result.structured).toEqual({ answer: 'five', confidence: 0.5 });
    expect(result.stopReason).toBe('completed');
    expect(eventsOf(run, 'tool-result').map((event) => event.tool)).toEqual([
      {
        name: 'structured_output',
        isError: true,
        result:
          'Error: invalid arguments: "value.answer" must be a string; "value.extra" is not a declared property (additionalProperties: false)',
      },
      { name: 'structured_output', isError: false, result: 'Structured output recorded.' },
    ]);
    expect(turnsOf(run)).toHaveLength(1);
    await run.dispose();
  });

  it('§4.10 every tool call after the capture is denied, a second structured_output included', async () => {
    const run = startStructured([
      { calls: [capture({ answer: 'first' }), { name: 'read_file', arguments: {} }, capture({ answer: 'second' })] },
    ]);
    expect((await run.result).structured).toEqual({ answer: 'first' });
    expect(eventsOf(run, 'tool-result').map((event) => event.tool)).toEqual([
      { name: 'structured_output', isError: false, result: 'Structured output recorded.' },
      {
        name: 'read_file',
        isError: true,
        result: 'Error: structured output already recorded: the run is complete, so `read_file` is not executed',
      },
      {
        name: 'structured_output',
        isError: true,
        result:
          'Error: structured output already recorded: the run is complete, so `structured_output` is not executed',
      },
    ]);
    await run.dispose();
  });

  it('§4.7 unparsable arguments are validated as the raw string, which is not an object', async () => {
    const run = startStructured([{ calls: [capture('{oops'), capture('{"answer":"ok"}')] }]);
    expect((await run.result).structured).toEqual({ answer: 'ok' });
    expect(eventsOf(run, 'tool-result')[0]!.tool!.result).toBe('Error: invalid arguments: "value" must be an object');
    await run.dispose();
  });

  it('§7.3 a child without a structured run is shown no structured_output, and calling it gives isError; its result has no structured key', async () => {
    const run = runs.service.start(scripted.name, {
      prompt: text('plain'),
      parent: { id: 'parent' },
      agentOptions: { script: [{ reply: 'plain answer', calls: [capture({ answer: 'x' })] }] as never },
    });
    const result = await run.result;
    expect('structured' in result).toBe(false);
    expect(result.stopReason).toBe('completed');
    expect(eventsOf(run, 'turn-start')[0]!.structuredSchema).toBeUndefined();
    expect(eventsOf(run, 'tool-result')[0]!.tool).toEqual({
      name: 'structured_output',
      isError: true,
      result: 'Error: structured_output is only available to subagents started with an output schema',
    });
    await run.dispose();
  });
});

describe('§7.3 the nudge loop', () => {
  it('§7.3 a prose finish, a nudge, then a capture: structured is set, completed, two user messages', async () => {
    const run = startStructured([{ reply: 'prose' }, { calls: [capture({ answer: 'after the nudge' })] }]);
    const result = await run.result;
    expect(result).toMatchObject({ structured: { answer: 'after the nudge' }, stopReason: 'completed' });
    expect(turnsOf(run)).toEqual([['answer me'], [STRUCTURED_OUTPUT_NUDGE]]);
    await run.dispose();
  });

  it('§7.3 nudges used up (1): error, no structured, two turns', async () => {
    const run = startStructured([{ reply: 'prose' }, { reply: 'more prose' }]);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect('structured' in result).toBe(false);
    expect(result.diagnostic).toBe('the child finished without calling structured_output');
    expect(turnsOf(run)).toHaveLength(2);
    await run.dispose();
  });

  it('§7.3 zero nudges: error after one turn', async () => {
    const run = startStructured([{ reply: 'prose' }], noNudge.name);
    expect((await run.result).stopReason).toBe('error');
    expect(turnsOf(run)).toHaveLength(1);
    await run.dispose();
  });

  it.each([
    ['max-tokens', { reply: 'cut off', stopReason: 'max-tokens' as const }, 'max-tokens'],
    ['a failure', { fail: 'model unavailable' }, 'error'],
  ])('§7.3 a child whose turn ended in %s is not nudged: one turn', async (_case, step, stopReason) => {
    const run = startStructured([step, { calls: [capture({ answer: 'never' })] }]);
    const result = await run.result;
    expect(result.stopReason).toBe(stopReason);
    expect('structured' in result).toBe(false);
    expect(turnsOf(run)).toHaveLength(1);
    await run.dispose();
  });

  it('§7.3 a cancel at a clean turn end without a capture: aborted, one turn', async () => {
    let runId = '';
    onEvent = async (event) => {
      if (event.kind === 'turn-end' && event.runId === runId) {
        await runs.temporal.client.workflow.getHandle(runId).cancel();
      }
    };
    const run = startStructured([{ reply: 'prose' }, { calls: [capture({ answer: 'too late' })] }]);
    runId = run.id;
    expect(await run.result).toEqual({ output: text('prose'), stopReason: 'aborted' });
    expect(turnsOf(run)).toHaveLength(1);
    await run.dispose();
  });
});

describe('§7.3 schemas', () => {
  it('§7.3 two concurrent children with different schemas each get their own schema and capture', async () => {
    const other: StructuredOutputSchema = {
      type: 'object',
      properties: { count: { type: 'integer' } },
      required: ['count'],
    };
    const [a, b] = [
      startStructured([{ calls: [capture({ count: 3 }), capture({ answer: 'a' })] }]),
      startStructured([{ calls: [capture({ answer: 'b' })] }], scripted.name, other),
    ];
    const [resultA, resultB] = await Promise.all([a.result, b.result]);
    expect(resultA.structured).toEqual({ answer: 'a' });
    expect(eventsOf(a, 'tool-result')[0]!.tool!.isError).toBe(true);
    expect(resultB.structured).toBeUndefined();
    expect(eventsOf(b, 'tool-result')[0]!.tool!.result).toBe(
      'Error: invalid arguments: missing required property "value.count"',
    );
    expect(eventsOf(a, 'turn-start')[0]!.structuredSchema).toEqual(schema);
    expect(eventsOf(b, 'turn-start')[0]!.structuredSchema).toEqual(other);
    await Promise.all([a.dispose(), b.dispose()]);
  });

  it("§4.10 the schema is snapshotted at start: a later change to the caller's object changes nothing", async () => {
    const mutable = JSON.parse(JSON.stringify(schema)) as { properties: { answer: { type: string } } };
    const run = startStructured(
      [{ delayMs: 300, calls: [capture({ answer: 'still a string' })] }],
      scripted.name,
      mutable,
    );
    mutable.properties.answer.type = 'number';
    expect((await run.result).structured).toEqual({ answer: 'still a string' });
    await run.dispose();
  });

  it('§7.3 a schema with oneOf makes start throw unsupported output schema synchronously, with every violation; nothing starts', () => {
    const before = events.length;
    let thrown: unknown;
    try {
      startStructured([], scripted.name, { type: 'object', oneOf: [], properties: { a: { type: 'weird' } } });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(OutputSchemaError);
    expect(thrown).toMatchObject({
      code: 'UNSUPPORTED_SCHEMA',
      violations: [
        'schema.oneOf is not a supported keyword (subset: type/properties/required/additionalProperties/items/enum/const + annotations)',
        'schema.properties.a.type must be one of object/array/string/number/integer/boolean/null',
      ],
    });
    expect(events.length).toBe(before);
  });

  it('§2.2 the capability is checked before the schema: UNSUPPORTED_CAPABILITY for a provider without outputSchema', () => {
    const bare = newService(runs.temporal);
    bare.registerProvider({ ...scripted, capabilities: { ...scripted.capabilities, outputSchema: false } });
    expect(() =>
      bare.start(scripted.name, { prompt: text('x'), parent: { id: 'p' }, outputSchema: { type: 'weird' } }),
    ).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_CAPABILITY' }));
  });
});

describe('a hosted seam provider that captures itself', () => {
  it('§4.6 a hosted in-process provider that finishes without a value is not nudged: it cannot take a message, so it settles error after one start', async () => {
    const run = runs.service.start(innerProse.name, {
      prompt: text('answer once'),
      parent: { id: 'p' },
      outputSchema: schema as never,
    });
    expect(await run.result).toEqual({
      output: text('a prose answer'),
      stopReason: 'error',
      diagnostic: 'the child finished without calling structured_output',
    });
    expect(proseStarts).toEqual(['answer once']);
    await run.dispose();
  });

  it('passes a valid structured value through', async () => {
    const run = runs.service.start(innerStructured.name, {
      prompt: text('{"answer":"inner"}'),
      parent: { id: 'p' },
      outputSchema: schema as never,
    });
    expect(await run.result).toEqual({ output: [], structured: { answer: 'inner' }, stopReason: 'completed' });
    await run.dispose();
  });

  it('§4.7 an invalid structured value from an in-process provider settles error with the violations', async () => {
    const run = runs.service.start(innerStructured.name, {
      prompt: text('{"answer":1}'),
      parent: { id: 'p' },
      outputSchema: schema as never,
    });
    const result = await run.result;
    expect(result).toEqual({
      output: [],
      stopReason: 'error',
      diagnostic: 'the provider\'s structured result is invalid: "value.answer" must be a string',
    });
    await run.dispose();
  });
});

describe('the runtime a provider is handed', () => {
  const runtime = () => createStructuredOutputRuntime(schema);

  it("§4.2 structured_output is listed last with the run's schema as its parameters, replacing any other copy", () => {
    const tools = runtime().withTool([{ name: 'structured_output' }, { name: 'read_file' }, { name: 'search' }]);
    expect(tools.map((tool) => tool.name)).toEqual(['read_file', 'search', 'structured_output']);
    expect(tools.at(-1)).toMatchObject({ parameters: schema });
  });

  it("§7.3 the child's system prompt ends with the instruction", () => {
    expect(runtime().systemPrompt('You are a careful reviewer.')).toBe(
      `You are a careful reviewer.\n\n${STRUCTURED_OUTPUT_INSTRUCTION}`,
    );
  });

  it('§4.2 the capture holds the parsed arguments, and an empty argument string is {}', () => {
    const rt = createStructuredOutputRuntime({ type: 'object' });
    expect(rt.captured).toBeUndefined();
    expect(rt.call('')).toEqual({ isError: false, content: text('Structured output recorded.') });
    expect(rt.captured).toEqual({ value: {} });
  });
});

it('replays a run whose history holds a capture to the same result', async () => {
  const run = startStructured([{ calls: [capture({ answer: 'recorded' })] }]);
  await run.result;
  await run.dispose();
  const handle = runs.temporal.client.workflow.getHandle(run.id);
  const outcome = await eventually(async () =>
    (await handle.describe()).status.name === 'COMPLETED' ? handle.result() : undefined,
  );
  expect(outcome).toMatchObject({ result: { structured: { answer: 'recorded' } } });
  const { Worker } = await import('@temporalio/worker');
  await expect(
    Worker.runReplayHistory(
      { workflowBundle: { codePath: process.env.TEMPORAL_TEST_BUNDLE! }, sinks: subagentSinks() },
      await handle.fetchHistory(),
    ),
  ).resolves.toBeUndefined();
});
