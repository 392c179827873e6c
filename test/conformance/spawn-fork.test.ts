// Seam §7.4-§7.7 (and §5.2, §5.3, §5.6): the spawn and fork providers over real HTTP to a fake
// OpenAI-compatible server (a test double), with the real Temporal server: the agent loop, tools
// inline in the model call or as activities, filters, path confinement, structured capture through the real tool, fork seeding,
// cancellation of the HTTP call, retries and failures. Clause tests are named after their clause.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_SYSTEM_PROMPT,
  STRUCTURED_OUTPUT_INSTRUCTION,
  builtinFileTools,
  createForkProvider,
  createSpawnProvider,
} from '../../src/worker';
import { exportAudit } from '../../src/audit';
import { runStarted, type SubagentRun, type SubagentRunEndInfo, type SubagentSessionEvent } from '../../src';
import { errorReply, hangReply, refusalReply, textReply, toolCallReply } from '../../src/testing';
import { toolResult } from '../../src/seam/tool';
import { NO_WORKING_DIRECTORY_MESSAGE } from '../../src/tools';
import { runContextQuery, statusQuery } from '../../workflows/definitions';
import { fakeModelHarness } from '../helpers/fake-model';
import { eventually, newService, text, uniqueName } from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-llm-'));
writeFileSync(join(cwd, 'notes.txt'), 'the answer is 42\n');
mkdirSync(join(cwd, 'src'));
writeFileSync(join(cwd, 'src', 'main.ts'), 'export const answer = 42;\n');
const outside = mkdtempSync(join(tmpdir(), 'subagent-outside-'));
writeFileSync(join(outside, 'secret.txt'), 'do not read\n');

const settings = { retry: { initialInterval: '100 ms' }, maxStepsPerTurn: 250 };
const harness = fakeModelHarness(
  (fakeEndpoint) => {
    const endpoint = { ...fakeEndpoint, apiKey: 'test-key' };
    return {
      spawn: createSpawnProvider({ name: uniqueName('spawn'), endpoint, runSettings: settings }),
      fork: createForkProvider({ name: uniqueName('fork'), endpoint, runSettings: settings }),
      /** A spawn child whose file tools are not inline: each call is an activity of its own. */
      activityTools: createSpawnProvider({
        name: uniqueName('activity-tools'),
        endpoint,
        runSettings: settings,
        tools: [
          ...builtinFileTools().map((tool) => ({ ...tool, inline: false })),
          {
            name: 'explode',
            description: 'Always fails.',
            parameters: { type: 'object', properties: {} },
            inline: true,
            execute: () => Promise.reject(new Error('boom')),
          },
        ],
      }),
      /** A spawn child given no tools at all. */
      toolless: createSpawnProvider({ name: uniqueName('toolless'), endpoint, runSettings: settings, tools: [] }),
      /** A spawn child with tools of its own, one named read_file that is not the built-in one. */
      ownTools: createSpawnProvider({
        name: uniqueName('own-tools'),
        endpoint,
        runSettings: settings,
        tools: [
          {
            name: 'read_file',
            description: 'Read any file on the host, by its absolute path.',
            parameters: { type: 'object', properties: { path: { type: 'string' } } },
            execute: () => Promise.resolve(toolResult('')),
          },
        ],
      }),
    };
  },
  { worker: { heartbeatIntervalMs: 200 } },
);

const parent = { id: 'parent', session: { header: { id: 'parent-session', cwd } } };
const startSpawn = (prompt: string, extra: object = {}) =>
  harness.start('spawn', { prompt: text(prompt), parent, ...extra });
/** Requests this test made: the fake records every request in order. */
function mark() {
  const from = harness.fake.requests.length;
  return () => harness.fake.requests.slice(from);
}
const messagesOf = (index: number, since: () => typeof harness.fake.requests) =>
  since()[index]!.body.messages as { role: string; content: string | null; tool_call_id?: string }[];
const activityTypes = async (run: SubagentRun) => {
  const history = await harness.temporal.client.workflow.getHandle(run.id).fetchHistory();
  return history.events!.flatMap((event) =>
    event.activityTaskScheduledEventAttributes ? [event.activityTaskScheduledEventAttributes.activityType!.name!] : [],
  );
};

describe('§7.5 spawn', () => {
  it('§7.5 a fresh child completes with its text; its request holds the system prompt, its own prompt and the file tools, and no structured_output', async () => {
    const since = mark();
    harness.fake.enqueue(textReply('hello back', { usage: { prompt: 12, completion: 3 } }));
    const run = startSpawn('say hello');
    expect(await run.result).toEqual({ output: text('hello back'), stopReason: 'completed' });
    const [request] = since();
    expect(request!.body.model).toBe('fake-model');
    expect(request!.headers.authorization).toBe('Bearer test-key');
    expect(request!.body.messages).toEqual([
      { role: 'system', content: expect.stringContaining('You are a subagent') },
      { role: 'user', content: 'say hello' },
    ]);
    expect(request!.body.messages[0].content).not.toContain(STRUCTURED_OUTPUT_INSTRUCTION);
    expect(request!.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual([
      'read_file',
      'list_directory',
      'search_text',
    ]);
    expect(await harness.status(run.id)).toMatchObject({
      usage: { promptTokens: 12, completionTokens: 3 },
    });
    await run.dispose();
  });

  it('refuses at start with INVALID_CONFIG when no model is named anywhere, and starts once the request names one', async () => {
    const unnamed = createSpawnProvider({ name: uniqueName('no-model'), endpoint: { baseURL: harness.fake.baseURL } });
    const bare = newService(harness.temporal);
    bare.registerProvider(unnamed);
    expect(() => bare.start(unnamed.name, { prompt: text('x'), parent })).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining(
          "set SUBAGENT_MODEL (or its endpoint's model), the request's agentOptions.model, or the parent's options.model",
        ),
      }),
    );
    // No worker hosts it: what counts is that the start goes through; the runs are then removed.
    const named = bare.start(unnamed.name, { prompt: text('x'), parent, agentOptions: { model: 'm' } });
    const fromParent = bare.start(unnamed.name, { prompt: text('x'), parent: { ...parent, options: { model: 'p' } } });
    for (const run of [named, fromParent]) {
      run.result.catch(() => undefined);
      await runStarted(run);
      await harness.temporal.client.workflow.getHandle(run.id).terminate('only the start was under test');
    }
  });

  it("§7.5 the child is a session of its own whose parent session is the parent's, in the parent's cwd, at depth parent + 1", async () => {
    harness.fake.enqueue(textReply('own session'));
    const run = startSpawn('who am I');
    await run.result;
    const { request } = await harness.temporal.client.workflow.getHandle(run.id).query(runContextQuery);
    expect(run.id).toMatch(new RegExp(`^subagent-${harness.providers.spawn.name}:`));
    expect(request.parent).toMatchObject({ agentId: 'parent', sessionId: 'parent-session', cwd, depth: 0 });
    expect(request.depth).toBe(1);
    await run.dispose();
  });

  it('§7.5 maxDepth 0 makes start throw SubagentDepthError', () => {
    expect(() => startSpawn('too deep', { maxDepth: 0 })).toThrow(
      expect.objectContaining({ code: 'DEPTH_EXCEEDED', attemptedDepth: 1, maxDepth: 0 }),
    );
  });

  it('§7.5 an already-aborted signal, and a synchronous cancel right after start, settle aborted with output [] and never call the model', async () => {
    const since = mark();
    const controller = new AbortController();
    controller.abort();
    const preAborted = startSpawn('never', { signal: controller.signal });
    const cancelled = startSpawn('never either');
    cancelled.cancel();
    expect(await preAborted.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(await cancelled.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(since()).toEqual([]);
    await Promise.all([preAborted.dispose(), cancelled.dispose()]);
  });

  it('§7.5 aborting the request signal while the model call hangs settles aborted', async () => {
    const since = mark();
    harness.fake.enqueue(hangReply());
    const controller = new AbortController();
    const run = startSpawn('hang', { signal: controller.signal });
    await waitFor(() => since().length === 1);
    controller.abort();
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(await since()[0]!.done).toBe('aborted');
    await run.dispose();
  });

  it("§7.5 spawn and fork declare outputSchema, depthLimit and toolFilter (the seam's spawn has no toolFilter; these children filter their tools)", () => {
    const all = { outputSchema: true, depthLimit: true, toolFilter: true };
    const { spawn, fork } = harness.providers;
    expect([spawn.capabilities, fork.capabilities]).toEqual([all, all]);
    expect([spawn.inheritsParentContext, fork.inheritsParentContext]).toEqual([false, true]);
  });

  it('§7.5 request.agentOptions.model is used over the configured model, and usage is reported in subagent/end', async () => {
    const since = mark();
    const ends: SubagentRunEndInfo[] = [];
    const off = harness.service.on('subagent/end', (info) => ends.push(info));
    harness.fake.enqueue(textReply('ok', { usage: { prompt: 7, completion: 2 } }));
    const run = startSpawn('which model?', { agentOptions: { model: 'deepseek-chat' } });
    await run.result;
    await Promise.resolve();
    expect(since()[0]!.body.model).toBe('deepseek-chat');
    expect(ends.find((info) => info.id === run.id)?.usage).toEqual({ promptTokens: 7, completionTokens: 2 });
    off();
    await run.dispose();
  });

  it('runs an inline tool (the built-in read_file) inside the model call, hands its result to the next call, and records the call in the audit and the events', async () => {
    const since = mark();
    harness.fake.enqueue(
      toolCallReply([{ id: 'call-read', name: 'read_file', arguments: { path: 'notes.txt' } }]),
      textReply('it says 42'),
    );
    const run = startSpawn('what do the notes say?');
    expect(await run.result).toEqual({ output: text('it says 42'), stopReason: 'completed' });
    expect(messagesOf(1, since).at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'call-read',
      content: expect.stringContaining('the answer is 42'),
    });
    // No activity of its own: one model call answered it, the next read its result.
    expect(await activityTypes(run)).toEqual(['subagentModelCall', 'subagentModelCall']);
    const audit = await exportAudit(harness.temporal.client, run.id);
    expect(audit.filter((record) => record.type === 'tool.call').map((record) => record.data)).toEqual([
      {
        tool: 'read_file',
        callId: 'call-read',
        arguments: JSON.stringify({ path: 'notes.txt' }),
        result: expect.objectContaining({ isError: false, content: [expect.objectContaining({ type: 'text' })] }),
        inline: true,
        temporalRunId: expect.any(String),
      },
    ]);
    const events: string[] = [];
    for await (const event of run.events!({ from: 0 })) {
      if (event.type === 'tool-call-start' || event.type === 'tool-call-end') {
        events.push(`${event.type} ${event.tool}`);
      }
      if (event.type === 'settled') break;
    }
    expect(events).toEqual(['tool-call-start read_file', 'tool-call-end read_file']);
    await run.dispose();
  });

  it('runs a tool that is not inline as an activity named after the tool and hands its result to the next model call', async () => {
    const since = mark();
    harness.fake.enqueue(
      toolCallReply([{ id: 'call-read', name: 'read_file', arguments: { path: 'notes.txt' } }]),
      textReply('it says 42'),
    );
    const run = harness.start('activityTools', {
      prompt: text('what do the notes say?'),
      parent,
    });
    expect(await run.result).toEqual({ output: text('it says 42'), stopReason: 'completed' });
    const messages = messagesOf(1, since);
    expect(messages.at(-2)).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: 'call-read', function: { name: 'read_file' } }],
    });
    expect(messages.at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'call-read',
      content: expect.stringContaining('the answer is 42'),
    });
    expect(await activityTypes(run)).toEqual(['subagentModelCall', 'read_file', 'subagentModelCall']);
    await run.dispose();
  });

  it('answers an inline tool that rejects with an error result the model reads, and goes on', async () => {
    const since = mark();
    harness.fake.enqueue(toolCallReply([{ id: 'call-x', name: 'explode', arguments: {} }]), textReply('it broke'));
    const run = harness.start('activityTools', { prompt: text('try it'), parent });
    expect(await run.result).toEqual({ output: text('it broke'), stopReason: 'completed' });
    expect(messagesOf(1, since).at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'call-x',
      content: 'Error: tool explode failed: boom',
    });
    expect(await activityTypes(run)).toEqual(['subagentModelCall', 'subagentModelCall']);
    await run.dispose();
  });

  it('refuses a path that leaves the working directory', async () => {
    const since = mark();
    harness.fake.enqueue(
      toolCallReply([{ name: 'read_file', arguments: { path: join('..', outside.split('/').pop()!, 'secret.txt') } }]),
      textReply('refused'),
    );
    const run = startSpawn('read a secret');
    await run.result;
    const toolMessage = messagesOf(1, since).at(-1)!;
    expect(toolMessage.content).toContain('leaves the working directory');
    expect(toolMessage.content).not.toContain('do not read');
    await run.dispose();
  });

  it('§5.2 toolFilter narrows the tools: allow keeps only the named ones, deny wins, and a filtered tool is refused', async () => {
    const since = mark();
    harness.fake.enqueue(textReply('allowed'));
    const allowed = startSpawn('x', { toolFilter: { allow: ['read_file', 'search_text'], deny: ['search_text'] } });
    await allowed.result;
    expect(since()[0]!.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual([
      'read_file',
    ]);

    harness.fake.enqueue(
      toolCallReply([{ id: 'call-ls', name: 'list_directory', arguments: {} }]),
      textReply('denied'),
    );
    const denied = startSpawn('y', { toolFilter: { deny: ['list_directory'] } });
    await denied.result;
    expect(since()[1]!.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual([
      'read_file',
      'search_text',
    ]);
    expect(messagesOf(2, since).at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'call-ls',
      content: 'Error: tool "list_directory" is not available to this subagent (available: read_file, search_text)',
    });
    expect(await activityTypes(denied)).toEqual(['subagentModelCall', 'subagentModelCall']);
    await Promise.all([allowed.dispose(), denied.dispose()]);
  });

  it('tells the child of the working directory only through the built-in file tools it is offered: a child of no tools, of a read_file of its own, or whose toolFilter leaves them out is told nothing of it (it was told its files were confined there)', async () => {
    const since = mark();
    const systemPrompt = async (run: SubagentRun) => {
      await run.result;
      await run.dispose();
      return (since().at(-1)!.body.messages as { role: string; content: string }[])[0]!;
    };
    harness.fake.enqueue(...['a', 'b', 'c', 'd', 'e'].map((reply) => textReply(reply)));
    const toolless = await systemPrompt(harness.start('toolless', { prompt: text('no tools'), parent }));
    expect(toolless.content).not.toMatch(/working directory|confined|files|tools/);
    expect(toolless.content).toBe(
      'You are a subagent: another agent delegated a task to you. Work on it, then answer with a concise, complete result.',
    );
    const own = await systemPrompt(harness.start('ownTools', { prompt: text('tools of its own'), parent }));
    expect(own.content).toContain('Work on it with the tools you have');
    expect(own.content).not.toMatch(/working directory|confined|files/);
    const filtered = await systemPrompt(
      startSpawn('no file tools', { toolFilter: { deny: ['read_file', 'list_directory', 'search_text'] } }),
    );
    expect(filtered.content).toBe(toolless.content);
    const one = await systemPrompt(startSpawn('read_file alone', { toolFilter: { allow: ['read_file'] } }));
    expect(one.content).toContain('read_file reaches only the files inside the working directory.');
    expect(one.content).not.toMatch(/list_directory|search_text/);
    // With all of them, the default prompt as before, naming them.
    const offered = await systemPrompt(startSpawn('all the file tools'));
    expect(offered).toEqual({ role: 'system', content: DEFAULT_SYSTEM_PROMPT });
    expect(offered.content).toContain(
      'read_file, list_directory and search_text reach only the files inside the working directory.',
    );
  });

  it('tells the child of a run without a working directory that its file tools are unavailable, as each of their calls answers (it was told its files were confined to the working directory)', async () => {
    const since = mark();
    harness.fake.enqueue(
      toolCallReply([{ id: 'call-read', name: 'read_file', arguments: { path: 'notes.txt' } }]),
      textReply('nothing to read'),
    );
    const run = harness.start('spawn', { prompt: text('read notes.txt'), parent: { id: 'no-cwd' } });
    expect(await run.result).toEqual({ output: text('nothing to read'), stopReason: 'completed' });
    const [system] = messagesOf(0, since);
    expect(system).toEqual({
      role: 'system',
      content: expect.stringContaining(
        'read_file, list_directory and search_text are unavailable: this run has no working directory.',
      ),
    });
    expect(system!.content).not.toContain('inside the working directory');
    expect(messagesOf(1, since).at(-1)).toMatchObject({ role: 'tool', content: NO_WORKING_DIRECTORY_MESSAGE });
    await run.dispose();
  });

  it('§5.2 a toolFilter naming a tool the provider does not have is UNKNOWN_TOOL at start', () => {
    expect(() => startSpawn('x', { toolFilter: { allow: ['rm_rf'] } })).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_TOOL', message: expect.stringContaining('"rm_rf"') }),
    );
  });

  it('§7.3 a spawn child is shown structured_output last with its schema, its system prompt ends with the instruction, and an invalid capture goes back to it', async () => {
    const since = mark();
    const schema = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'] };
    harness.fake.enqueue(
      toolCallReply([{ name: 'structured_output', arguments: { answer: 'forty-two' } }]),
      toolCallReply([
        { name: 'structured_output', arguments: { answer: 42 } },
        { name: 'read_file', arguments: { path: 'notes.txt' } },
      ]),
    );
    const run = startSpawn('answer as JSON', { outputSchema: schema });
    const result = await run.result;
    expect(result.structured).toEqual({ answer: 42 });
    expect(result.stopReason).toBe('completed');
    expect(since()).toHaveLength(2);
    const [first, second] = since();
    const tools = first!.body.tools as { function: { name: string; parameters: unknown } }[];
    expect(tools.at(-1)!.function).toMatchObject({ name: 'structured_output', parameters: schema });
    expect((first!.body.messages[0].content as string).endsWith(STRUCTURED_OUTPUT_INSTRUCTION)).toBe(true);
    expect(second!.body.messages.at(-1)).toMatchObject({
      role: 'tool',
      content: 'Error: invalid arguments: "value.answer" must be an integer',
    });
    // The capture ends the turn: the read_file call after it was denied, never run.
    expect(await activityTypes(run)).toEqual(['subagentModelCall', 'subagentModelCall']);
    await run.dispose();
  });

  it.each([
    ['refusal', refusalReply('I cannot help with that'), 'refusal'],
    ['max-tokens', textReply('cut', { finishReason: 'length' }), 'max-tokens'],
  ])('§7.5 and §5.6 a %s answer maps onto its stop reason', async (_case, reply, stopReason) => {
    harness.fake.enqueue(reply);
    const run = startSpawn('x');
    expect((await run.result).stopReason).toBe(stopReason);
    await run.dispose();
  });

  it('§7.5 run.cancel(reason) while running aborts the HTTP call (the server sees the connection close) and settles aborted', async () => {
    const since = mark();
    harness.fake.enqueue(hangReply());
    const run = startSpawn('take forever');
    await waitFor(() => since().length === 1);
    run.cancel('no longer needed');
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(await since()[0]!.done).toBe('aborted');
    await run.dispose();
  });

  it('§5.6 a model error is a stop reason, not a rejection: a 429 is retried after its Retry-After, a 400 ends error without a retry', async () => {
    const since = mark();
    harness.fake.enqueue(
      errorReply(429, 'slow down', { headers: { 'retry-after': '1' } }),
      textReply('after the wait'),
    );
    const started = Date.now();
    const throttled = startSpawn('x');
    expect(await throttled.result).toEqual({ output: text('after the wait'), stopReason: 'completed' });
    // The retry policy alone would wait 100 ms; the endpoint asked for a second.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    const [first, second] = since();
    expect(second).toBeDefined();
    expect(await first!.done).toBe('answered');

    harness.fake.enqueue(errorReply(400, 'bad request: unknown parameter'));
    const rejected = startSpawn('y');
    const result = await rejected.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('400');
    expect(result.diagnostic).toContain('bad request: unknown parameter');
    expect(since()).toHaveLength(3);
    await Promise.all([throttled.dispose(), rejected.dispose()]);
  });

  it('hands steering messages to the child before its next model call, in the same turn', async () => {
    const since = mark();
    // The first model call answers only once the message is queued: it is in flight meanwhile.
    let messageQueued!: () => void;
    const firstReply = new Promise<void>((resolve) => (messageQueued = resolve)).then(() =>
      toolCallReply([{ name: 'list_directory', arguments: {} }]),
    );
    harness.fake.enqueue(firstReply, textReply('steered'));
    const run = startSpawn('look around');
    await waitFor(() => since().length === 1);
    run.sendMessage!(text('only the src folder matters'));
    const handle = harness.temporal.client.workflow.getHandle(run.id);
    await eventually(async () => ((await handle.query(statusQuery)).pendingMessages === 1 ? true : undefined));
    messageQueued();
    expect(await run.result).toEqual({ output: text('steered'), stopReason: 'completed' });
    expect(
      messagesOf(1, since)
        .slice(-2)
        .map((message) => message.role),
    ).toEqual(['tool', 'user']);
    expect(messagesOf(1, since).at(-1)!.content).toBe('only the src folder matters');
    await run.dispose();
  });

  it('resumes with the whole conversation', async () => {
    const since = mark();
    harness.fake.enqueue(textReply('first answer'), textReply('second answer'));
    const run = startSpawn('first question');
    await run.result;
    const resumed = run.resume!(text('follow-up'));
    expect(await resumed.result).toEqual({ output: text('second answer'), stopReason: 'completed' });
    expect(messagesOf(1, since).slice(1)).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'follow-up' },
    ]);
    await resumed.dispose();
  });

  it('resumes after an answer with no text and no tool calls, sending it back as an empty string (OpenAI refuses content null without tool calls)', async () => {
    // Before, the empty answer went back as content null: OpenAI (and the fake, as it does)
    // answers 400, so every later call of the run failed and it ended error.
    const since = mark();
    harness.fake.enqueue(textReply(''), textReply('something'));
    const run = startSpawn('say nothing');
    expect(await run.result).toEqual({ output: [], stopReason: 'completed' });
    const resumed = run.resume!(text('now say something'));
    expect(await resumed.result).toEqual({ output: text('something'), stopReason: 'completed' });
    expect(messagesOf(1, since).slice(1)).toEqual([
      { role: 'user', content: 'say nothing' },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'now say something' },
    ]);
    await resumed.dispose();
  });
});

describe('§7.6 fork', () => {
  const message = (type: string, data: object): SubagentSessionEvent => ({ type, data });
  const events: SubagentSessionEvent[] = [
    message('user/message', { content: text('parent question one') }),
    message('assistant/message', {
      content: [
        ...text('checking'),
        { type: 'tool-call', id: 'p1', name: 'read_file', arguments: '{"path":"notes.txt"}' },
      ],
    }),
    message('tool/result', { callId: 'p1', content: text('the answer is 42'), isError: false }),
    message('assistant/message', { content: text('parent answer one') }),
    message('turn/end', { reason: { kind: 'completed' } }),
    message('user/message', { content: text('parent question two') }),
    message('assistant/message', { content: text('parent answer two') }),
    message('turn/end', { reason: { kind: 'completed' } }),
    // The turn in flight: its delegating tool call has no result yet.
    message('user/message', { content: text('in-flight question') }),
    message('assistant/message', { content: [{ type: 'tool-call', id: 'p2', name: 'subagent', arguments: '{}' }] }),
  ];

  it("§7.6 a seeded child sees the parent's completed turns, never the turn in flight, answers on its own, and its seedLength is the prefix", async () => {
    const since = mark();
    harness.fake.enqueue(textReply('forked answer'));
    const run = harness.start('fork', {
      prompt: text('continue from here'),
      parent: { ...parent, session: { ...parent.session, events } },
    });
    expect(await run.result).toEqual({ output: text('forked answer'), stopReason: 'completed' });
    const messages = messagesOf(0, since).slice(1);
    expect(messages.map((m) => `${m.role}:${m.content ?? ''}`)).toEqual([
      'user:parent question one',
      'assistant:checking',
      'tool:the answer is 42',
      'assistant:parent answer one',
      'user:parent question two',
      'assistant:parent answer two',
      'user:continue from here',
    ]);
    expect(await harness.status(run.id)).toMatchObject({ seedLength: 6 });
    await run.dispose();
  });

  it('seeds a fork from a log whose tool calls and results do not pair as a model endpoint takes them: a call with no result answered as an error, a result with no call (or a second one) left out', async () => {
    // A chat-completions endpoint refuses (400) a request where a tool message answers no call of
    // the assistant message just before it, or a call goes unanswered: before, such a seed (a
    // turn that ended while a tool ran, a stray result) failed every fork child's first call.
    const broken: SubagentSessionEvent[] = [
      message('user/message', { content: text('read two files') }),
      message('assistant/message', {
        content: [
          { type: 'tool-call', id: 'a1', name: 'read_file', arguments: '{"path":"notes.txt"}' },
          { type: 'tool-call', id: 'a2', name: 'read_file', arguments: '{"path":"src/main.ts"}' },
        ],
      }),
      message('tool/result', { callId: 'a2', content: text('export const answer = 42;'), isError: false }),
      message('tool/result', { callId: 'a2', content: text('a second result for a2'), isError: false }),
      message('turn/end', { reason: { kind: 'aborted' } }),
      message('tool/result', { callId: 'ghost', content: text('a result for no call'), isError: false }),
      message('user/message', { content: text('go on') }),
      message('assistant/message', { content: text('done') }),
      message('turn/end', { reason: { kind: 'completed' } }),
    ];
    const since = mark();
    harness.fake.enqueue(textReply('forked'));
    const run = harness.start('fork', {
      prompt: text('continue'),
      parent: { ...parent, session: { ...parent.session, events: broken } },
    });
    expect(await run.result).toEqual({ output: text('forked'), stopReason: 'completed' });
    const messages = since()[0]!.body.messages as {
      role: string;
      content: string | null;
      tool_call_id?: string;
      tool_calls?: { id: string }[];
    }[];
    expect(
      messages.slice(1).map((m) => [m.role, m.tool_call_id ?? m.tool_calls?.map((call) => call.id) ?? m.content]),
    ).toEqual([
      ['user', 'read two files'],
      ['assistant', ['a1', 'a2']],
      ['tool', 'a1'],
      ['tool', 'a2'],
      ['user', 'go on'],
      ['assistant', 'done'],
      ['user', 'continue'],
    ]);
    expect(messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([
      expect.stringContaining('no result'),
      'export const answer = 42;',
    ]);
    await run.dispose();
  });

  it('§7.6 with an empty prefix the fork is unseeded; §7.5 spawn never receives the parent log', async () => {
    const since = mark();
    harness.fake.enqueue(textReply('fresh'), textReply('spawned'));
    const unseeded = harness.start('fork', {
      prompt: text('alone'),
      parent: { ...parent, session: { ...parent.session, events: events.slice(8) } },
    });
    await unseeded.result;
    const spawned = harness.start('spawn', {
      prompt: text('spawned alone'),
      parent: { ...parent, session: { ...parent.session, events } },
    });
    await spawned.result;
    expect(messagesOf(0, since).slice(1)).toEqual([{ role: 'user', content: 'alone' }]);
    expect(messagesOf(1, since).slice(1)).toEqual([{ role: 'user', content: 'spawned alone' }]);
    await Promise.all([unseeded.dispose(), spawned.dispose()]);
  });
});

describe('§7.6 and §7.7 fork beside spawn', () => {
  const completedTurn: SubagentSessionEvent[] = [
    { type: 'user/message', data: { content: text('what is the answer') } },
    { type: 'assistant/message', data: { content: text('the parent answered 42') } },
    { type: 'turn/end', data: { reason: { kind: 'completed' } } },
  ];

  it('seeds a fork from a log whose assistant message has no content, sending it as an empty string (OpenAI refuses content null without tool calls)', async () => {
    // Before, it was sent as content null, and OpenAI (and the fake, as it does) answered 400:
    // the fork child's first call failed.
    const since = mark();
    harness.fake.enqueue(textReply('forked'));
    const silent: SubagentSessionEvent[] = [
      { type: 'user/message', data: { content: text('anything?') } },
      { type: 'assistant/message', data: { content: [] } },
      { type: 'turn/end', data: { reason: { kind: 'completed' } } },
    ];
    const run = harness.start('fork', {
      prompt: text('go on'),
      parent: { ...parent, session: { ...parent.session, events: silent } },
    });
    expect(await run.result).toEqual({ output: text('forked'), stopReason: 'completed' });
    expect(messagesOf(0, since).slice(1)).toEqual([
      { role: 'user', content: 'anything?' },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'go on' },
    ]);
    await run.dispose();
  });

  it("§7.6 a child whose turn ends on a bare stop has output [] and completed, never the seeded parent's message", async () => {
    harness.fake.enqueue(textReply(''));
    const run = harness.start('fork', {
      prompt: text('say nothing'),
      parent: { ...parent, session: { ...parent.session, events: completedTurn } },
    });
    expect(await run.result).toEqual({ output: [], stopReason: 'completed' });
    await run.dispose();
  });

  it("§7.7 one parent runs a spawn child, then a fork child: two runs with the parent as parent session, only the fork seeded, the parent's log untouched", async () => {
    const events = structuredClone(completedTurn);
    const agent = { ...parent, session: { ...parent.session, events } };
    harness.fake.enqueue(textReply('spawned'), textReply('forked'));
    const spawned = harness.start('spawn', { prompt: text('fresh task'), parent: agent });
    expect(await spawned.result).toEqual({ output: text('spawned'), stopReason: 'completed' });
    const forked = harness.start('fork', { prompt: text('continue'), parent: agent });
    expect(await forked.result).toEqual({ output: text('forked'), stopReason: 'completed' });
    const contextOf = async (run: SubagentRun) =>
      (await harness.temporal.client.workflow.getHandle(run.id).query(runContextQuery)).request;
    const [spawnRequest, forkRequest] = await Promise.all([contextOf(spawned), contextOf(forked)]);
    expect(spawned.id).not.toBe(forked.id);
    expect([spawnRequest.parent.sessionId, forkRequest.parent.sessionId]).toEqual(['parent-session', 'parent-session']);
    expect(spawnRequest.seed).toBeUndefined();
    expect(forkRequest.seed).toMatchObject({ events: 3 });
    expect(events).toEqual(completedTurn);
    await Promise.all([spawned.dispose(), forked.dispose()]);
  });
});

it('keeps history bytes per model call flat from 10 to 200 calls', async () => {
  const bytesPerCall = async (calls: number) => {
    let made = 0;
    harness.fake.setHandler(() =>
      ++made < calls ? toolCallReply([{ name: 'list_directory', arguments: { path: 'src' } }]) : textReply('done'),
    );
    const run = startSpawn(`loop ${calls}`);
    expect((await run.result).stopReason).toBe('completed');
    const info = (await harness.temporal.client.workflow.getHandle(run.id).describe()).raw.workflowExecutionInfo!;
    await run.dispose();
    return Number(info.historySizeBytes) / calls;
  };
  const small = await bytesPerCall(10);
  const large = await bytesPerCall(200);
  expect(large / small).toBeLessThan(1.25);
}, 120_000);

async function waitFor(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
