// Every row of the seam → Temporal mapping, against the real dev server: one workflow per run,
// steering, resume, attach, depth (cancel and dispose: test/conformance/cancel-dispose.test.ts).
import { WorkflowExecutionStatusName } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import {
  type ResolvedSubagentRequest,
  SubagentDepthError,
  type SubagentProvider,
  type SubagentResult,
  type SubagentRun,
  type SubagentRunInfo,
  type SubagentTurnProvider,
} from '../../src';
import { createScriptedProvider, ScriptedTurn, ScriptedTurnEvent } from '../../src/testing';
import { hostSeamProvider } from '../../src/worker';
import { SubagentRunOutcome, sendMessageSignal, statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  testRuns,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

const turnEvents: ScriptedTurnEvent[] = [];
const observer = (event: ScriptedTurnEvent) => turnEvents.push(event);
const gates = turnGates();
const scripted = createScriptedProvider({ name: uniqueName('scripted'), observer });
const shortWindow = createScriptedProvider({
  name: uniqueName('short'),
  observer,
  runSettings: { resumeWindow: '1 second' },
});
const plain = createScriptedProvider({ name: uniqueName('plain'), observer, steering: false, resumable: false });
const seenRequests: ResolvedSubagentRequest[] = [];
const recorder: SubagentTurnProvider = {
  name: uniqueName('recorder'),
  capabilities: { outputSchema: false, depthLimit: true, toolFilter: false },
  inheritsParentContext: false,
  async runTurn(_input, ctx) {
    seenRequests.push(ctx.request);
    return { output: text(`depth ${ctx.request.depth}`), stopReason: 'completed' };
  },
};

const unfixableAttempts: number[] = [];
/** A provider that fails with a failure type no retry can fix, thrown as if retryable. */
const unfixable: SubagentTurnProvider = {
  name: uniqueName('unfixable'),
  capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  async runTurn(_input, ctx) {
    unfixableAttempts.push(ctx.attempt);
    throw ApplicationFailure.create({ message: 'the request names no model', type: 'INVALID_REQUEST' });
  },
};

/** What a provider with a bug resolves a turn with, by the prompt that asks for it. */
const MALFORMED_RESULTS: Record<string, unknown> = {
  'an output of null': { output: null, stopReason: 'completed' },
  'an output of text': { output: 'hello', stopReason: 'completed' },
  'a text block whose text is a number': { output: [{ type: 'text', text: 5 }], stopReason: 'completed' },
  'no stop reason': { output: text('hello') },
  'permissions that are text': { output: text('hello'), stopReason: 'completed', permissions: 'allowed' },
  undefined: undefined,
};
const malformedAttempts: Record<string, number[]> = {};
const malformed: SubagentTurnProvider = {
  name: uniqueName('malformed'),
  capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  async runTurn(input, ctx) {
    const asked = (input[0]![0] as { text: string }).text;
    (malformedAttempts[asked] ??= []).push(ctx.attempt);
    return MALFORMED_RESULTS[asked] as SubagentResult;
  },
};

const runs = testRuns([scripted, shortWindow, plain, recorder, unfixable, malformed], {
  worker: { heartbeatIntervalMs: 200 },
});

const parent = { id: 'parent-agent' };
const eventsOf = (run: SubagentRun, kind?: ScriptedTurnEvent['kind']) =>
  turnEvents.filter((event) => event.runId === run.id && (kind === undefined || event.kind === kind));
const turnStarted = (run: SubagentRun, turn = 0) =>
  eventually(() => eventsOf(run, 'turn-start').find((event) => event.turn === turn));
const startScripted = (script: ScriptedTurn[], prompt = 'go', provider = scripted.name) =>
  runs.service.start(provider, { prompt: text(prompt), parent, agentOptions: { script: script as never } });
const describeRun = (run: SubagentRun) => runs.temporal.client.workflow.getHandle(run.id).describe();
const closedOutcome = (run: SubagentRun) =>
  runs.temporal.client.workflow.getHandle(run.id).result() as Promise<SubagentRunOutcome>;

async function statusOf(run: SubagentRun): Promise<WorkflowExecutionStatusName> {
  return (await describeRun(run)).status.name;
}

describe('start', () => {
  it('runs the child as one workflow on the provider task queue and resolves with its output', async () => {
    const run = startScripted([{ reply: 'done: {input}' }], 'hello');
    const result = await run.result;
    expect(result).toEqual({ output: text('done: hello'), stopReason: 'completed' });
    expect('structured' in result).toBe(false);
    const description = await describeRun(run);
    expect(description.workflowId).toBe(run.id);
    expect(description.type).toBe('subagentRunWorkflow');
    expect(description.taskQueue).toBe(`subagents.${scripted.name}`);
    await run.dispose();
  });

  it('§7.4 the child is at the parent depth (0 unless set) + 1, and maxDepth refuses a deeper child with SubagentDepthError before any workflow exists', async () => {
    const starts: SubagentRunInfo[] = [];
    const off = runs.service.on('subagent/start', (info) => starts.push(info));
    const deepParent = { id: 'deep', options: { subagentDepth: 2 } };
    let refusal: unknown;
    try {
      runs.service.start(recorder.name, { prompt: text('x'), parent: deepParent, maxDepth: 2 });
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(SubagentDepthError);
    expect(refusal).toMatchObject({
      code: 'DEPTH_EXCEEDED',
      attemptedDepth: 3,
      maxDepth: 2,
      name: 'SubagentDepthError',
    });
    expect((refusal as Error).message).toBe('subagent depth 3 exceeds maxDepth 2');
    expect(starts).toHaveLength(0);

    const run = runs.service.start(recorder.name, { prompt: text('x'), parent: deepParent, maxDepth: 3 });
    expect(await run.result).toEqual({ output: text('depth 3'), stopReason: 'completed' });
    const seen = seenRequests.at(-1)!;
    expect(seen.depth).toBe(3);
    expect(seen.parent).toEqual({ agentId: 'deep', depth: 2 });
    expect(starts.map((info) => info.id)).toEqual([run.id]);
    off();
    await run.dispose();
  });

  it('settles a failing turn as error with its diagnostic, and retries a transient failure', async () => {
    const failing = startScripted([{ fail: 'the model endpoint refused the key' }]);
    const failed = await failing.result;
    expect(failed.stopReason).toBe('error');
    expect(failed.output).toEqual([]);
    expect(failed.diagnostic).toContain('the model endpoint refused the key');

    const flaky = startScripted([{ failAttempts: 1, reply: 'attempt {attempt}' }]);
    expect(await flaky.result).toEqual({ output: text('attempt 2'), stopReason: 'completed' });
    await Promise.all([failing.dispose(), flaky.dispose()]);
  });

  it('does not retry a failure of a type no retry can fix, though its provider threw it as retryable', async () => {
    const run = runs.service.start(unfixable.name, { prompt: text('go'), parent });
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('the request names no model');
    expect(unfixableAttempts).toEqual([1]);
    await run.dispose();
  });
});

it('starts a run while no worker polls its queue, and completes it once a worker comes', async () => {
  const late = createScriptedProvider({ name: uniqueName('late'), observer });
  const impatient = newService(runs.temporal, { startTimeoutMs: 500 });
  impatient.registerProvider(late);
  const run = impatient.start(late.name, { prompt: text('wait for a worker'), parent });
  await new Promise((resolve) => setTimeout(resolve, 1000)); // past the start deadline
  const stopLate = await startWorker(runs.temporal, [late]);
  try {
    expect(await run.result).toEqual({ output: text('scripted reply to: wait for a worker'), stopReason: 'completed' });
    await run.dispose();
  } finally {
    await stopLate();
  }
});

it.each(Object.keys(MALFORMED_RESULTS))(
  'settles a turn whose provider resolves with %s as error at once, naming the fault (an output of null failed every workflow task of the run, undefined was retried as a throw, the others reached the caller or the audit as they were)',
  async (asked) => {
    const run = runs.service.start(malformed.name, { prompt: text(asked), parent });
    expect(await run.result).toEqual({
      output: [],
      stopReason: 'error',
      diagnostic: expect.stringContaining(`provider "${malformed.name}" returned a malformed turn result: `),
    });
    expect(malformedAttempts[asked]).toEqual([1]);
    await run.dispose();
  },
);

describe('sendMessage', () => {
  const pendingOf = async (run: SubagentRun) =>
    (await runs.temporal.client.workflow.getHandle(run.id).query(statusQuery)).pendingMessages;

  it('delivers messages at the next turn boundary, in order, each once', async () => {
    const run = startScripted([{ waitFor: gates.waitFor, reply: 'first: {input}' }, { reply: 'second: {input}' }]);
    await turnStarted(run);
    for (const message of ['one', 'two', 'three']) run.sendMessage!(text(message));
    await eventually(async () => ((await pendingOf(run)) === 3 ? true : undefined));
    gates.open(run.id, 0);
    expect(await run.result).toEqual({ output: text('second: one | two | three'), stopReason: 'completed' });
    const turns = eventsOf(run, 'turn-start').map((event) => event.input);
    expect(turns).toEqual([['go'], ['one', 'two', 'three']]);
    await run.dispose();
  });

  it('counts a message once when its signal arrives twice (a retry after a lost response)', async () => {
    const run = startScripted([{ waitFor: gates.waitFor, reply: 'first' }, { reply: 'second: {input}' }]);
    await turnStarted(run);
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    await handle.signal(sendMessageSignal, { content: text('sent once'), id: 'message-1' });
    await handle.signal(sendMessageSignal, { content: text('sent once'), id: 'message-1' });
    await handle.signal(sendMessageSignal, { content: text('another'), id: 'message-2' });
    // All three signals are in when two messages wait; the result shows which two.
    await eventually(async () => ((await pendingOf(run)) === 2 ? true : undefined));
    gates.open(run.id, 0);
    expect(await run.result).toEqual({ output: text('second: sent once | another'), stopReason: 'completed' });
    await run.dispose();
  });

  it('throws NOT_RUNNING once the result has settled, and INVALID_REQUEST for malformed content', async () => {
    const run = startScripted([{ reply: 'ok' }]);
    expect(() => run.sendMessage!('not blocks' as never)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    await run.result;
    expect(() => run.sendMessage!(text('late'))).toThrow(expect.objectContaining({ code: 'NOT_RUNNING' }));
    await run.dispose();
  });

  it('is absent, like resume, on a provider without steering or resume', async () => {
    const run = runs.service.start(plain.name, { prompt: text('x'), parent });
    expect('sendMessage' in run).toBe(false);
    expect('resume' in run).toBe(false);
    await run.result;
    await run.dispose();
    expect(await eventually(async () => ((await statusOf(run)) === 'COMPLETED' ? true : undefined))).toBe(true);
  });
});

describe('resume', () => {
  it('continues the same child twice: same id, a new Temporal run each time, the conversation carried', async () => {
    const starts: SubagentRunInfo[] = [];
    const off = runs.service.on('subagent/start', (info) => starts.push(info));
    const first = startScripted(
      [{ reply: 'a' }, { reply: 'b after {conversation}' }, { reply: 'c after {conversation}' }],
      'first',
    );
    expect(await first.result).toEqual({ output: text('a'), stopReason: 'completed' });
    const firstRunId = (await describeRun(first)).runId;

    const second = first.resume!(text('second'));
    expect(second.id).toBe(first.id);
    expect(await second.result).toEqual({ output: text('b after first'), stopReason: 'completed' });
    const secondRunId = (await describeRun(second)).runId;

    const third = second.resume!(text('third'));
    expect(await third.result).toEqual({ output: text('c after first | second'), stopReason: 'completed' });
    const thirdRunId = (await describeRun(third)).runId;

    expect(new Set([firstRunId, secondRunId, thirdRunId]).size).toBe(3);
    expect(starts.filter((info) => info.id === first.id).map((info) => info.segment)).toEqual([0, 1, 2]);
    off();
    await third.dispose();
    expect((await closedOutcome(first)).closedBy).toBe('disposed');
  });

  it('refuses with NOT_RESUMABLE a running run, a handle resumed twice, and a disposed run', async () => {
    const running = startScripted([{ delayMs: 500 }]);
    expect(() => running.resume!(text('too early'))).toThrow(expect.objectContaining({ code: 'NOT_RESUMABLE' }));
    await running.result;
    const next = running.resume!(text('once'));
    expect(() => running.resume!(text('twice'))).toThrow(expect.objectContaining({ code: 'NOT_RESUMABLE' }));
    await next.result;
    await next.dispose();
    expect(() => next.resume!(text('after dispose'))).toThrow(expect.objectContaining({ code: 'NOT_RESUMABLE' }));

    const attached = runs.service.attach(running.id);
    await attached.result;
    // A closed run is asked all the same (a reset may have taken it up since): its result refuses.
    await expect(attached.resume!(text('closed')).result).rejects.toMatchObject({
      code: 'NOT_RESUMABLE',
      message: `cannot resume run ${running.id}: it is closed`,
    });
  });

  it('refuses after the resume window, when the parked workflow has closed', async () => {
    const run = runs.service.start(shortWindow.name, { prompt: text('x'), parent });
    await run.result;
    expect(await eventually(async () => ((await statusOf(run)) === 'COMPLETED' ? true : undefined))).toBe(true);
    expect((await closedOutcome(run)).closedBy).toBe('expired');
    await expect(run.resume!(text('late')).result).rejects.toMatchObject({
      code: 'NOT_RESUMABLE',
      message: expect.stringContaining('its resume window ended at'),
    });
    await run.dispose();
  });

  it('rejects the result of a resume that lost a race with NOT_RESUMABLE', async () => {
    const run = startScripted([{ reply: 'a' }]);
    await run.result;
    const [one, two] = [runs.service.attach(run.id), runs.service.attach(run.id)];
    await Promise.all([one.result, two.result]);
    const winner = one.resume!(text('first'));
    await winner.result;
    const loser = two.resume!(text('second'));
    await expect(loser.result).rejects.toMatchObject({ code: 'NOT_RESUMABLE' });
    await winner.dispose();
  });
});

describe('attach', () => {
  it('gives a restarted caller the result from a second client, and resume works through it', async () => {
    const other = await connectTestTemporal();
    const otherService = newService(other);
    otherService.registerProvider(scripted);
    const run = otherService.start(scripted.name, {
      prompt: text('survive me'),
      parent,
      agentOptions: { script: [{ delayMs: 300, reply: 'kept: {input}' }, { reply: 'resumed: {input}' }] },
    });
    run.result.catch(() => undefined); // the first caller goes away before the result
    await turnStarted(run);
    await other.close();

    const attached = runs.service.attach(run.id);
    expect(await attached.result).toEqual({ output: text('kept: survive me'), stopReason: 'completed' });
    const resumed = attached.resume!(text('again'));
    expect(await resumed.result).toEqual({ output: text('resumed: again'), stopReason: 'completed' });
    await resumed.dispose();
    expect(await runs.service.attach(run.id).result).toEqual({
      output: text('resumed: again'),
      stopReason: 'completed',
    });
  });

  it('rejects an unknown run with UNKNOWN_RUN', async () => {
    await expect(runs.service.attach(`subagent-${scripted.name}:no-such-run`).result).rejects.toMatchObject({
      code: 'UNKNOWN_RUN',
    });
    expect(() => runs.service.attach('not-a-run-id')).toThrow(expect.objectContaining({ code: 'UNKNOWN_RUN' }));
  });
});

describe('hostSeamProvider', () => {
  const signals: AbortSignal[] = [];
  const seamProvider: SubagentProvider = {
    name: uniqueName('seam'),
    capabilities: { outputSchema: false, depthLimit: true, toolFilter: false },
    inheritsParentContext: false,
    start(request) {
      signals.push(request.signal!);
      const prompt = request.prompt.map((block) => (block.type === 'text' ? block.text : '')).join('');
      const result = new Promise<SubagentResult>((resolve) => {
        if (prompt === 'hang') {
          request.signal!.addEventListener('abort', () => resolve({ output: [], stopReason: 'aborted' }));
        } else {
          resolve({
            output: text(`in-process: ${prompt} at depth ${request.parent.options?.subagentDepth}`),
            stopReason: 'completed',
          });
        }
      });
      return { id: 'inner', result, cancel() {}, dispose: async () => {} };
    },
  };
  /** A seam fork (a test double): answers with the parent's session log it was handed. */
  const seamFork: SubagentProvider = {
    name: uniqueName('seam-fork'),
    capabilities: { outputSchema: false, depthLimit: true, toolFilter: false },
    inheritsParentContext: true,
    start(request) {
      const events = request.parent.session?.events;
      const result = Promise.resolve<SubagentResult>({
        output: text(events === undefined ? 'no log' : JSON.stringify(events)),
        stopReason: 'completed',
      });
      return { id: 'inner-fork', result, cancel() {}, dispose: async () => {} };
    },
  };
  let stopSeamWorker: () => Promise<void>;

  beforeAll(async () => {
    stopSeamWorker = await startWorker(runs.temporal, [hostSeamProvider(seamProvider), hostSeamProvider(seamFork)], {
      heartbeatIntervalMs: 200,
    });
    runs.service.registerProvider(seamProvider);
    runs.service.registerProvider(seamFork);
  });
  afterAll(() => stopSeamWorker?.());

  it('runs an in-process seam provider as one durable activity and maps its result', async () => {
    const run = runs.service.start(seamProvider.name, {
      prompt: text('task'),
      parent: { id: 'p', options: { subagentDepth: 1 } },
    });
    expect('sendMessage' in run).toBe(false);
    expect(await run.result).toEqual({ output: text('in-process: task at depth 1'), stopReason: 'completed' });
    await run.dispose();
  });

  it("hands a seam fork the parent's completed turns as its session log, numbered from 0 (it got no log: a fork that said it inherits the conversation started from the prompt alone)", async () => {
    const call = { type: 'tool-call' as const, id: 'c1', name: 'read_file', arguments: '{"path":"a"}' };
    const result = { type: 'tool-result' as const, toolCallId: 'c1', content: text('file a') };
    const log = [
      { type: 'user/message', data: { content: text('first question') } },
      { type: 'assistant/message', data: { content: [call] } },
      { type: 'tool/result', data: { callId: 'c1', content: text('file a') } },
      { type: 'assistant/message', data: { content: text('first answer') } },
      { type: 'turn/end', data: { reason: { kind: 'completed' } } },
      { type: 'user/message', data: { content: text('the turn in flight') } },
    ];
    const seen = async (logged: object) => {
      const run = runs.service.start(seamFork.name, { prompt: text('fork'), parent: logged as typeof parent });
      const { output } = await run.result;
      await run.dispose();
      return JSON.parse((output[0] as { text: string }).text) as unknown;
    };
    expect(await seen({ id: 'p', session: { header: { id: 's' }, events: log } })).toEqual([
      { type: 'user/message', seq: 0, data: { content: text('first question') } },
      { type: 'assistant/message', seq: 1, data: { content: [call] } },
      { type: 'tool/call', seq: 2, data: { callId: 'c1', name: 'read_file', arguments: '{"path":"a"}' } },
      { type: 'tool/result', seq: 3, data: { callId: 'c1', content: result.content, isError: false } },
      { type: 'assistant/message', seq: 4, data: { content: text('first answer') } },
      { type: 'turn/end', seq: 5, data: { reason: { kind: 'completed' } } },
    ]);
    // A parent without a log, or without a completed turn, has nothing to inherit: an empty log.
    expect(await seen({ id: 'p' })).toEqual([]);
  });

  it('aborts the in-process run through its request signal on cancel', async () => {
    const before = signals.length;
    const run = runs.service.start(seamProvider.name, { prompt: text('hang'), parent });
    const signal = await eventually(() => signals[before]);
    run.cancel();
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(signal.aborted).toBe(true);
    await run.dispose();
  });
});
