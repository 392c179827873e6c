// Nested delegations: a provider running in a worker's activity delegates through the service the
// worker offers. The worker is a separate process, so depth and maxDepth hold across processes;
// cancelling a run cancels its descendants.
import type { SubagentRunEvent } from '../../src';
import { createScriptedProvider, ReadyProcess, ScriptedTurn, spawnWorkerProcess } from '../../src/testing';
import { statusQuery, SubagentRunOutcome, SubagentRunStatus } from '../../workflows/definitions';
import { connectTestTemporal, eventually, newService, TestTemporal, text, uniqueName } from '../helpers/temporal';

let temporal: TestTemporal;
let worker: ReadyProcess;
let service: ReturnType<typeof newService>;
const name = uniqueName('nested');

beforeAll(async () => {
  temporal = await connectTestTemporal();
  worker = await spawnWorkerProcess({ PROVIDER_NAME: name, EVENTS_FILE: '/dev/null' });
  service = newService(temporal);
  service.registerProvider(createScriptedProvider({ name, resumable: false }));
}, 60_000);
afterAll(async () => {
  await worker?.kill();
  await temporal?.close();
});

const status = (runId: string) =>
  temporal.client.workflow.getHandle(runId).query(statusQuery) as Promise<SubagentRunStatus>;
const closed = (runId: string) => temporal.client.workflow.getHandle(runId).result() as Promise<SubagentRunOutcome>;
const delegating = (inner: ScriptedTurn[], reply: string, maxDepth?: number): ScriptedTurn => ({
  delegate: { provider: name, prompt: 'nested task', script: inner, ...(maxDepth === undefined ? {} : { maxDepth }) },
  reply,
});
const start = (script: ScriptedTurn[], maxDepth?: number) =>
  service.start(name, {
    prompt: text('top task'),
    parent: { id: 'top-agent' },
    agentOptions: { script: script as never },
    ...(maxDepth === undefined ? {} : { maxDepth }),
  });

it('gives each nested run depth + 1 and a link to the run that delegated it', async () => {
  const run = start([delegating([delegating([{ reply: 'leaf' }], 'child got {child}')], 'parent got {child}')]);
  expect(await run.result).toEqual({ output: text('parent got child got leaf'), stopReason: 'completed' });
  const parent = await status(run.id);
  expect(parent).toMatchObject({ depth: 1, children: [expect.any(String)] });
  const child = await status(parent.children[0]!);
  expect(child).toMatchObject({ depth: 2, parentRunId: run.id, children: [expect.any(String)] });
  const grandchild = await status(child.children[0]!);
  expect(grandchild).toMatchObject({ depth: 3, parentRunId: parent.children[0] });
  // The link and the depth are search attributes too: the Web UI and `subagents list` filter on them.
  const { searchAttributes } = await temporal.client.workflow.getHandle(child.children[0]!).describe();
  expect(searchAttributes).toMatchObject({
    SubagentParentRunId: [parent.children[0]],
    SubagentDepth: [3],
    SubagentProvider: [name],
  });
});

it('joins the run a failed attempt of the turn delegated to when the retry delegates the same, instead of starting another', async () => {
  const run = start([
    { ...delegating([{ reply: 'leaf' }], 'parent got {child} on attempt {attempt}'), failAttempts: 1 },
  ]);
  expect(await run.result).toEqual({ output: text('parent got leaf on attempt 2'), stopReason: 'completed' });
  const [childId, ...others] = (await status(run.id)).children;
  expect(others).toEqual([]);
  expect((await closed(childId!)).result).toEqual({ output: text('leaf'), stopReason: 'completed' });
});

it("lets a child outlive an attempt of its parent's turn that timed out, for the retry to join", async () => {
  // The parent's turns time out after a second; the child, started by the worker's own service, takes 1.5 s.
  const hurried = newService(temporal);
  hurried.registerProvider(
    createScriptedProvider({ name, resumable: false, runSettings: { turnTimeout: '1 second' } }),
  );
  const run = hurried.start(name, {
    prompt: text('top task'),
    parent: { id: 'top-agent' },
    agentOptions: {
      script: [delegating([{ delayMs: 1500, reply: 'leaf' }], 'parent got {child} on attempt {attempt}')] as never,
    },
  });
  // Attempt 2 as a rule; a later one when the machine is slow enough that 2 timed out too.
  expect(await run.result).toEqual({
    output: [{ type: 'text', text: expect.stringMatching(/^parent got leaf on attempt [2-9]$/) }],
    stopReason: 'completed',
  });
  expect((await status(run.id)).children).toHaveLength(1);
});

it('holds maxDepth across the process boundary: a nested run inherits the cap of the run above', async () => {
  const run = start([delegating([delegating([{ reply: 'too deep' }], 'child got {child}')], 'parent got {child}')], 2);
  expect(await run.result).toEqual({
    output: text('parent got child got refused: DEPTH_EXCEEDED'),
    stopReason: 'completed',
  });
  const parent = await status(run.id);
  expect((await status(parent.children[0]!)).children).toEqual([]);
});

it('keeps the cap of the run above when a nested request sets a looser maxDepth of its own', async () => {
  // Before, a nested request's own maxDepth replaced the cap above it, so a delegation asking for
  // 5 below a top run capped at 2 started a run at depth 3.
  const run = start(
    [delegating([delegating([{ reply: 'too deep' }], 'child got {child}', 5)], 'parent got {child}')],
    2,
  );
  expect(await run.result).toEqual({
    output: text('parent got child got refused: DEPTH_EXCEEDED'),
    stopReason: 'completed',
  });
});

it('cancels every descendant when a run is cancelled', async () => {
  const run = start([delegating([delegating([{ hang: true }], 'child got {child}')], 'parent got {child}')]);
  const childrenOf = (runId: string) =>
    status(runId).then(
      (s) => s.children,
      () => [] as string[],
    ); // not started yet
  const [childId, grandchildId] = await eventually(async () => {
    const [child] = await childrenOf(run.id);
    const [grandchild] = child ? await childrenOf(child) : [];
    return child && grandchild ? [child, grandchild] : undefined;
  }, 30_000);
  // A reader of the whole tree, following it, ends with the root's close whatever its nested runs are doing then.
  const tree: SubagentRunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events!({ nested: true })) tree.push(event);
  })();
  await eventually(() => tree.find((event) => event.runId === grandchildId));
  run.cancel('the task was withdrawn');
  expect((await run.result).stopReason).toBe('aborted');
  await reading;
  expect(tree.filter((event) => event.runId === run.id).at(-1)).toMatchObject({
    type: 'closed',
    closedBy: 'cancelled',
  });
  const outcomes = await Promise.all([closed(run.id), closed(childId), closed(grandchildId)]);
  expect(outcomes.map((outcome) => [outcome.result.stopReason, outcome.closedBy])).toEqual([
    ['aborted', 'cancelled'],
    ['aborted', 'cancelled'],
    ['aborted', 'cancelled'],
  ]);
}, 60_000);

it('hears from each nested run when it settles: child-settled after child-start, with its stop reason', async () => {
  // The top run parks once it settles, so the nested run's word reaches it however late.
  const parking = newService(temporal);
  parking.registerProvider(createScriptedProvider({ name, resumable: true }));
  const run = parking.start(name, {
    prompt: text('top task'),
    parent: { id: 'top-agent' },
    agentOptions: { script: [delegating([{ reply: 'leaf' }], 'parent got {child}')] as never },
  });
  expect((await run.result).output).toEqual(text('parent got leaf'));
  const [childId] = (await status(run.id)).children;
  const told: unknown[] = [];
  for await (const event of run.events!()) {
    if (event.type === 'child-start' || event.type === 'child-settled') {
      const { offset: _, time: __, runId: ___, depth: ____, ...step } = event;
      told.push(step);
    }
    if (event.type === 'child-settled') break;
  }
  expect(told).toEqual([
    { type: 'child-start', childId },
    { type: 'child-settled', childId, segment: 0, stopReason: 'completed' },
  ]);
  await run.dispose();
}, 60_000);

it('streams the events of the whole tree, each tagged with its run and depth, and resumes at a cursor', async () => {
  const run = start([delegating([delegating([{ reply: 'leaf' }], 'child got {child}')], 'parent got {child}')]);
  const live: SubagentRunEvent[] = [];
  for await (const event of run.events!({ nested: true })) live.push(event);
  expect((await run.result).stopReason).toBe('completed');

  const byRun = (events: SubagentRunEvent[]) => {
    const runs = new Map<string, SubagentRunEvent[]>();
    for (const event of events) runs.set(event.runId, [...(runs.get(event.runId) ?? []), event]);
    return runs;
  };
  const parent = await status(run.id);
  const child = await status(parent.children[0]!);
  const tree = byRun(live);
  expect([...tree.keys()].sort()).toEqual([run.id, parent.children[0], child.children[0]].sort());
  for (const [runId, events] of tree) {
    // Each run's own stream, whole and in order: from its first offset to its close.
    expect(events.map((event) => event.offset)).toEqual(events.map((_, index) => index));
    expect(events.at(-1)).toMatchObject({ type: 'closed' });
    expect(new Set(events.map((event) => event.depth))).toEqual(
      new Set([runId === run.id ? 1 : runId === parent.children[0] ? 2 : 3]),
    );
  }
  expect(tree.get(run.id)).toContainEqual(
    expect.objectContaining({ type: 'child-start', childId: parent.children[0] }),
  );
  expect(tree.get(child.children[0]!)).toContainEqual(
    expect.objectContaining({ type: 'text', text: 'leaf', depth: 3 }),
  );

  // A reader that stopped part way through resumes at its cursor: every event of every run once.
  const cursor: Record<string, number> = {};
  const first: SubagentRunEvent[] = [];
  for await (const event of run.events!({ nested: true, follow: false })) {
    first.push(event);
    cursor[event.runId] = event.offset + 1;
    if (first.length === Math.floor(live.length / 2)) break;
  }
  const rest: SubagentRunEvent[] = [];
  for await (const event of run.events!({ nested: true, follow: false, from: cursor })) rest.push(event);
  const again = byRun([...first, ...rest]);
  expect(new Map([...again].map(([runId, events]) => [runId, events.map((e) => e.offset)]))).toEqual(
    new Map([...tree].map(([runId, events]) => [runId, events.map((e) => e.offset)])),
  );
  expect([...first, ...rest]).toHaveLength(live.length);
}, 60_000);
