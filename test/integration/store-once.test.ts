// Each tool result and each steering message is in history once: where it entered (the tool
// activity's result, the signal), never again in the input of the activity that hands it to the
// child. The child still gets every one of them.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Payload } from '@temporalio/common';
import { runStarted } from '../../src';
import type { HistoryEvent } from '../../src/temporal/run-history';
import { type ScriptedTurnEvent, createScriptedProvider, textReply, toolCallReply } from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { fakeModelHarness } from '../helpers/fake-model';
import { eventually, text, turnGates, uniqueName } from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-store-once-'));
writeFileSync(join(cwd, 'notes.txt'), 'tool-output-marker\n');

const turns: ScriptedTurnEvent[] = [];
const scripted = createScriptedProvider({
  name: uniqueName('scripted'),
  observer: (event) => void (event.kind === 'turn-start' && turns.push(event)),
});
const gates = turnGates();

const harness = fakeModelHarness((endpoint) => ({
  spawn: createSpawnProvider({ name: uniqueName('spawn'), endpoint }),
  scripted,
}));

/** Resolves once the run holds `count` messages for its child. */
const queued = (runId: string, count: number) =>
  eventually(async () => ((await harness.status(runId)).pendingMessages === count ? true : undefined));

/** Occurrences of `marker` in the payloads of the run's history (all its runs): all, and in activity inputs. */
async function occurrences(runId: string, marker: string): Promise<{ all: number; activityInputs: number }> {
  const found = { all: 0, activityInputs: 0 };
  const query = `WorkflowId = '${runId}'`;
  const count = (value: unknown): number => {
    if (!value || typeof value !== 'object') return 0;
    const payload = value as Payload;
    if (payload.data instanceof Uint8Array && payload.metadata) {
      return Buffer.from(payload.data).toString('utf8').split(marker).length - 1;
    }
    return Object.values(value).reduce((sum: number, child) => sum + count(child), 0);
  };
  for await (const { history } of harness.temporal.client.workflow.list({ query }).intoHistories()) {
    for (const event of (history as { events?: HistoryEvent[] }).events ?? []) {
      found.all += count(event);
      found.activityInputs += count(event.activityTaskScheduledEventAttributes?.input);
    }
  }
  return found;
}

it('keeps an LLM child’s tool result and steering message once in history, and the child gets both', async () => {
  const since = harness.fake.requests.length;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  harness.fake.setHandler(async () => {
    const call = harness.fake.requests.length - since;
    if (call === 1) return toolCallReply([{ name: 'read_file', arguments: { path: 'notes.txt' } }]);
    // The second call waits for the message, which so joins at the next step boundary.
    if (call === 2) {
      await released;
      return toolCallReply([{ name: 'list_directory', arguments: {} }]);
    }
    return textReply('done');
  });
  const run = harness.start('spawn', {
    prompt: text('read the notes'),
    parent: { id: 'p', session: { header: { id: 's', cwd } } },
  });
  await harness.fake.waitForRequests(since + 2);
  run.sendMessage!(text('steering-marker'));
  await queued(run.id, 1);
  release();
  expect(await run.result).toEqual({ output: text('done'), stopReason: 'completed' });

  const last = harness.fake.requests.at(-1)!.body.messages as { role: string; content: string }[];
  expect(last.filter((m) => m.content?.includes('tool-output-marker'))).toHaveLength(1);
  expect(last.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['read the notes', 'steering-marker']);
  // No continue-as-new here: each is in history exactly once, where it entered.
  expect(await occurrences(run.id, 'tool-output-marker')).toEqual({ all: 1, activityInputs: 0 });
  expect(await occurrences(run.id, 'steering-marker')).toEqual({ all: 1, activityInputs: 0 });
  await run.dispose();
}, 60_000);

it('keeps a turn-based child’s steering message and resume content once in history, and the child gets both', async () => {
  const run = harness.service.start(scripted.name, {
    prompt: text('first'),
    parent: { id: 'p' },
    agentOptions: { script: [{ waitFor: gates.waitFor, reply: 'one' }, { reply: 'two' }, { reply: 'three' }] },
  });
  await runStarted(run);
  run.sendMessage!(text('message-marker'));
  await queued(run.id, 1);
  gates.open(run.id, 0);
  expect(await run.result).toEqual({ output: text('two'), stopReason: 'completed' });
  const resumed = run.resume!(text('resume-marker'));
  expect(await resumed.result).toEqual({ output: text('three'), stopReason: 'completed' });
  const inputs = turns.filter((event) => event.runId === run.id).map((event) => event.input);
  expect(inputs).toEqual([['first'], ['message-marker'], ['resume-marker']]);
  // The resume continues as new, which carries the conversation into the next run's start; no
  // activity input carries either message again.
  expect((await occurrences(run.id, 'message-marker')).activityInputs).toBe(0);
  expect((await occurrences(run.id, 'resume-marker')).activityInputs).toBe(0);
  await resumed.dispose();
}, 60_000);
