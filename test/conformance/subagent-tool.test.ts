// Seam §7.8 and §6, the model-facing `subagent` tool made durable: wording both ways, the
// stop-reason mapping, dispose on every path, abort bridging, a parent model that calls the tool
// (OpenAI shape and Vercel AI SDK), nesting to maxDepth from inside LLM children, background mode
// across a restart of the parent process. Clause tests are named after their clause.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, streamText, type TextStreamPart, type ToolSet } from 'ai';
import OpenAI from 'openai';
import {
  type SubagentStartRequest,
  createSubagentResultTool,
  createSubagentTool,
  runOpenAIToolCall,
  type SubagentRun,
  type SubagentRunEvent,
  SubagentStarter,
  toAiSdkTool,
  toOpenAITool,
  UNSEEDED_NOTICE,
} from '../../src';
import {
  createScriptedProvider,
  FakeChatRequest,
  ScriptedTurnEvent,
  spawnReadyProcess,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { builtinFileTools, createDelegationTool, createForkProvider, createSpawnProvider } from '../../src/worker';
import { textOf } from '../../src/seam/content';
import { toolResult } from '../../src/seam/tool';
import { fakeModelHarness } from '../helpers/fake-model';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  fixture,
  newService,
  startWorker,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

/** 'started' for a worker of `providers` that starts (it is stopped again), else what its creation threw. */
function workerOutcome(providers: Parameters<typeof startWorker>[1], options?: Parameters<typeof startWorker>[2]) {
  return startWorker(harness.temporal, providers, options).then(
    async (stop) => {
      await stop();
      return 'started';
    },
    (err: unknown) => err,
  );
}

const events: ScriptedTurnEvent[] = [];
const scripted = createScriptedProvider({ name: uniqueName('tool-child'), observer: (event) => events.push(event) });
const forkLike = createScriptedProvider({ name: uniqueName('tool-fork'), inheritsParentContext: true });
const spawnName = uniqueName('tool-spawn');
const forkName = uniqueName('tool-fork-llm');
const bareForkName = uniqueName('tool-fork-bare');

const backgroundTool = () =>
  createDelegationTool({ provider: scripted.name, background: true, agentOptions: { script: [{ reply: 'aside' }] } });
/** The caller-side subagent_result tool as an LLM child's tool, over the harness's service. */
const collectTool = (name?: string) => {
  const tool = createSubagentResultTool(lazyStarter, name === undefined ? {} : { name });
  return { ...tool, parameters: { ...tool.parameters } };
};
/** The harness's service, once it exists. */
const lazyStarter: SubagentStarter = {
  start: (name, request) => harness.service.start(name, request),
  attach: (id) => harness.service.attach(id),
  getProvider: (name) => harness.service.getProvider(name),
};

const harness = fakeModelHarness(
  (endpoint) => ({
    scripted,
    forkLike,
    spawn: createSpawnProvider({
      name: spawnName,
      endpoint: { ...endpoint, model: 'child-model' },
      tools: [...builtinFileTools(), createDelegationTool({ provider: spawnName })],
    }),
    /** A fork child that can fork again: its delegation tool says the child inherits the conversation. */
    fork: createForkProvider({
      name: forkName,
      endpoint,
      tools: [createDelegationTool({ provider: forkName, name: 'subagent_fork', inheritsParentContext: true })],
    }),
    /** An LLM child that delegates in the background and has no subagent_result tool to collect with. */
    backgroundOnly: createSpawnProvider({
      name: uniqueName('background-only'),
      endpoint,
      tools: [backgroundTool()],
    }),
    /** The same, with a subagent_result tool beside it (the caller-side one, over the harness's service). */
    backgroundCollected: createSpawnProvider({
      name: uniqueName('background-collected'),
      endpoint,
      tools: [backgroundTool(), collectTool()],
    }),
    /** The same, beside an unrelated tool that happens to be named subagent_result. */
    backgroundImpostor: createSpawnProvider({
      name: uniqueName('background-impostor'),
      endpoint,
      tools: [
        backgroundTool(),
        {
          name: 'subagent_result',
          description: 'Look a result up in the team wiki.',
          parameters: { type: 'object', properties: { run_id: { type: 'string' } } },
          execute: () => Promise.resolve(toolResult('no such page')),
        },
      ],
    }),
    /** The same, with the subagent_result tool under another name. */
    backgroundRenamed: createSpawnProvider({
      name: uniqueName('background-renamed'),
      endpoint,
      tools: [backgroundTool(), collectTool('collect_subagent')],
    }),
    /** An LLM child whose delegation tool caps the runs it starts at depth 1, its own. */
    cappedTool: createSpawnProvider({
      name: uniqueName('capped-tool'),
      endpoint,
      tools: [...builtinFileTools(), createDelegationTool({ provider: scripted.name, maxDepth: 1 })],
    }),
    /** A fork child whose delegation tool to itself was made without inheritsParentContext. */
    bareFork: createForkProvider({
      name: bareForkName,
      endpoint,
      tools: [createDelegationTool({ provider: bareForkName, name: 'subagent_fork' })],
    }),
  }),
  { worker: { heartbeatIntervalMs: 200 } },
);

const parent = { id: 'parent-agent' };
const args = (prompt: string) => ({ description: 'a delegated task', prompt });
const scriptedTool = (script: object[], extra: object = {}) =>
  createSubagentTool(harness.service, { provider: scripted.name, agentOptions: { script: script as never }, ...extra });

/** The real service, recording the runs it started, their requests, cancels and disposals (not a Temporal mock). */
function recording(overrides: { result?: (run: SubagentRun) => Promise<never> } = {}) {
  const runs: {
    provider: string;
    request: SubagentStartRequest;
    run: SubagentRun;
    cancelled: number;
    disposed: number;
  }[] = [];
  const starter: SubagentStarter = {
    getProvider: (name) => harness.service.getProvider(name),
    attach: (id) => harness.service.attach(id),
    start(name, request) {
      const run = harness.service.start(name, request);
      const entry = { provider: name, request, run, cancelled: 0, disposed: 0 };
      runs.push(entry);
      return {
        ...run,
        result: overrides.result ? overrides.result(run) : run.result,
        cancel: (reason?: string) => {
          entry.cancelled++;
          run.cancel(reason);
        },
        dispose: async () => {
          entry.disposed++;
          await run.dispose();
        },
      };
    },
  };
  return { starter, runs };
}

describe('§7.8 wording', () => {
  it('§7.8 spawn-style wording: the child does not see the conversation; the parameters are exactly description and prompt', () => {
    const tool = createSubagentTool(harness.service, { provider: scripted.name });
    expect(tool.name).toBe('subagent');
    expect(Object.keys(tool.parameters.properties)).toEqual(['description', 'prompt']);
    expect(tool.description).toContain('does not see this conversation');
    expect(tool.parameters.properties.prompt!.description).toContain('include everything it needs');
  });

  it('§7.8 fork-style wording: the child inherits the completed turns', () => {
    const tool = createSubagentTool(harness.service, { provider: forkLike.name, name: 'subagent_fork' });
    expect(tool.name).toBe('subagent_fork');
    expect(tool.description).toContain('INHERITS this conversation');
    expect(tool.description).toContain('completed turns');
    expect(tool.description).not.toContain('does not see this conversation');
  });

  it('§7.8 a tool for a provider that is not registered is refused with NO_PROVIDER (its wording depends on the provider)', () => {
    expect(() => createSubagentTool(harness.service, { provider: 'nobody' })).toThrow(
      expect.objectContaining({ code: 'NO_PROVIDER' }),
    );
  });
});

describe('§7.8 execute', () => {
  it("§7.8 delegation returns the reply text with isError false, the config's agentOptions forwarded, and disposes once", async () => {
    const { starter, runs } = recording();
    const tool = createSubagentTool(starter, {
      provider: scripted.name,
      agentOptions: { script: [{ reply: 'child says {input}' }] as never },
    });
    expect(await tool.execute(args('hello'), { parent })).toEqual({
      isError: false,
      content: text('child says hello'),
    });
    expect(runs.map((entry) => entry.disposed)).toEqual([1]);
    expect(runs[0]!.request.agentOptions).toEqual({ script: [{ reply: 'child says {input}' }] });
    expect((await harness.closed(runs[0]!.run.id)).closedBy).toBe('disposed');
  });

  it('§7.8 two tools with different names each route to their own provider', async () => {
    const { starter, runs } = recording();
    const spawnTool = createSubagentTool(starter, { provider: scripted.name });
    const forkTool = createSubagentTool(starter, { provider: forkLike.name, name: 'subagent_fork' });
    expect([spawnTool.name, forkTool.name]).toEqual(['subagent', 'subagent_fork']);
    await spawnTool.execute(args('to the first'), { parent });
    await forkTool.execute(args('to the second'), { parent });
    expect(runs.map((entry) => entry.provider)).toEqual([scripted.name, forkLike.name]);
  });

  it('§7.8 a tool made with no options is named subagent and starts runs without agentOptions', async () => {
    const { starter, runs } = recording();
    const tool = createSubagentTool(starter, { provider: scripted.name });
    expect(tool.name).toBe('subagent');
    expect(await tool.execute(args('plain'), { parent })).toEqual({
      isError: false,
      content: text('scripted reply to: plain'),
    });
    expect('agentOptions' in runs[0]!.request).toBe(false);
  });

  it.each([
    ['aborted', 'subagent run was cancelled'],
    ['error', 'subagent run failed'],
    ['max-tokens', 'subagent run hit its token limit before finishing'],
    ['refusal', 'subagent declined the task'],
    ['gave-up', 'subagent run ended abnormally (gave-up)'],
  ])(
    '§7.8 the stop reason %s is isError with its fixed message, and the run is disposed once',
    async (stopReason, message) => {
      const { starter, runs } = recording();
      const tool = createSubagentTool(starter, {
        provider: scripted.name,
        agentOptions: { script: [{ reply: 'partial', stopReason }] as never },
      });
      const outcome = await tool.execute(args('x'), { parent });
      expect(outcome.isError).toBe(true);
      expect((outcome.content[0] as { text: string }).text).toBe(`Error: ${message}`);
      expect(runs[0]!.disposed).toBe(1);
    },
  );

  it('§7.8 a result that rejects (an infrastructure fault) is isError, and the run is still disposed once', async () => {
    const { starter, runs } = recording({ result: () => Promise.reject(new Error('connection lost')) });
    const tool = createSubagentTool(starter, { provider: scripted.name });
    const outcome = await tool.execute(args('x'), { parent });
    expect(outcome).toEqual({
      isError: true,
      content: text('Error: subagent run failed before producing a result: connection lost'),
    });
    expect(runs[0]!.disposed).toBe(1);
  });

  it('turns a refused start into an error result, with no run to dispose', async () => {
    const { starter, runs } = recording();
    const tool = createSubagentTool(starter, { provider: scripted.name, maxDepth: 0 });
    const outcome = await tool.execute(args('x'), { parent });
    expect(outcome).toEqual({ isError: true, content: text('Error: subagent depth 1 exceeds maxDepth 0') });
    expect(runs).toEqual([]);
  });

  it('§7.8 no calling agent is isError (requires a calling agent), as are malformed arguments', async () => {
    const tool = scriptedTool([]);
    expect(await tool.execute({ description: 'x' }, { parent })).toEqual({
      isError: true,
      content: text('Error: invalid arguments: missing required property "prompt"'),
    });
    expect(await tool.execute({ description: 'x', prompt: 5 }, { parent })).toEqual({
      isError: true,
      content: text('Error: invalid arguments: "prompt" must be a string'),
    });
    expect(await tool.execute(args('x'), {})).toMatchObject({
      isError: true,
      content: text('Error: subagent tool requires a calling agent (context.parent was undefined)'),
    });
  });

  it('§7.8 a live abort calls run.cancel once, and the result is isError', async () => {
    const { starter, runs } = recording();
    const tool = createSubagentTool(starter, {
      provider: scripted.name,
      agentOptions: { script: [{ hang: true }] as never },
    });
    const controller = new AbortController();
    const pending = tool.execute(args('long task'), { parent, signal: controller.signal });
    await eventually(() => events.find((e) => e.runId === runs[0]?.run.id && e.kind === 'turn-start'));
    controller.abort();
    expect(await pending).toEqual({ isError: true, content: text('Error: subagent run was cancelled') });
    expect(runs[0]!.cancelled).toBe(1);
    expect(runs[0]!.disposed).toBe(1);
    expect(events.some((e) => e.runId === runs[0]!.run.id && e.kind === 'cancelled')).toBe(true);
  });

  it('§7.8 an already-aborted signal calls run.cancel once, the result is isError, the child is never called', async () => {
    const { starter, runs } = recording();
    const tool = createSubagentTool(starter, { provider: scripted.name });
    const controller = new AbortController();
    controller.abort();
    expect(await tool.execute(args('never'), { parent, signal: controller.signal })).toEqual({
      isError: true,
      content: text('Error: subagent run was cancelled'),
    });
    expect(events.filter((e) => e.runId === runs[0]!.run.id)).toEqual([]);
    expect(runs[0]!.cancelled).toBe(1);
    expect(runs[0]!.disposed).toBe(1);
  });

  it('renders a structured result as JSON for the model', async () => {
    const tool = scriptedTool([{ calls: [{ name: 'structured_output', arguments: { verdict: 'ship' } }] }], {
      outputSchema: { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] },
    });
    expect(await tool.execute(args('judge'), { parent })).toEqual({
      isError: false,
      content: text('{"verdict":"ship"}'),
    });
  });
});

describe('a parent model calling the tool', () => {
  const parentTurn = (request: FakeChatRequest) => {
    const last = request.body.messages.at(-1);
    return last.role === 'tool'
      ? textReply(`the child said: ${last.content}`)
      : toolCallReply([
          { id: 'call-sub', name: 'subagent', arguments: { description: 'ask the child', prompt: 'find the answer' } },
        ]);
  };

  it('delegates through the OpenAI function-tool shape and reads the answer from the tool message', async () => {
    harness.fake.setHandler(parentTurn);
    const tool = scriptedTool([{ reply: 'the answer is 42' }]);
    const client = new OpenAI({ baseURL: harness.fake.baseURL, apiKey: 'test', maxRetries: 0 });
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'what is the answer?' },
    ];
    const first = await client.chat.completions.create({
      model: 'parent-model',
      messages,
      tools: [toOpenAITool(tool)],
    });
    const call = first.choices[0]!.message.tool_calls![0]! as {
      id: string;
      function: { name: string; arguments: string };
    };
    messages.push(first.choices[0]!.message, await runOpenAIToolCall(tool, call, { parent }));
    const second = await client.chat.completions.create({
      model: 'parent-model',
      messages,
      tools: [toOpenAITool(tool)],
    });
    expect(second.choices[0]!.message.content).toBe('the child said: the answer is 42');
  });

  it('delegates through the Vercel AI SDK tool() shape inside generateText', async () => {
    harness.fake.setHandler(parentTurn);
    const tool = scriptedTool([{ reply: 'the AI SDK child answered' }]);
    const model = createOpenAICompatible({ name: 'fake', baseURL: harness.fake.baseURL, apiKey: 'test' }).chatModel(
      'parent-model',
    );
    const result = await generateText({
      model,
      prompt: 'what is the answer?',
      tools: { subagent: toAiSdkTool(tool, { parent }) },
      stopWhen: stepCountIs(3),
    });
    expect(result.text).toBe('the child said: the AI SDK child answered');
  });

  it('hands the child’s progress to the AI SDK as preliminary results, then the answer', async () => {
    const tool = toAiSdkTool(scriptedTool([{ reply: 'answered after some work' }]), { parent });
    const outputs: unknown[] = [];
    const results = tool.execute!(
      { description: 'work', prompt: 'do some work' },
      { toolCallId: 'call-1', messages: [] },
    ) as AsyncIterable<unknown>;
    for await (const output of results) outputs.push(output);
    expect(outputs.at(-1)).toBe('answered after some work');
    const preliminary = outputs.slice(0, -1) as SubagentRunEvent[];
    expect(preliminary.map((event) => event.type)).toEqual(['turn-start', 'text', 'turn-end', 'settled']);
    expect(preliminary[1]).toMatchObject({ type: 'text', text: 'answered after some work', depth: 1 });
  });

  it('streams the child’s progress through streamText as preliminary tool results, live, before the answer', async () => {
    const words = Array.from({ length: 40 }, (_, index) => `word${index}`).join(' ');
    let releaseAnswer = () => {};
    const answerHeld = new Promise<void>((resolve) => (releaseAnswer = resolve));
    // The parent asks the subagent tool; the child (a spawn run on the same endpoint) calls a tool
    // it lacks, then streams its answer, which waits until the test has seen progress come.
    harness.fake.setHandler(async (request) => {
      if (request.body.model === 'parent-model') return parentTurn(request);
      if (request.body.messages.at(-1).role !== 'tool') return toolCallReply([{ name: 'no_such_tool', arguments: {} }]);
      await answerHeld;
      return textReply(words, { tokenDelayMs: 40 });
    });
    const tool = createSubagentTool(harness.service, { provider: spawnName });
    const model = createOpenAICompatible({ name: 'fake', baseURL: harness.fake.baseURL, apiKey: 'test' }).chatModel(
      'parent-model',
    );
    const stream = streamText({
      model,
      prompt: 'what is the answer?',
      tools: { subagent: toAiSdkTool(tool, { parent }) },
      stopWhen: stepCountIs(3),
    });
    const parts: TextStreamPart<ToolSet>[] = [];
    const reading = (async () => {
      for await (const part of stream.fullStream) parts.push(part);
    })();
    const results = () => parts.flatMap((part) => (part.type === 'tool-result' ? [part] : []));
    try {
      // The child's first model call is answered while its second is held: its progress is in
      // the parent's stream already.
      await eventually(() =>
        results().find((part) => part.preliminary && (part.output as SubagentRunEvent).type === 'tool-call-end'),
      );
    } finally {
      releaseAnswer();
    }
    await reading;
    expect(await stream.text).toBe(`the child said: ${words}`);

    const delegation = results();
    expect(delegation.every((part) => part.toolCallId === 'call-sub' && part.toolName === 'subagent')).toBe(true);
    // Only the last is the tool's result; every one before it is preliminary.
    expect(delegation.map((part) => part.preliminary === true)).toEqual(
      delegation.map((_, i) => i < delegation.length - 1),
    );
    expect(delegation.at(-1)!.output).toBe(words);
    // The SDK hands on the last output as preliminary too: the progress events come before it.
    const progress = delegation.slice(0, -2).map((part) => part.output as SubagentRunEvent);
    expect(delegation.at(-2)!.output).toBe(words);
    const types = progress.map((event) => event.type);
    expect(types.slice(0, 4)).toEqual(['turn-start', 'usage', 'tool-call-start', 'tool-call-end']);
    expect(types).toContain('text-delta');
    expect(types.indexOf('text-delta')).toBeLessThan(types.indexOf('text'));
    expect(types.at(-1)).toBe('settled');
    expect(progress.find((event) => event.type === 'text')).toMatchObject({ text: words, depth: 1 });
    // The parent model never sees the progress: its next request carries the answer alone.
    const parentCalls = harness.fake.requests.filter((request) => request.body?.model === 'parent-model');
    expect(parentCalls.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'tool', content: words });
  });
});

describe('inside LLM children', () => {
  it('lets a child delegate further down to maxDepth, and offers its model the tool no more at that depth (it was offered, and every call refused)', async () => {
    const offered = new Map<number, string[]>();
    harness.fake.setHandler((request) => {
      const last = request.body.messages.at(-1);
      if (last.role === 'tool') return textReply(`level done after: ${last.content}`);
      const level = Number(/level (\d)/.exec(last.content)?.[1]);
      offered.set(
        level,
        (request.body.tools as { function: { name: string } }[]).map((tool) => tool.function.name),
      );
      return toolCallReply([
        { name: 'subagent', arguments: { description: 'go deeper', prompt: `level ${level + 1} task` } },
      ]);
    });
    const run = harness.service.start(spawnName, { prompt: text('level 1 task'), parent, maxDepth: 2 });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    expect(offered.get(1)).toContain('subagent');
    expect(offered.get(2)).toEqual(['read_file', 'list_directory', 'search_text']);
    // A model that calls it all the same is told it has no such tool.
    expect((result.output[0] as { text: string }).text).toBe(
      'level done after: level done after: Error: tool "subagent" is not available to this subagent (available: read_file, list_directory, search_text)',
    );
    const top = await harness.status(run.id);
    expect(top).toMatchObject({ depth: 1, children: [expect.any(String)] });
    const child = await harness.status(top.children[0]!);
    expect(child).toMatchObject({ depth: 2, parentRunId: run.id, children: [] });
    const history = await harness.temporal.client.workflow.getHandle(run.id).fetchHistory();
    const activities = history.events!.flatMap((e) =>
      e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType!.name] : [],
    );
    expect(activities).toEqual(['subagentModelCall', 'subagent', 'subagentModelCall']);
    await run.dispose();
  });

  it("offers its model no delegation tool whose own maxDepth refuses every call at the run's depth", async () => {
    const offered: string[][] = [];
    harness.fake.setHandler((request) => {
      offered.push((request.body.tools as { function: { name: string } }[]).map((tool) => tool.function.name));
      return textReply('done alone');
    });
    const run = harness.start('cappedTool', { prompt: text('delegate if you can'), parent });
    expect((await run.result).output).toEqual(text('done alone'));
    expect(offered).toEqual([['read_file', 'list_directory', 'search_text']]);
    await run.dispose();
  });
});

describe('inside LLM children, forking', () => {
  it("seeds a fork started by an LLM child's delegation tool with the child's completed turns, its own seed included, never the turn in flight", async () => {
    // Before, the nested fork got the prompt alone, while the tool told the model it inherits
    // this conversation's completed turns.
    const asked: { role: string; content: string | null }[][] = [];
    harness.fake.setHandler((request) => {
      const messages = request.body.messages as { role: string; content: string | null }[];
      const last = messages.at(-1)!;
      if (last.role === 'tool') return textReply(`caller got: ${last.content}`);
      if (last.content === 'first question') return textReply('first answer');
      if (last.content === 'now fork') {
        return toolCallReply([{ name: 'subagent_fork', arguments: args('forked task') }], { text: 'forking' });
      }
      asked.push(messages.slice(1));
      return textReply('forked answer');
    });
    const log = [
      { type: 'user/message', data: { content: text('parent question') } },
      { type: 'assistant/message', data: { content: text('parent answer') } },
      { type: 'turn/end', data: { reason: { kind: 'completed' } } },
    ];
    const run = harness.start('fork', {
      prompt: text('first question'),
      parent: { id: 'parent-agent', session: { header: { id: 'parent-session' }, events: log } },
    });
    expect(await run.result).toEqual({ output: text('first answer'), stopReason: 'completed' });
    const resumed = run.resume!(text('now fork'));
    expect(await resumed.result).toEqual({ output: text('caller got: forked answer'), stopReason: 'completed' });
    expect(asked.map((messages) => messages.map((m) => `${m.role}:${m.content ?? ''}`))).toEqual([
      [
        'user:parent question',
        'assistant:parent answer',
        'user:first question',
        'assistant:first answer',
        'user:forked task',
      ],
    ]);
    const { children } = await harness.status(run.id);
    expect(await harness.status(children[0]!)).toMatchObject({ seedLength: 4, parentRunId: run.id });
    await resumed.dispose();
  });

  it("seeds a fork that a turn-based run delegates to (context.delegate) with the run's completed turns, never the turn in flight", async () => {
    // Before, the nested fork got the prompt alone: the turn's delegate handed down no session log.
    const asked: { role: string; content: string | null }[][] = [];
    harness.fake.setHandler((request) => {
      asked.push((request.body.messages as { role: string; content: string | null }[]).slice(1));
      return textReply('forked answer');
    });
    const run = harness.start('scripted', {
      prompt: text('first question'),
      parent,
      agentOptions: {
        script: [
          { reply: 'first answer' },
          { delegate: { provider: forkName, prompt: 'forked task' }, reply: 'caller got: {child}' },
        ] as never,
      },
    });
    expect(await run.result).toEqual({ output: text('first answer'), stopReason: 'completed' });
    const resumed = run.resume!(text('now fork'));
    expect(await resumed.result).toEqual({ output: text('caller got: forked answer'), stopReason: 'completed' });
    expect(asked.map((messages) => messages.map((m) => `${m.role}:${m.content ?? ''}`))).toEqual([
      ['user:first question', 'assistant:first answer', 'user:forked task'],
    ]);
    await resumed.dispose();
  });
});

describe("the delegation tools' wording follows the provider", () => {
  const parentLog = [
    { type: 'user/message', data: { content: text('parent question') } },
    { type: 'assistant/message', data: { content: text('parent answer') } },
    { type: 'turn/end', data: { reason: { kind: 'completed' } } },
  ];

  it.each([
    ['the worker hosts', (own: string) => own, () => ({})],
    ['the service it delegates through knows', () => scripted.name, () => ({ subagents: harness.service })],
  ] as const)(
    'refuses a delegation tool made with inheritsParentContext: true for a provider %s not to inherit, with INVALID_CONFIG naming the tool and both providers (the model was told its child sees the conversation, which it never did)',
    async (_case, target, options) => {
      const name = uniqueName('false-fork');
      const provider = createSpawnProvider({
        name,
        endpoint: { baseURL: harness.fake.baseURL, model: 'fake-model' },
        tools: [createDelegationTool({ provider: target(name), name: 'subagent_fork', inheritsParentContext: true })],
      });
      const outcome = await workerOutcome([provider], options());
      expect(outcome).toMatchObject({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining(
          `provider "${name}" has a delegation tool "subagent_fork" made with inheritsParentContext: true, but provider "${target(name)}" does not inherit its parent's context`,
        ),
      });
    },
  );

  it("refuses a delegation tool for a provider the worker's own service does not know with INVALID_CONFIG listing those it knows (every call failed NO_PROVIDER)", async () => {
    const name = uniqueName('lost-delegation');
    const provider = createSpawnProvider({
      name,
      endpoint: { baseURL: harness.fake.baseURL, model: 'fake-model' },
      tools: [createDelegationTool({ provider: 'nobody-hosts-this' })],
    });
    const outcome = await workerOutcome([provider]);
    expect(outcome).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining(
        `provider "${name}" has a delegation tool "subagent" for provider "nobody-hosts-this", which the worker's own service does not know, so every call would fail (it knows: "${name}")`,
      ),
    });
    // With a service of its own, a provider may be registered with it later: the worker starts.
    const stop = await startWorker(harness.temporal, [provider], { subagents: harness.service });
    await stop();
  });

  it("gives a delegation tool made without inheritsParentContext a fork's wording, and seeds the fork, when the worker knows the provider inherits (it told the model the fork does not see the conversation, and handed nothing down)", async () => {
    const asked: string[][] = [];
    const described: string[] = [];
    harness.fake.setHandler((request) => {
      const messages = request.body.messages as { role: string; content: string | null }[];
      const last = messages.at(-1)!;
      if (last.role === 'tool') return textReply(`caller got: ${last.content}`);
      if (last.content === 'fork now') {
        const tools = request.body.tools as { function: { name: string; description: string } }[];
        described.push(tools.find((tool) => tool.function.name === 'subagent_fork')!.function.description);
        return toolCallReply([{ name: 'subagent_fork', arguments: args('forked task') }]);
      }
      asked.push(messages.slice(1).map((m) => `${m.role}:${m.content ?? ''}`));
      return textReply('forked answer');
    });
    const run = harness.start('bareFork', {
      prompt: text('fork now'),
      parent: { id: 'parent-agent', session: { header: { id: 'parent-session' }, events: parentLog } },
    });
    expect(await run.result).toEqual({ output: text('caller got: forked answer'), stopReason: 'completed' });
    expect(described).toHaveLength(1);
    expect(described[0]).toContain('INHERITS this conversation');
    expect(asked).toEqual([['user:parent question', 'assistant:parent answer', 'user:forked task']]);
    await run.dispose();
  });

  it("tells the model, with the answer, that a fork's child worked from the prompt alone when the calling agent handed no conversation log, or the provider was registered again as one that does not inherit (the wording claimed it inherits; a log is kept silent)", async () => {
    const tool = createSubagentTool(harness.service, {
      provider: forkLike.name,
      name: 'subagent_fork',
      agentOptions: { script: [{ reply: 'saw: {conversation}' }] as never },
    });
    expect(await tool.execute(args('x'), { parent: { id: 'no-log' } })).toEqual({
      isError: false,
      content: [...text('saw: '), ...text(`\n\n${UNSEEDED_NOTICE}`)],
    });
    const withLog = { id: 'logged', session: { header: { id: 'logged-session' }, events: parentLog } };
    expect(await tool.execute(args('x'), { parent: withLog })).toEqual({
      isError: false,
      content: text('saw: parent question'),
    });
    // A provider registered again, since the tool was made, as one that does not inherit.
    const service = newService(harness.temporal);
    const unregister = service.registerProvider(forkLike);
    const stale = createSubagentTool(service, {
      provider: forkLike.name,
      agentOptions: { script: [{ reply: 'saw: {conversation}' }] as never },
    });
    unregister();
    service.registerProvider({ ...forkLike, inheritsParentContext: false });
    expect(await stale.execute(args('x'), { parent: withLog })).toEqual({
      isError: false,
      content: [...text('saw: '), ...text(`\n\n${UNSEEDED_NOTICE}`)],
    });
    // In the background the notice comes with the run id: the answer is collected elsewhere.
    const background = createSubagentTool(harness.service, { provider: forkLike.name, background: true });
    const started = await background.execute(args('x'), { parent: { id: 'no-log' } });
    expect(started.content.at(-1)).toEqual({ type: 'text', text: `\n\n${UNSEEDED_NOTICE}` });
    const runId = /Started subagent run (\S+)\./.exec((started.content[0] as { text: string }).text)![1]!;
    expect(await createSubagentResultTool(harness.service).execute({ run_id: runId }, {})).toEqual({
      isError: false,
      content: text('scripted reply to: x'),
    });
  });
});

describe('inside LLM children, forking, bounded', () => {
  // A worker that takes payloads of 64 KiB, and so does its own service, the one nested runs start through.
  const boundName = uniqueName('bound-fork');
  const started: { temporal?: TestTemporal; stop?: () => Promise<void> } = {};
  let service: ReturnType<typeof newService>;
  beforeAll(async () => {
    const temporal = (started.temporal = await connectTestTemporal());
    const fork = createForkProvider({
      name: boundName,
      endpoint: { baseURL: harness.fake.baseURL, model: 'fake-model' },
      tools: [createDelegationTool({ provider: boundName, name: 'subagent_fork', inheritsParentContext: true })],
    });
    started.stop = await startWorker(temporal, [fork], { maxPayloadBytes: 64 * 1024 });
    service = newService(temporal);
    service.registerProvider(fork);
  });
  afterAll(async () => {
    await started.stop?.();
    await started.temporal?.close();
  });

  it('refuses a nested fork whose completed turns would not fit one payload as the top-level start does: an error result for the model, no run started, the caller goes on', async () => {
    harness.fake.setHandler((request) => {
      const last = request.body.messages.at(-1) as { role: string; content: string };
      if (last.role === 'tool') return textReply(`caller got: ${last.content.slice(0, 200)}`);
      if (last.content === 'fork now') {
        return toolCallReply([{ name: 'subagent_fork', arguments: args('forked task') }]);
      }
      return textReply('forked answer');
    });
    const log = [
      { type: 'user/message', data: { content: text('parent question') } },
      { type: 'assistant/message', data: { content: text('x'.repeat(100 * 1024)) } },
      { type: 'turn/end', data: { reason: { kind: 'completed' } } },
    ];
    const run = service.start(boundName, {
      prompt: text('fork now'),
      parent: { id: 'parent-agent', session: { header: { id: 'parent-session' }, events: log } },
    });
    const result = await run.result;
    expect(result.stopReason).toBe('completed');
    // The model reads the refusal the top-level start throws (PAYLOAD_TOO_LARGE) as the tool's error.
    const answer = (result.output[0] as { text: string }).text;
    expect(answer).toMatch(/^caller got: Error: the start request is \d+ bytes, over the 65536-byte payload limit/);
    expect(await harness.status(run.id)).toMatchObject({ children: [] });
    await run.dispose();
  });
});

describe('inside LLM children, with an endpoint that reuses call ids', () => {
  it('starts one run per tool call even when two steps give their calls the same id', async () => {
    harness.fake.setHandler((request) => {
      const messages = request.body.messages as { role: string; content: string | null }[];
      const task = messages.find((message) => message.role === 'user')!.content!;
      if (task !== 'run two errands') return textReply(`did: ${task}`);
      const results = messages.filter((message) => message.role === 'tool').map((message) => message.content);
      // Index-style ids: every step's first call is call_0.
      if (results.length < 2) {
        const errand = results.length === 0 ? 'first errand' : 'second errand';
        return toolCallReply([{ id: 'call_0', name: 'subagent', arguments: args(errand) }]);
      }
      return textReply(results.join(' / '));
    });
    const run = harness.service.start(spawnName, { prompt: text('run two errands'), parent, maxDepth: 2 });
    expect(await run.result).toEqual({
      output: text('did: first errand / did: second errand'),
      stopReason: 'completed',
    });
    const status = await harness.status(run.id);
    expect(new Set(status.children).size).toBe(2);
    await run.dispose();
  });
});

describe('background mode', () => {
  it('returns the run id at once; the answer is collected after the parent process was killed', async () => {
    let printed = '';
    const parentProcess = await spawnReadyProcess(
      fixture('background-parent'),
      { PROVIDER_NAME: scripted.name },
      (line) => {
        if (line.startsWith('{')) printed = line;
      },
    );
    const started = JSON.parse(printed) as { isError: boolean; content: { text: string }[] };
    await parentProcess.kill('SIGKILL');
    expect(started.isError).toBe(false);
    const runId = /run_id "([^"]+)"/.exec(started.content[0]!.text)![1]!;

    const collect = createSubagentResultTool(harness.service);
    expect(collect.name).toBe('subagent_result');
    expect(await collect.execute({ run_id: runId }, {})).toEqual({
      isError: false,
      content: text('background answer to: index the repo'),
    });
    expect((await harness.closed(runId)).closedBy).toBe('disposed');
  });

  /**
   * Has the fake model answer a tool's result with `caller got: <the result>` and any other last
   * message with `reply(it)`; gives the `subagent` tool's description by the names of the tools
   * each call offered, as the calls come.
   */
  function subagentDescriptions(reply: (last: string | null) => ReturnType<typeof textReply>): Map<string, string> {
    const described = new Map<string, string>();
    harness.fake.setHandler((request) => {
      const messages = request.body.messages as { role: string; content: string | null }[];
      const last = messages.at(-1)!;
      if (last.role === 'tool') return textReply(`caller got: ${last.content}`);
      const tools = request.body.tools as { function: { name: string; description: string } }[];
      described.set(
        tools.map((tool) => tool.function.name).join(','),
        tools.find((tool) => tool.function.name === 'subagent')!.function.description,
      );
      return reply(last.content);
    });
    return described;
  }

  it("tells an LLM child's model that a background delegation's answer does not come back when it has no subagent_result tool (it was told to collect it with a tool it did not have)", async () => {
    const described = subagentDescriptions((last) =>
      last === 'go aside'
        ? toolCallReply([{ name: 'subagent', arguments: args('on the side') }])
        : textReply('nothing to do'),
    );
    const run = harness.start('backgroundOnly', { prompt: text('go aside'), parent });
    const { output } = await run.result;
    expect((output[0] as { text: string }).text).toMatch(
      /^caller got: Started subagent run \S+\. It works on by itself; its answer does not come back to you\.$/,
    );
    expect(described.get('subagent')).toContain('its answer does not come back to you');
    expect(described.get('subagent')).not.toContain('subagent_result');
    await run.dispose();
    // With the tool beside it, the model is told to collect the answer with it, as before.
    const collected = harness.start('backgroundCollected', { prompt: text('just answer'), parent });
    expect((await collected.result).output).toEqual(text('nothing to do'));
    expect(described.get('subagent,subagent_result')).toContain('collect the final answer later with subagent_result');
    await collected.dispose();
  });

  it("tells an LLM child's model that a background delegation's answer does not come back when the run's toolFilter denies subagent_result (it was told to collect it with a tool it could not call)", async () => {
    const described = subagentDescriptions((last) =>
      last === 'go aside'
        ? toolCallReply([{ name: 'subagent', arguments: args('on the side') }])
        : textReply('nothing to do'),
    );
    const toolFilter = { deny: ['subagent_result'] };
    const run = harness.start('backgroundCollected', { prompt: text('go aside'), parent, toolFilter });
    expect(textOf((await run.result).output)).toMatch(
      /^caller got: Started subagent run \S+\. It works on by itself; its answer does not come back to you\.$/,
    );
    expect(described.get('subagent')).toContain('its answer does not come back to you');
    expect(described.get('subagent')).not.toContain('subagent_result');
    await run.dispose();
  });

  it("tells an LLM child's model to collect a background delegation's answer only with the project's own subagent_result tool, by the name it has (a tool of that name that does something else passed, and a renamed one was named subagent_result)", async () => {
    const described = subagentDescriptions(() => toolCallReply([{ name: 'subagent', arguments: args('on the side') }]));
    const impostor = harness.start('backgroundImpostor', { prompt: text('go aside'), parent });
    expect(textOf((await impostor.result).output)).toMatch(
      /^caller got: Started subagent run \S+\. It works on by itself; its answer does not come back to you\.$/,
    );
    expect(described.get('subagent,subagent_result')).toContain('its answer does not come back to you');
    expect(described.get('subagent,subagent_result')).not.toContain('collect');
    await impostor.dispose();
    const renamed = harness.start('backgroundRenamed', { prompt: text('go aside'), parent });
    expect(textOf((await renamed.result).output)).toMatch(
      /^caller got: Started subagent run (\S+)\. Call collect_subagent with run_id "\1" to collect its answer\.$/,
    );
    expect(described.get('subagent,collect_subagent')).toContain(
      'collect the final answer later with collect_subagent.',
    );
    expect(described.get('subagent,collect_subagent')).not.toContain('subagent_result');
    await renamed.dispose();
  });

  it('answers a run_id that names a workflow of another type with an error at once, and leaves that workflow alone', async () => {
    // The model picks the id: one of another workflow (no worker runs it) kept the step waiting forever.
    const runId = `subagent-${scripted.name}:${uniqueName('not-a-run')}`;
    const other = await harness.temporal.client.workflow.start('someOtherWorkflow', {
      workflowId: runId,
      taskQueue: uniqueName('nobody-polls'),
      args: ['not a run input'],
    });
    const collect = createSubagentResultTool(harness.service);
    const answer = await collect.execute({ run_id: runId }, {});
    expect(answer.isError).toBe(true);
    expect((answer.content[0] as { text: string }).text).toContain('it is a workflow of type "someOtherWorkflow"');
    expect((await other.describe()).status.name).toBe('RUNNING');
    await other.terminate('test over');
  });

  it('stops waiting, without cancelling the run, when the collecting step aborts', async () => {
    const gates = turnGates();
    const tool = scriptedTool([{ waitFor: gates.waitFor, reply: 'late answer' }], { background: true });
    const started = await tool.execute(args('slow'), { parent });
    const runId = /run_id "([^"]+)"/.exec((started.content[0] as { text: string }).text)![1]!;
    const controller = new AbortController();
    const collect = createSubagentResultTool(harness.service);
    const waiting = collect.execute({ run_id: runId }, { signal: controller.signal });
    controller.abort();
    expect((await waiting).isError).toBe(true);
    gates.open(runId, 0); // the run was held until the first collection had given up
    expect(await collect.execute({ run_id: runId }, {})).toEqual({ isError: false, content: text('late answer') });
  });
});
