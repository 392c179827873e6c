// Bad input gets a clear, typed error at once and loses nothing: no workflow exists afterwards.
// Runs in its own namespace so the workflow count through the client is this file's alone.
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { Client } from '@temporalio/client';
import {
  SubagentError,
  type SubagentRun,
  type SubagentStartRequest,
  TemporalSubagentService,
  runStarted,
} from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { temporal } from '@temporalio/proto';
import {
  SUBAGENT_RUN_WORKFLOW,
  type SubagentRunInput,
  approveUpdate,
  childStartedSignal,
  disposeUpdate,
  requestApprovalUpdate,
  resumeUpdate,
  segmentResultUpdate,
  sendMessageSignal,
  statusQuery,
} from '../../workflows/definitions';
import { eventually, newService, recordingLogger, startWorker, testRuns, text, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('bad-input') });

const runs = testRuns([scripted], { namespace: 'isolated' });

const parent = { id: 'parent' };
const valid: SubagentStartRequest = { prompt: text('hello'), parent };
const oversized = 'x'.repeat(3 * 1024 * 1024);

const cases: [string, unknown, string, string][] = [
  ['the request is not an object', null, 'INVALID_REQUEST', 'the start request must be an object'],
  [
    'the prompt is a string',
    { ...valid, prompt: 'hello' },
    'INVALID_REQUEST',
    'request.prompt must be a non-empty array of content blocks',
  ],
  [
    'the prompt is empty',
    { ...valid, prompt: [] },
    'INVALID_REQUEST',
    'request.prompt must be a non-empty array of content blocks',
  ],
  [
    'a block has no type',
    { ...valid, prompt: [{ text: 'x' }] },
    'INVALID_REQUEST',
    'request.prompt[0] must be a content block object with a string "type"',
  ],
  [
    'a text block has a number',
    { ...valid, prompt: [{ type: 'text', text: 5 }] },
    'INVALID_REQUEST',
    'request.prompt[0].text must be a string (a "text" block)',
  ],
  [
    'a tool call lacks its arguments',
    { ...valid, prompt: [{ type: 'tool-call', id: 'c', name: 'n' }] },
    'INVALID_REQUEST',
    'request.prompt[0].arguments must be a string (a "tool-call" block)',
  ],
  [
    'there is no parent',
    { prompt: text('x') },
    'INVALID_REQUEST',
    'request.parent is required: the delegating agent, at least { id: string }',
  ],
  [
    'the parent has no id',
    { ...valid, parent: {} },
    'INVALID_REQUEST',
    'request.parent is required: the delegating agent, at least { id: string }',
  ],
  [
    'the parent depth is negative',
    { ...valid, parent: { id: 'p', options: { subagentDepth: -1 } } },
    'INVALID_REQUEST',
    'request.parent.options.subagentDepth must be a non-negative integer (got -1)',
  ],
  [
    'maxDepth is negative',
    { ...valid, maxDepth: -1 },
    'INVALID_REQUEST',
    'request.maxDepth must be a non-negative integer (got -1)',
  ],
  [
    'maxDepth is fractional',
    { ...valid, maxDepth: 1.5 },
    'INVALID_REQUEST',
    'request.maxDepth must be a non-negative integer (got 1.5)',
  ],
  [
    'maxDepth is NaN',
    { ...valid, maxDepth: NaN },
    'INVALID_REQUEST',
    'request.maxDepth must be a non-negative integer (got NaN)',
  ],
  [
    'toolFilter holds non-strings',
    { ...valid, toolFilter: { allow: ['read', 7] } },
    'INVALID_REQUEST',
    'request.toolFilter.allow must be an array of tool names (strings)',
  ],
  [
    'toolFilter is a string',
    { ...valid, toolFilter: 'read' },
    'INVALID_REQUEST',
    'request.toolFilter must be { allow?: string[], deny?: string[] }',
  ],
  [
    'toolFilter has an unknown field',
    { ...valid, toolFilter: { only: ['x'] } },
    'INVALID_REQUEST',
    'request.toolFilter.only is not a filter field (allow, deny)',
  ],
  [
    'agentOptions holds a function',
    { ...valid, agentOptions: { pick: () => 1 } },
    'INVALID_REQUEST',
    'request.agentOptions.pick must be JSON data (got a function)',
  ],
  [
    'agentOptions holds a Date',
    { ...valid, agentOptions: { at: new Date(0) } },
    'INVALID_REQUEST',
    'request.agentOptions.at must be a plain object or array (got Date)',
  ],
  [
    'the signal is not an AbortSignal',
    { ...valid, signal: 'stop' },
    'INVALID_REQUEST',
    'request.signal must be an AbortSignal',
  ],
  [
    "the parent's run id has a lone surrogate (the worker could not encode its signal to the parent, and shut down)",
    { ...valid, parent: { id: 'p', runId: 'subagent-x:\ud800' } },
    'INVALID_REQUEST',
    'request.parent.runId must be a run id',
  ],
  [
    "the parent's run id is 10,000 characters (the server refused the run's signal to it at every workflow task)",
    { ...valid, parent: { id: 'p', runId: 'r'.repeat(10_000) } },
    'INVALID_REQUEST',
    'request.parent.runId must be a run id',
  ],
  [
    "the parent's root run id is empty",
    { ...valid, parent: { id: 'p', rootRunId: '' } },
    'INVALID_REQUEST',
    'request.parent.rootRunId must be a run id',
  ],
  [
    "the signal's addEventListener throws (the run was started all the same)",
    {
      ...valid,
      signal: {
        aborted: false,
        addEventListener: () => {
          throw new Error('no listeners here');
        },
        removeEventListener: () => undefined,
      },
    },
    'INVALID_REQUEST',
    'the start request could not be read: no listeners here',
  ],
  [
    'reading the prompt throws (a getter)',
    Object.defineProperty({ parent }, 'prompt', {
      enumerable: true,
      get: () => {
        throw new Error('no prompt here');
      },
    }),
    'INVALID_REQUEST',
    'the start request could not be read: no prompt here',
  ],
  [
    'agentOptions is a Proxy whose traps throw',
    {
      ...valid,
      agentOptions: new Proxy(
        {},
        {
          ownKeys: () => {
            throw new Error('no keys here');
          },
        },
      ),
    },
    'INVALID_REQUEST',
    'the start request could not be read: no keys here',
  ],
  [
    "the budget's deadline is before the earliest time a Date holds (every workflow task of the run failed, for ever)",
    { ...valid, budget: { deadline: -1e20 } },
    'INVALID_REQUEST',
    'request.budget.deadline must be',
  ],
  [
    "the budget's deadline is past the latest time a Date holds",
    { ...valid, budget: { deadline: 8.64e15 + 1 } },
    'INVALID_REQUEST',
    'request.budget.deadline must be',
  ],
  [
    'the prompt is over the payload limit',
    { ...valid, prompt: text(oversized) },
    'PAYLOAD_TOO_LARGE',
    'the start request is',
  ],
];

describe('start with bad input', () => {
  it.each(cases)('throws a typed error synchronously when %s', (_case, request, code, message) => {
    let thrown: unknown;
    try {
      runs.service.start(scripted.name, request as SubagentStartRequest);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SubagentError);
    expect(thrown).toMatchObject({ code });
    expect((thrown as Error).message.startsWith(message)).toBe(true);
  });

  it('throws NO_PROVIDER for an unknown provider', () => {
    expect(() => runs.service.start('no-such-provider', valid)).toThrow(
      expect.objectContaining({ code: 'NO_PROVIDER' }),
    );
  });

  it('left no workflow behind: the only run in the namespace is the one valid start', async () => {
    const run = runs.service.start(scripted.name, valid);
    await run.result;
    const count = await eventually(async () => {
      const n = await runs.temporal.client.workflow.count();
      return n.count >= 1 ? n.count : undefined;
    });
    expect(count).toBe(1);
    await run.dispose();
  });
});

describe('messages and resumes with bad input', () => {
  it('refuse malformed or oversized content with a typed error and send nothing', async () => {
    const run = runs.service.start(scripted.name, {
      ...valid,
      agentOptions: { script: [{ delayMs: 300, reply: '{input}' }] },
    });
    expect(() => run.sendMessage!([{ type: 'text' }] as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_REQUEST' }),
    );
    expect(() => run.sendMessage!(text(oversized))).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    const unreadable = [
      Object.defineProperty({ type: 'text' }, 'text', {
        enumerable: true,
        get: () => {
          throw new Error('no text here');
        },
      }),
    ];
    expect(() => run.sendMessage!(unreadable as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_REQUEST', message: 'the message could not be read: no text here' }),
    );
    expect(await run.result).toEqual({ output: text('hello'), stopReason: 'completed' });
    expect(() => run.resume!([] as never)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    expect(() => run.resume!(text(oversized))).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    expect(() => run.resume!(unreadable as never)).toThrow(
      expect.objectContaining({
        code: 'INVALID_REQUEST',
        message: 'the resume content could not be read: no text here',
      }),
    );
    const resumed = run.resume!(text('still resumable'));
    expect(await resumed.result).toEqual({
      output: text('scripted reply to: still resumable'),
      stopReason: 'completed',
    });
    await resumed.dispose();
  });
});

it.each([
  [
    'a listener that is not a function (every later registration threw a TypeError, and rolled back)',
    'subagent/provider-added',
    5,
  ],
  ['an event the service never emits (the listener heard nothing)', 'subagent/started', () => undefined],
])('refuses %s with INVALID_CONFIG, and registering still works', (_case, event, listener) => {
  const service = newService(runs.temporal);
  expect(() => service.on(event as never, listener as never)).toThrow(
    expect.objectContaining({ code: 'INVALID_CONFIG' }),
  );
  service.registerProvider(scripted);
  expect(service.list()).toEqual([scripted.name]);
});

it('refuses a provider that is not an object with INVALID_CONFIG (it was a TypeError)', () => {
  for (const provider of [null, undefined, 'scripted']) {
    expect(() => newService(runs.temporal).registerProvider(provider as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  }
});

it.each([
  [5, 'got 5'],
  [null, 'got null'],
])(
  'refuses an approval answer of %s with INVALID_REQUEST saying what it got (it said the decision was undefined)',
  async (answer, says) => {
    const run = runs.service.start(scripted.name, valid);
    await expect(run.approve!(`${run.id}/t0.s0.c0`, answer as never)).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining(says),
    });
    await run.dispose();
  },
);

it('refuses a resume whose conversation outgrew the payload limit with PAYLOAD_TOO_LARGE, and the run stays parked', async () => {
  const small = newService(runs.temporal, { maxPayloadBytes: 20_000 });
  small.registerProvider(scripted);
  const run = small.start(scripted.name, {
    ...valid,
    agentOptions: { script: [{ delayMs: 400, reply: 'ok' }, { reply: 'ok' }] },
  });
  // Each message fits on its own; together they outgrow what a continue-as-new may carry.
  run.sendMessage!(text('y'.repeat(12_000)));
  run.sendMessage!(text('z'.repeat(12_000)));
  expect((await run.result).stopReason).toBe('completed');
  const tooBig = run.resume!(text('more'));
  await expect(tooBig.result).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  const status = await runs.temporal.client.workflow.getHandle(run.id).query(statusQuery);
  expect(status.phase).toBe('parked');
  await run.dispose();
});

describe('attach with ids that are not ours', () => {
  it('refuses a workflow of another type whose id looks like a run with UNKNOWN_RUN, and no call on the handle reaches it', async () => {
    // A workflow no worker runs: a watch of it as a run waited (and queried it) forever.
    const id = `subagent-${scripted.name}:${uniqueName('not-a-run')}`;
    const other = await runs.temporal.client.workflow.start('someOtherWorkflow', {
      workflowId: id,
      taskQueue: uniqueName('nobody-polls'),
      args: ['not a run input'],
    });
    const run = runs.service.attach(id);
    run.cancel('stop it');
    run.sendMessage!(text('hello'));
    await expect(run.result).rejects.toMatchObject({
      code: 'UNKNOWN_RUN',
      message: expect.stringContaining('someOtherWorkflow'),
    });
    await expect(run.events!()[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
    await run.dispose();
    const { status } = await other.describe();
    expect(status.name).toBe('RUNNING');
    const events = (await other.fetchHistory()).events ?? [];
    const EventType = temporal.api.enums.v1.EventType;
    expect(events.map((event) => event.eventType)).not.toContain(
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
    );
    expect(events.map((event) => event.eventType)).not.toContain(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED);
    await other.terminate('test over');
  });

  it('refuses an id with a lone surrogate with UNKNOWN_RUN, synchronously (the server cannot be asked about it)', () => {
    expect(() => runs.service.attach(`subagent-${scripted.name}:\ud800`)).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_RUN' }),
    );
  });
});

it('cancels with a reason of any text: a lone surrogate in it no longer loses the cancel', async () => {
  const run = runs.service.start(scripted.name, {
    ...valid,
    agentOptions: { script: [{ delayMs: 20_000, reply: 'too late' }] },
  });
  await runStarted(run);
  run.cancel('stop \ud800 now');
  expect(await run.result).toMatchObject({ stopReason: 'aborted' });
  await run.dispose();
});

it.each([
  ['empty', ''],
  ['not well-formed text (a lone surrogate)', 'scripted-\ud800'],
  ['over 900 bytes', 'p'.repeat(901)],
])(
  'refuses a provider name that cannot name runs, %s, with INVALID_CONFIG: in the service and in a worker',
  async (_case, name) => {
    const provider = createScriptedProvider({ name });
    expect(() => newService(runs.temporal).registerProvider(provider)).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    await expect(startWorker(runs.temporal, [provider])).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  },
);

describe('a raw Temporal client (ours refuses these at start)', () => {
  /** A parked run, and its workflow's input as our client sent it, to send again altered. */
  async function parkedRunAndInput(): Promise<{ run: SubagentRun; input: SubagentRunInput; taskQueue: string }> {
    const run = runs.service.start(scripted.name, valid);
    await run.result;
    const [started] = (await runs.temporal.client.workflow.getHandle(run.id).fetchHistory()).events!;
    const attributes = started!.workflowExecutionStartedEventAttributes!;
    const input = defaultPayloadConverter.fromPayload<SubagentRunInput>(attributes.input!.payloads![0]! as Payload);
    return { run, input, taskQueue: attributes.taskQueue!.name! };
  }

  /** The worker still runs runs: a lone surrogate in a command had made core shut it down. */
  async function workerStillRuns(): Promise<void> {
    const next = runs.service.start(scripted.name, valid);
    expect(await next.result).toMatchObject({ stopReason: 'completed' });
    await next.dispose();
  }

  /** The input with its parent's run id replaced. */
  const withParentRunId = (runId: string) => (input: SubagentRunInput) => ({
    ...input,
    request: { ...input.request, parent: { ...input.request.parent, runId } },
  });

  /** The input with its settings, or its request, replaced. */
  const withSettings = (alter: (settings: Record<string, any>) => unknown) => (input: SubagentRunInput) => ({
    ...input,
    settings: alter(input.settings),
  });
  const withRequest = (alter: (request: Record<string, any>) => unknown) => (input: SubagentRunInput) => ({
    ...input,
    request: alter(input.request),
  });
  /** The input of a run continued as new, with `fields` in the state it carries. */
  const withCarried = (fields: Record<string, unknown>) => (input: SubagentRunInput) => ({
    ...input,
    carried: { segment: 0, turn: 0, transcript: [], pending: [text('hi')], children: [], ...fields },
  });

  it.each([
    [
      'a parent run id with a lone surrogate (core shut the worker down)',
      withParentRunId('subagent-x:\ud800'),
      'request.parent.runId must be',
    ],
    [
      'a parent run id of 10,000 characters (the server refused every workflow task)',
      withParentRunId('r'.repeat(10_000)),
      'request.parent.runId must be',
    ],
    [
      'a model task queue with a lone surrogate (its model calls would have shut the worker down)',
      (input: SubagentRunInput) => ({ ...input, modelTaskQueue: 'model\ud800' }),
      'modelTaskQueue must be',
    ],
    ['nothing in it (null: a TypeError failed every workflow task)', () => null, 'its input must be an object'],
    ['settings of null (the same)', withSettings(() => null), 'settings must be an object'],
    ['settings without a retry policy (the same)', withSettings(() => ({})), 'settings.turnRetry must be an object'],
    [
      'a resume window that is text (its park, a timer of NaN ms, failed every workflow task)',
      withSettings((settings) => ({ ...settings, resumeWindowMs: '1 day' })),
      'settings.resumeWindowMs cannot be "1 day"',
    ],
    [
      'a retry policy of 2 ** 31 attempts (the server refused every workflow task)',
      withSettings((settings) => ({ ...settings, turnRetry: { ...settings.turnRetry, maximumAttempts: 2 ** 31 } })),
      'settings.turnRetry.maximumAttempts cannot be 2147483648',
    ],
    ['a request of null (a TypeError failed every workflow task)', withRequest(() => null), 'request must be'],
    ['a parent of null (the same)', withRequest((request) => ({ ...request, parent: null })), 'request.parent must be'],
    [
      'a prompt of null (its turn failed on every attempt)',
      withRequest((request) => ({ ...request, prompt: null })),
      'request.prompt must be',
    ],
    [
      'a seed whose entries are text (the same)',
      withRequest((request) => ({ ...request, seed: { entries: 'hello' } })),
      'request.seed must be',
    ],
    [
      'carried state whose nested runs are a number (a TypeError failed every workflow task)',
      withCarried({ children: 5 }),
      'carried.children cannot be 5',
    ],
    ['carried state whose transcript is a number (the same)', withCarried({ transcript: 5 }), 'carried.transcript'],
    ['carried state whose messages are a number (the same)', withCarried({ pending: 5 }), 'carried.pending'],
    ['carried state whose message ids are a number (the same)', withCarried({ messageIds: 5 }), 'carried.messageIds'],
    [
      'carried state whose segment is text (it parked, and no dispose reached it)',
      withCarried({ segment: 'first' }),
      'carried.segment cannot be "first"',
    ],
  ])('fails a run whose input has %s at once, INVALID_REQUEST, and the worker runs on', async (_case, alter, says) => {
    const { run, input, taskQueue } = await parkedRunAndInput();
    await run.dispose();
    const handle = await runs.temporal.client.workflow.start(SUBAGENT_RUN_WORKFLOW, {
      args: [alter(input)],
      taskQueue,
      workflowId: `${run.id}-raw`,
    });
    await expect(handle.result()).rejects.toMatchObject({
      cause: { type: 'INVALID_REQUEST', message: expect.stringContaining(says) },
    });
    await workerStillRuns();
  });

  it('drops a sendMessage signal whose content is not content (a string, null, no arguments at all), counting it, and the resumed turn runs (it failed on every attempt)', async () => {
    const { run } = await parkedRunAndInput();
    const raw = runs.temporal.client.workflow.getHandle(run.id);
    await raw.signal(sendMessageSignal, { content: 'hello' } as never);
    await raw.signal(sendMessageSignal, { content: null } as never);
    await raw.signal('sendMessage');
    await eventually(async () => ((await runs.status(run.id)).droppedMessages === 3 ? true : undefined));
    const resumed = run.resume!(text('go on'));
    expect(await resumed.result).toMatchObject({ stopReason: 'completed' });
    const history = await raw.fetchHistory();
    expect(history.events!.filter((event) => event.workflowTaskFailedEventAttributes)).toEqual([]);
    await resumed.dispose();
  });

  it("takes a sendMessage signal whose id is a number, and the run it continues as new into runs: a carried list may hold what a raw client's signal did", async () => {
    const { run } = await parkedRunAndInput();
    await runs.temporal.client.workflow
      .getHandle(run.id)
      .signal(sendMessageSignal, { content: text('hi'), id: 7 } as never);
    const resumed = run.resume!(text('go on'));
    expect(await resumed.result).toMatchObject({ stopReason: 'completed' });
    await resumed.dispose();
  });

  it('refuses a resume whose content is not content with INVALID_REQUEST, and the run stays parked', async () => {
    const { run } = await parkedRunAndInput();
    const raw = runs.temporal.client.workflow.getHandle(run.id);
    for (const content of ['hello', null, []]) {
      await expect(
        raw.executeUpdate(resumeUpdate, { args: [{ fromSegment: 0, content } as never] }),
      ).rejects.toMatchObject({
        cause: { type: 'INVALID_REQUEST', message: expect.stringContaining('content must be') },
      });
    }
    expect(await runs.status(run.id)).toMatchObject({ phase: 'parked', segment: 0 });
    await run.dispose();
  });

  /** What each of these did before its validator: failed every workflow task, or was refused untyped, or taken. */
  const wedged = 'its handler failed every workflow task of the run, so no dispose reached it';
  const untyped = "it was refused with the SDK's TypeError, or as another segment, or taken";
  it.each([
    ['dispose', 'null', wedged, disposeUpdate, [null]],
    ['dispose', 'no arguments', wedged, disposeUpdate, []],
    ['requestApproval', 'null', wedged, requestApprovalUpdate, [null]],
    ['requestApproval', 'no arguments', wedged, requestApprovalUpdate, []],
    ['approve', 'null', untyped, approveUpdate, [null]],
    ['approve', 'a request id that is a number', untyped, approveUpdate, [{ requestId: 7, decision: 'allow' }]],
    ['segmentResult', 'null', untyped, segmentResultUpdate, [null]],
    ['segmentResult', 'a segment that is text', untyped, segmentResultUpdate, [{ segment: '0' }]],
    ['resume', 'null', untyped, resumeUpdate, [null]],
    ['resume', 'a segment that is text', untyped, resumeUpdate, [{ fromSegment: '0', content: text('go on') }]],
    [
      'resume',
      'a resume id that is a number',
      untyped,
      resumeUpdate,
      [{ fromSegment: 0, content: text('go on'), resumeId: 7 }],
    ],
  ] as const)(
    'refuses the %s update of %s with INVALID_REQUEST; the run stays parked and disposes (%s)',
    async (_name, _case, _before, update, args) => {
      const { run } = await parkedRunAndInput();
      const raw = runs.temporal.client.workflow.getHandle(run.id);
      await expect(raw.executeUpdate(update as never, { args: args as never })).rejects.toMatchObject({
        cause: { type: 'INVALID_REQUEST' },
      });
      expect(await runs.status(run.id)).toMatchObject({ phase: 'parked', segment: 0 });
      await run.dispose();
      expect(await runs.closed(run.id)).toMatchObject({ closedBy: 'disposed' });
      const { events } = await raw.fetchHistory();
      expect(events!.filter((event) => event.workflowTaskFailedEventAttributes)).toEqual([]);
    },
  );

  it('ignores a childStarted signal naming a run with a lone surrogate, so disposing of the run cancels no such child, and the worker runs on', async () => {
    const { run } = await parkedRunAndInput();
    await runs.temporal.client.workflow.getHandle(run.id).signal(childStartedSignal, { runId: 'subagent-x:\ud800' });
    await run.dispose();
    expect(await runs.closed(run.id)).toMatchObject({ closedBy: 'disposed' });
    await workerStillRuns();
  });

  it("ignores a childStarted signal naming a workflow whose id is not a run's, so disposing of the run does not cancel it (it did, with the run's nested runs)", async () => {
    const { run } = await parkedRunAndInput();
    // A workflow of the user's own, on a queue no worker polls: it runs until something ends it.
    const theirs = await runs.temporal.client.workflow.start('ordersWorkflow', {
      taskQueue: uniqueName('nobody'),
      workflowId: uniqueName('order'),
    });
    try {
      await runs.temporal.client.workflow.getHandle(run.id).signal(childStartedSignal, { runId: theirs.workflowId });
      await run.dispose();
      // A disposed run closes only once the server has its cancels to its children.
      expect(await runs.closed(run.id)).toMatchObject({ closedBy: 'disposed' });
      const { events } = await theirs.fetchHistory();
      expect(events!.map((event) => event.eventType)).not.toContain(
        temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
      );
    } finally {
      await theirs.terminate();
    }
  });
});
it.each([
  [
    'payloadSweepIntervalMs of 30 days (past what a timer holds: it swept about 900 times a second)',
    { payloadSweepIntervalMs: 30 * 24 * 3_600_000 },
  ],
  ['payloadSweepIntervalMs of NaN (swept every millisecond)', { payloadSweepIntervalMs: NaN }],
  ['heartbeatIntervalMs of Infinity (heartbeats every millisecond)', { heartbeatIntervalMs: Infinity }],
  ['heartbeatIntervalMs of 0', { heartbeatIntervalMs: 0 }],
  [
    "heartbeatIntervalMs of 10 s, the provider's heartbeatTimeout (every turn longer than it timed out, until its run ended error)",
    { heartbeatIntervalMs: 10_000 },
  ],
  ['cancelGraceMs of -1', { cancelGraceMs: -1 }],
  [
    'textBatches.firstMs of NaN (a batch, a history event, every millisecond)',
    { textBatches: { firstMs: NaN, maxMs: 1000 } },
  ],
  ['textBatches.maxMs below its firstMs', { textBatches: { firstMs: 500, maxMs: 100 } }],
  [
    'textBatches.maxBatches of NaN (its waits a NaN, a batch every millisecond, with no budget)',
    { textBatches: { firstMs: 250, maxMs: 1000, maxBatches: NaN } },
  ],
  ['textBatches.maxBytes of 0', { textBatches: { firstMs: 250, maxMs: 1000, maxBytes: 0 } }],
  ['contextCacheSize of NaN (it never evicted a run)', { contextCacheSize: NaN }],
  [
    'maxPayloadBytes of NaN (every turn of every run ended error, over "the NaN-byte payload limit")',
    { maxPayloadBytes: NaN },
  ],
  ['maxPayloadBytes of 0', { maxPayloadBytes: 0 }],
  [
    'an identity of 1,001 bytes (the server refused every task it completed, and runs waited for ever)',
    { identity: 'i'.repeat(1001) },
  ],
  [
    'a model price of -1 (it took spend back from the budget)',
    { modelPrices: { m: { inputPerMillionTokens: -1, outputPerMillionTokens: 1 } } },
  ],
] as const)(
  'createSubagentWorker refuses %s with INVALID_CONFIG naming the option, before any worker exists',
  async (_case, options) => {
    const provider = createScriptedProvider({ name: uniqueName('worker-options') });
    const name = Object.keys(options)[0];
    await expect(startWorker(runs.temporal, [provider], options)).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining(name),
    });
  },
);

it.each([
  [
    'startTimeoutMs of Infinity (the native client panicked, and every start rejected UNAVAILABLE)',
    { startTimeoutMs: Infinity },
  ],
  ['startTimeoutMs of -1 (every start rejected UNAVAILABLE)', { startTimeoutMs: -1 }],
  ['reconnectWindowMs of NaN (it never gave up)', { reconnectWindowMs: NaN }],
  ['maxPayloadBytes of NaN (every start was PAYLOAD_TOO_LARGE)', { maxPayloadBytes: NaN }],
  ['maxPayloadBytes of 0', { maxPayloadBytes: 0 }],
] as const)('the service refuses %s with INVALID_CONFIG naming the option, at construction', (_case, options) => {
  expect(() => newService(runs.temporal, options)).toThrow(
    expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining(Object.keys(options)[0]) }),
  );
});

it.each(['localhost:8080/v1', 'not a url', 'http://127.0.0.1:8080/v1 '])(
  'refuses a model endpoint whose baseURL is %j, not an http(s) URL, with INVALID_CONFIG: in the service and in a worker',
  async (baseURL) => {
    const provider = createSpawnProvider({ name: uniqueName('bad-url'), tools: [], endpoint: { baseURL, model: 'm' } });
    expect(() => newService(runs.temporal).registerProvider(provider)).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('endpoint.baseURL') }),
    );
    await expect(startWorker(runs.temporal, [provider])).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('endpoint.baseURL'),
    });
  },
);

it.each([
  ['maxContextChars is NaN (every tool result was left out of the conversation)', { maxContextChars: NaN }],
  ['maxTokens is -1 (sent as max_tokens, which the endpoint refuses at every call)', { maxTokens: -1 }],
  ['maxTokens is 1.5', { maxTokens: 1.5 }],
])('refuses a model endpoint whose %s with INVALID_CONFIG: in the service and in a worker', async (_case, limits) => {
  const endpoint = { baseURL: 'http://127.0.0.1:8080/v1', model: 'm', ...limits };
  const provider = createSpawnProvider({ name: uniqueName('bad-limit'), tools: [], endpoint });
  const refused = { code: 'INVALID_CONFIG', message: expect.stringContaining(`endpoint.${Object.keys(limits)[0]}`) };
  expect(() => newService(runs.temporal).registerProvider(provider)).toThrow(expect.objectContaining(refused));
  await expect(startWorker(runs.temporal, [provider])).rejects.toMatchObject(refused);
});

it.each([
  ['empty', ''],
  ['not well-formed text (a lone surrogate)', 'queue-\ud800'],
  ['over 994 bytes', 'q'.repeat(995)],
])(
  'refuses a provider task queue that is %s with INVALID_CONFIG: in the service and in a worker (every start was refused by the server, UNAVAILABLE)',
  async (_case, taskQueue) => {
    const provider = createScriptedProvider({ name: uniqueName('bad-queue'), taskQueue });
    expect(() => newService(runs.temporal).registerProvider(provider)).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    await expect(startWorker(runs.temporal, [provider])).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  },
);

it('reads a namespace the server does not know as INVALID_CONFIG, at start and for an attached run (it was UNAVAILABLE, as if the server were away)', async () => {
  const service = new TemporalSubagentService({
    client: new Client({ connection: runs.temporal.connection, namespace: uniqueName('no-such-namespace') }),
    logger: recordingLogger(),
  });
  service.registerProvider(scripted);
  const run = service.start(scripted.name, valid);
  await expect(run.result).rejects.toMatchObject({
    code: 'INVALID_CONFIG',
    message: expect.stringContaining('Namespace not found'),
  });
  await expect(service.attach(`subagent-${scripted.name}:gone`).result).rejects.toMatchObject({
    code: 'INVALID_CONFIG',
  });
});
