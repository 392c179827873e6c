// A run cancelled or disposed cancels its nested runs, parked ones included, and the cancels land
// before it closes: the server drops a cancel whose sender has already closed. The nested runs here are
// background delegations, which outlive the step that started them and park when they settle.
import type { SubagentRun } from '../../src';
import { type FakeOpenAI, startFakeOpenAI, textReply, toolCallReply } from '../../src/testing';
import { createDelegationTool, createSpawnProvider } from '../../src/worker';
import { type SubagentRunOutcome, type SubagentRunStatus, statusQuery } from '../../workflows/definitions';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  text,
  uniqueName,
} from '../helpers/temporal';

const parent = { id: 'parent' };

let fake: FakeOpenAI;
let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
let stopWorker: () => Promise<void>;
/** An LLM child whose `subagent` tool starts a run of its own kind in the background. */
let tree: ReturnType<typeof createSpawnProvider>;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  const name = uniqueName('background-tree');
  tree = createSpawnProvider({
    name,
    tools: [createDelegationTool({ provider: name, background: true })],
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
  });
  temporal = await connectTestTemporal();
  stopWorker = await startWorker(temporal, [tree]);
  service = newService(temporal);
  service.registerProvider(tree);
});
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
  await fake?.close();
});
// A failed test's unused replies would answer the next test's model calls.
afterEach(() => {
  fake.discardQueued();
});

const status = (runId: string) =>
  temporal.client.workflow.getHandle(runId).query(statusQuery) as Promise<SubagentRunStatus>;
const closed = (runId: string) => temporal.client.workflow.getHandle(runId).result() as Promise<SubagentRunOutcome>;

/** A root run, settled and parked, whose one nested run has settled and parked too; the nested run's id. */
async function parkedTree(): Promise<{ root: SubagentRun; nestedId: string }> {
  fake.enqueue(
    toolCallReply([{ name: 'subagent', arguments: { description: 'on the side', prompt: 'side task' } }]),
    // The root's answer and the nested run's, in whichever order they ask.
    textReply('done'),
    textReply('done'),
  );
  const root = service.start(tree.name, { prompt: text('go'), parent });
  expect(await root.result).toMatchObject({ stopReason: 'completed' });
  const nestedId = await eventually(async () => {
    const [child] = (await status(root.id)).children;
    return child && (await status(child)).phase === 'parked' ? child : undefined;
  });
  return { root, nestedId };
}

/** Whether the run's history holds a cancel request. */
async function cancelRequested(runId: string): Promise<boolean> {
  const { events } = await temporal.client.workflow.getHandle(runId).fetchHistory();
  return (events ?? []).some((event) => event.workflowExecutionCancelRequestedEventAttributes);
}

it('cancels a parked nested run when its parent is disposed, before the parent closes', async () => {
  const { root, nestedId } = await parkedTree();
  await root.dispose();
  expect((await closed(root.id)).closedBy).toBe('disposed');
  // The parent closed only once the server had its cancel: the nested run's history holds it now.
  expect(await cancelRequested(nestedId)).toBe(true);
  expect(await closed(nestedId)).toMatchObject({ closedBy: 'cancelled', result: { stopReason: 'completed' } });
}, 60_000);

it('cancels a parked nested run when its parked parent is cancelled (as `subagents cancel` does)', async () => {
  const { root, nestedId } = await parkedTree();
  await temporal.client.workflow.getHandle(root.id).cancel();
  expect((await closed(root.id)).closedBy).toBe('cancelled');
  expect(await cancelRequested(nestedId)).toBe(true);
  expect(await closed(nestedId)).toMatchObject({ closedBy: 'cancelled', result: { stopReason: 'completed' } });
}, 60_000);
