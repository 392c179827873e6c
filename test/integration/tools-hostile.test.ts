// What a careless tool author's tool or a hostile caller's answer does to an LLM child's run: a
// tool result of the wrong shape, one that cannot be sent, a rejection whose message cannot be
// read, an approval's reason of any length. Over real HTTP to the fake model server (a test
// double) and the real Temporal server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SubagentRun, type SubagentRunEvent, type SubagentTool, toolResult } from '../../src';
import { textReply, toolCallReply } from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { approveUpdate } from '../../workflows/definitions';
import { fakeModelHarness } from '../helpers/fake-model';
import { startWorker, text, uniqueName } from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-tools-hostile-'));
const parent = { id: 'parent', session: { header: { id: 's', cwd } } };

/** How many times each tool ran. */
const runs = new Map<string, number>();
/** A test tool that counts its calls and returns what `outcome` gives. */
const counted = (name: string, outcome: () => unknown, extra: Partial<SubagentTool> = {}): SubagentTool => ({
  name,
  description: `A test tool: ${name}.`,
  parameters: { type: 'object', properties: {} },
  async execute() {
    runs.set(name, (runs.get(name) ?? 0) + 1);
    return outcome() as ReturnType<SubagentTool['execute']>;
  },
  ...extra,
});
/** An error whose message getter throws. */
const unreadableError = () => {
  const err = new Error('never read');
  Object.defineProperty(err, 'message', {
    get() {
      throw new Error('the message getter throws');
    },
  });
  return err;
};
const cyclic = () => {
  const block: Record<string, unknown> = { type: 'image' };
  block.self = block;
  return { content: [block], isError: false };
};

// Retried quickly: the tests before the fixes saw every retry.
const settings = { retry: { initialInterval: '100 ms', maximumInterval: '200 ms' } };
const harness = fakeModelHarness((endpoint) => ({
  spawn: createSpawnProvider({
    name: uniqueName('tools-hostile'),
    endpoint,
    runSettings: settings,
    tools: [
      counted('returns_undefined', () => undefined),
      counted('returns_text_content', () => ({ content: 'not a list', isError: false })),
      counted('returns_bigint_text', () => ({ content: [{ type: 'text', text: 10n }], isError: false })),
      counted('returns_cycle', cyclic),
      counted('returns_null_spend', () => ({ ...toolResult('delegated'), nestedSpend: { 'some-run': null } })),
      counted('returns_fraction_spend', () => ({
        ...toolResult('delegated'),
        nestedSpend: { 'some-run': { turns: 1, modelCalls: 1, tokens: 0.5, costUsd: 0 } },
      })),
      counted('returns_3mb_block', () => ({
        content: [{ type: 'image', data: 'x'.repeat(3_000_000) }],
        isError: false,
      })),
      counted('inline_unreadable_error', () => Promise.reject(unreadableError()), { inline: true }),
      counted('needs_approval', () => toolResult('done it'), { needsApproval: true }),
      counted('echo', () => toolResult('echoed')),
      counted('fails_at_length', () => Promise.reject(new Error('y'.repeat(3_000_000)))),
      counted('fails_at_length_inline', () => Promise.reject(new Error('y'.repeat(3_000_000))), { inline: true }),
      counted('undecided', () => toolResult('done it'), { needsApproval: () => new Promise<boolean>(() => undefined) }),
    ],
  }),
}));

const start = (prompt: string) => harness.start('spawn', { prompt: text(prompt), parent });
/** The content of the tool message in the fake's last request. */
const lastToolMessage = () =>
  (harness.fake.requests.at(-1)!.body.messages as { role: string; content: string }[]).find(
    (message) => message.role === 'tool',
  )?.content;

/** The ids of the run's first `count` approval requests, as its events show them. */
async function approvalRequests(run: SubagentRun, count = 1): Promise<string[]> {
  const requestIds: string[] = [];
  for await (const event of run.events!() as AsyncIterable<SubagentRunEvent>) {
    if (event.type === 'approval-requested') requestIds.push(event.requestId);
    if (requestIds.length === count) break;
  }
  return requestIds;
}

/** Calls tool `name` once; the run completes after the model read `message` as its result. */
async function answeredOnce(_what: string, name: string, message: unknown): Promise<void> {
  const from = harness.fake.requests.length;
  harness.fake.enqueue(toolCallReply([{ name, arguments: {} }]), textReply('noted'));
  const run = start(`call ${name}`);
  expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
  expect(runs.get(name)).toBe(1);
  expect(harness.fake.requests.length - from).toBe(2);
  expect(lastToolMessage()).toEqual(message);
  await run.dispose();
}

describe('a tool result that is not one', () => {
  it.each([
    [
      'undefined',
      'returns_undefined',
      'Error: tool returns_undefined returned undefined, not a result (see toolResult)',
    ],
    [
      'content that is not a list',
      'returns_text_content',
      'Error: tool returns_text_content returned a result whose content is not a list of blocks',
    ],
    [
      'a text block holding a BigInt',
      'returns_bigint_text',
      'Error: tool returns_bigint_text returned a result whose text block 0 holds bigint, not a string',
    ],
    [
      'a block with a cycle',
      'returns_cycle',
      expect.stringMatching(/^Error: tool returns_cycle returned a result that cannot be sent: .*circular/),
    ],
    [
      'a block of 3 MB',
      'returns_3mb_block',
      expect.stringMatching(
        /^Error: tool returns_3mb_block's result is 3000\d+ bytes, over the \d+-byte payload limit/,
      ),
    ],
  ])(
    'a tool that returns %s answers the model with an error result, and runs once (it ran again on every retry)',
    answeredOnce,
  );

  it.each([
    [
      'a nestedSpend of null',
      'returns_null_spend',
      'Error: tool returns_null_spend returned a result whose nestedSpend for run "some-run" is not whole turns, modelCalls and tokens and a costUsd, none negative',
    ],
    [
      'a nestedSpend of half a token',
      'returns_fraction_spend',
      'Error: tool returns_fraction_spend returned a result whose nestedSpend for run "some-run" is not whole turns, modelCalls and tokens and a costUsd, none negative',
    ],
  ])(
    'a tool that returns %s answers the model with an error result (the workflow added it into the spend: its every task failed, for ever)',
    answeredOnce,
    30_000,
  );

  it.each([
    ['as an activity, retried as an infrastructure fault', 'fails_at_length', 10],
    ['inline', 'fails_at_length_inline', 1],
  ])(
    'a tool that rejects with a message of 3 MB, %s, answers with its first 2,000 characters (the worker could not report the failure: each attempt ran out its heartbeat timeout)',
    async (_how, name, attempts) => {
      const from = harness.fake.requests.length;
      harness.fake.enqueue(toolCallReply([{ name, arguments: {} }]), textReply('noted'));
      const run = start(`call ${name}`);
      expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
      expect(runs.get(name)).toBe(attempts);
      expect(harness.fake.requests.length - from).toBe(2);
      expect(lastToolMessage()).toMatch(
        new RegExp(`^Error: tool ${name} failed: (Activity task failed: )?y{2000}… \\(2998000 more characters\\)$`),
      );
      await run.dispose();
    },
    30_000,
  );

  it('an inline tool that rejects with an error whose message cannot be read answers with an error result; the model is asked once for that step', async () => {
    const from = harness.fake.requests.length;
    harness.fake.enqueue(toolCallReply([{ name: 'inline_unreadable_error', arguments: {} }]), textReply('noted'));
    const run = start('call inline_unreadable_error');
    expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
    // Before, reading the message threw in the model call, which was retried: the model was asked
    // again for the same step, and the tool's call was lost.
    expect(harness.fake.requests.length - from).toBe(2);
    expect(runs.get('inline_unreadable_error')).toBe(1);
    expect(lastToolMessage()).toBe('Error: tool inline_unreadable_error failed: [object Error]');
    await run.dispose();
  });
});

describe('an approval answer', () => {
  it.each([
    ['a decision that is a BigInt', { decision: 1n }],
    [
      'a decision that holds a cycle',
      (() => {
        const decision: Record<string, unknown> = {};
        decision.self = decision;
        return { decision };
      })(),
    ],
    [
      'a getter that throws',
      {
        get decision(): string {
          throw new Error('the getter throws');
        },
      },
    ],
  ])(
    "of %s is INVALID_REQUEST, and decides nothing (it was the TypeError or the getter's error)",
    async (_what, answer) => {
      harness.fake.enqueue(toolCallReply([{ name: 'needs_approval', arguments: {} }]), textReply('left alone'));
      const run = start('do it');
      const [requestId] = await approvalRequests(run);
      await expect(run.approve!(requestId, answer as never)).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
      expect((await harness.status(run.id)).pendingApprovals).toEqual([expect.objectContaining({ requestId })]);
      await run.approve!(requestId, 'deny');
      expect(await run.result).toEqual({ output: text('left alone'), stopReason: 'completed' });
      await run.dispose();
    },
  );

  it('to a request id of 10,000 characters under the run is UNKNOWN_APPROVAL, not UNAVAILABLE (the server refused its update id)', async () => {
    harness.fake.enqueue(textReply('nothing to approve'));
    const run = start('hello');
    await run.result;
    await expect(run.approve!(`${run.id}/${'t'.repeat(10_000)}`, 'allow')).rejects.toMatchObject({
      code: 'UNKNOWN_APPROVAL',
    });
    await run.dispose();
  });

  it('is asked for a call whose needsApproval function never decides, once it has had 10 s (the model call waited for it until its timeout, and again on every retry)', async () => {
    // Three such calls in one answer are decided together: in turn, they took three times as long.
    harness.fake.enqueue(
      toolCallReply([1, 2, 3].map((n) => ({ name: 'undecided', arguments: { n } }))),
      textReply('left alone'),
    );
    const run = start('do it');
    const requestIds = await approvalRequests(run, 3);
    for (const requestId of requestIds) await run.approve!(requestId, 'deny');
    expect(await run.result).toEqual({ output: text('left alone'), stopReason: 'completed' });
    expect(runs.get('undecided')).toBeUndefined();
    await run.dispose();
  }, 25_000);

  it('sent by a raw client with a decision that is neither, or a reason of 5,000 characters, is refused INVALID_REQUEST, and the request waits on; an unknown request is refused listing the newest 20 of 25 requests', async () => {
    harness.fake.enqueue(
      toolCallReply(Array.from({ length: 25 }, (_, n) => ({ name: 'needs_approval', arguments: { n } }))),
      textReply('left alone'),
    );
    const run = start('do it');
    const requestIds = await approvalRequests(run, 25);
    const [first] = requestIds as [string];
    const raw = harness.temporal.client.workflow.getHandle(run.id);
    const answer = (args: Record<string, unknown>) => raw.executeUpdate(approveUpdate, { args: [args as never] });
    for (const args of [
      { requestId: first, decision: 'maybe' },
      { requestId: first, decision: 'allow', reason: 'r'.repeat(5000) },
    ]) {
      await expect(answer(args)).rejects.toMatchObject({ cause: { type: 'INVALID_REQUEST' } });
    }
    const unknown = await answer({ requestId: `${run.id}/nope`, decision: 'deny' }).catch((err: Error) => err);
    expect((unknown as { cause: Error }).cause.message).toContain(
      `(requests: ${requestIds.slice(5).join(', ')} and 5 before them)`,
    );
    expect((await harness.status(run.id)).pendingApprovals).toHaveLength(25);
    for (const requestId of requestIds) await run.approve!(requestId, 'deny');
    expect(await run.result).toEqual({ output: text('left alone'), stopReason: 'completed' });
    await run.dispose();
  });

  it('cuts a reason at 4,096 characters, well-formed: a reason of 1.5 MB had failed the run for good (its workflow task past the 4 MiB message limit)', async () => {
    harness.fake.enqueue(toolCallReply([{ name: 'needs_approval', arguments: {} }]), textReply('left alone'));
    const run = start('do it');
    const [requestId] = await approvalRequests(run);
    const reason = `\ud800${'r'.repeat(1_500_000)}`;
    const decided = await run.approve!(requestId, { decision: 'deny', reason });
    expect(decided).toEqual({
      requestId,
      decision: 'deny',
      by: 'caller',
      reason: `\ufffd${'r'.repeat(4095)}`,
    });
    expect(await run.result).toEqual({ output: text('left alone'), stopReason: 'completed' });
    expect(lastToolMessage()).toBe(`Error: the call to needs_approval was not approved: \ufffd${'r'.repeat(4095)}`);
    expect(runs.get('needs_approval')).toBeUndefined();
    await run.dispose();
  });
});

describe('a structured_output call', () => {
  it('nested 100,000 deep, where the schema leaves the value open, is an error result the model reads; its next call is captured (the model call had failed every attempt)', async () => {
    const from = harness.fake.requests.length;
    const deep = `{"items":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    harness.fake.enqueue(
      toolCallReply([{ name: 'structured_output', arguments: deep }]),
      toolCallReply([{ name: 'structured_output', arguments: { items: [1] } }]),
    );
    const run = harness.start('spawn', {
      prompt: text('list them'),
      parent,
      outputSchema: { type: 'object', properties: { items: { type: 'array' } }, required: ['items'] },
    });
    expect(await run.result).toMatchObject({ stopReason: 'completed', structured: { items: [1] } });
    expect(harness.fake.requests.length - from).toBe(2);
    expect(lastToolMessage()).toBe('Error: invalid arguments: nested more than 1000 levels deep');
    await run.dispose();
  });

  it('of 200,000 wrong items lists the first 20 violations and how many more, and the model tries again (the whole list ended the run past the payload limit)', async () => {
    const from = harness.fake.requests.length;
    harness.fake.enqueue(
      toolCallReply([{ name: 'structured_output', arguments: { names: Array(200_000).fill(1) } }]),
      toolCallReply([{ name: 'structured_output', arguments: { names: ['ada'] } }]),
    );
    const run = harness.start('spawn', {
      prompt: text('name them'),
      parent,
      outputSchema: { type: 'object', properties: { names: { type: 'array', items: { type: 'string' } } } },
    });
    expect(await run.result).toMatchObject({ stopReason: 'completed', structured: { names: ['ada'] } });
    expect(harness.fake.requests.length - from).toBe(2);
    const listed = Array.from({ length: 20 }, (_, index) => `"value.names[${index}]" must be a string`).join('; ');
    expect(lastToolMessage()).toBe(`Error: invalid arguments: ${listed}; and 199980 more`);
    await run.dispose();
  });
});

describe("a provider's tools", () => {
  it('one whose parameters hold a cycle is INVALID_CONFIG from createSubagentWorker, nothing started (every model call of its runs failed on every attempt)', async () => {
    const parameters: Record<string, unknown> = { type: 'object' };
    parameters.properties = { self: parameters };
    const provider = createSpawnProvider({
      name: uniqueName('cyclic'),
      endpoint: { baseURL: harness.fake.baseURL, model: 'fake-model' },
      tools: [{ ...counted('loop', () => toolResult('looped')), parameters }],
    });
    await expect(startWorker(harness.temporal, [provider])).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringMatching(
        new RegExp(
          `^provider "${provider.name}" has a tool "loop" whose parameters cannot be sent as JSON: Converting circular structure to JSON`,
        ),
      ),
    });
  });

  it('two with one name are INVALID_CONFIG from createSubagentWorker, nothing started (the model was shown both, and the first ran for either)', async () => {
    const provider = createSpawnProvider({
      name: uniqueName('twice'),
      endpoint: { baseURL: harness.fake.baseURL, model: 'fake-model' },
      tools: [
        counted('lookup', () => toolResult('from the first')),
        counted('lookup', () => toolResult('from the second')),
      ],
    });
    await expect(startWorker(harness.temporal, [provider])).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: `provider "${provider.name}" has two tools named "lookup"`,
    });
  });
});

describe('a tool call id that names a property every object has', () => {
  it('"__proto__" on a tool the run\'s toolFilter denies is refused, and the tool never runs (the refusal was lost, and the tool ran)', async () => {
    harness.fake.enqueue(toolCallReply([{ id: '__proto__', name: 'echo', arguments: {} }]), textReply('noted'));
    const run = harness.start('spawn', {
      prompt: text('call echo'),
      parent,
      toolFilter: { deny: ['echo'] },
    });
    expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
    expect(lastToolMessage()).toMatch(/^Error: tool "echo" is not available to this subagent/);
    expect(runs.get('echo')).toBeUndefined();
    await run.dispose();
  });

  it('"constructor" on a tool that runs as an activity, beside a call answered in the model call, runs the tool (it was taken as answered)', async () => {
    harness.fake.enqueue(
      toolCallReply([
        { id: 'call_a', name: 'no_such_tool', arguments: {} },
        { id: 'constructor', name: 'echo', arguments: {} },
      ]),
      textReply('noted'),
    );
    const run = start('call echo');
    expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
    const toolMessages = (harness.fake.requests.at(-1)!.body.messages as { role: string }[]).filter(
      (message) => message.role === 'tool',
    );
    expect(toolMessages).toEqual([
      { role: 'tool', tool_call_id: 'call_a', content: expect.stringMatching(/^Error: tool "no_such_tool"/) },
      { role: 'tool', tool_call_id: 'constructor', content: 'echoed' },
    ]);
    expect(runs.get('echo')).toBe(1);
    await run.dispose();
  });
});

it('a call of a tool named in 900 KB is refused quoting the name cut short, and the run goes on (quoted whole, the answer passed the payload limit and ended the run)', async () => {
  const name = 'n'.repeat(900_000);
  harness.fake.enqueue(toolCallReply([{ name, arguments: {} }]), textReply('noted'));
  const run = start('call a tool that is not there');
  expect(await run.result).toEqual({ output: text('noted'), stopReason: 'completed' });
  const refusal = lastToolMessage()!;
  expect(refusal).toMatch(/^Error: tool "n{2000}… \(898000 more characters\)" is not available to this subagent/);
  await run.dispose();
});
