// A run cancelled or disposed cancels its nested runs, parked ones included, and the cancels land
// before it closes: the server drops a cancel whose sender has already closed. The nested runs here are
// background delegations, which outlive the step that started them and park when they settle.
import type { SubagentRun } from '../../src';
import { textReply, toolCallReply } from '../../src/testing';
import { createDelegationTool, createSpawnProvider } from '../../src/worker';
import { fakeModelHarness } from '../helpers/fake-model';
import { eventually, text, uniqueName } from '../helpers/temporal';

const parent = { id: 'parent' };

const harness = fakeModelHarness((endpoint) => {
  const name = uniqueName('background-tree');
  return {
    /** An LLM child whose `subagent` tool starts a run of its own kind in the background. */
    tree: createSpawnProvider({
      name,
      tools: [createDelegationTool({ provider: name, background: true })],
      endpoint,
    }),
  };
});

/** A root run, settled and parked, whose one nested run has settled and parked too; the nested run's id. */
async function parkedTree(): Promise<{ root: SubagentRun; nestedId: string }> {
  harness.fake.enqueue(
    toolCallReply([{ name: 'subagent', arguments: { description: 'on the side', prompt: 'side task' } }]),
    // The root's answer and the nested run's, in whichever order they ask.
    textReply('done'),
    textReply('done'),
  );
  const root = harness.start('tree', { prompt: text('go'), parent });
  expect(await root.result).toMatchObject({ stopReason: 'completed' });
  const nestedId = await eventually(async () => {
    const [child] = (await harness.status(root.id)).children;
    return child && (await harness.status(child)).phase === 'parked' ? child : undefined;
  });
  return { root, nestedId };
}

/** Whether the run's history holds a cancel request. */
async function cancelRequested(runId: string): Promise<boolean> {
  const { events } = await harness.temporal.client.workflow.getHandle(runId).fetchHistory();
  return (events ?? []).some((event) => event.workflowExecutionCancelRequestedEventAttributes);
}

it('cancels a parked nested run when its parent is disposed, before the parent closes', async () => {
  const { root, nestedId } = await parkedTree();
  await root.dispose();
  expect((await harness.closed(root.id)).closedBy).toBe('disposed');
  // The parent closed only once the server had its cancel: the nested run's history holds it now.
  expect(await cancelRequested(nestedId)).toBe(true);
  expect(await harness.closed(nestedId)).toMatchObject({ closedBy: 'cancelled', result: { stopReason: 'completed' } });
}, 60_000);

it('cancels a parked nested run when its parked parent is cancelled (as `subagents cancel` does)', async () => {
  const { root, nestedId } = await parkedTree();
  await harness.temporal.client.workflow.getHandle(root.id).cancel();
  expect((await harness.closed(root.id)).closedBy).toBe('cancelled');
  expect(await cancelRequested(nestedId)).toBe(true);
  expect(await harness.closed(nestedId)).toMatchObject({ closedBy: 'cancelled', result: { stopReason: 'completed' } });
}, 60_000);
