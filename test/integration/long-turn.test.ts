// A single turn of any length: one agent-loop turn of 1,000 model calls whose tool reads 200 KiB
// each time completes, continuing as new between model calls as the server suggests, with every
// output offloaded from the history (200 MB of conversation; under 10 MB of history in all its
// runs) and the oldest outputs left out of what the model is sent once past its budget.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FilePayloadStore, payloadStorage } from '../../src/temporal/payload-store';
import { textReply, toolCallReply } from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { fakeModelHarness } from '../helpers/fake-model';
import { text, uniqueName } from '../helpers/temporal';

const CALLS = 1000;
const OUTPUT_BYTES = 200 * 1024;
const cwd = mkdtempSync(join(tmpdir(), 'subagent-long-turn-'));
// Lines of 64 characters, so the file tool's line-bounded reads keep it whole.
writeFileSync(join(cwd, 'big.txt'), `${'z'.repeat(63)}\n`.repeat(OUTPUT_BYTES / 64));

const store = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-long-turn-payloads-')));
const harness = fakeModelHarness(
  (endpoint) => ({
    spawn: createSpawnProvider({
      name: uniqueName('long-turn'),
      endpoint: { ...endpoint, maxContextChars: 1_000_000 },
      runSettings: { maxStepsPerTurn: CALLS + 10 },
    }),
  }),
  { dataConverter: { externalStorage: payloadStorage(store) } },
);

it('completes a 1,000-call turn of 200 KiB tool outputs with under 10 MB of history', async () => {
  const since = harness.fake.requests.length;
  let largest = 0;
  harness.fake.setHandler(async (request) => {
    largest = Math.max(largest, JSON.stringify(request.body.messages).length);
    return harness.fake.requests.length - since <= CALLS
      ? toolCallReply([{ name: 'read_file', arguments: { path: 'big.txt' } }])
      : textReply('read it all');
  });
  const run = harness.start('spawn', {
    prompt: text('read big.txt a thousand times'),
    parent: { id: 'p', session: { header: { id: 's', cwd } } },
  });
  expect(await run.result).toEqual({ output: text('read it all'), stopReason: 'completed' });
  expect(harness.fake.requests.length - since).toBe(CALLS + 1);

  let runs = 0;
  let historyBytes = 0;
  for await (const execution of harness.temporal.client.workflow.list({ query: `WorkflowId = '${run.id}'` })) {
    const { raw } = await harness.temporal.client.workflow.getHandle(run.id, execution.runId).describe();
    historyBytes += Number(raw.workflowExecutionInfo?.historySizeBytes ?? 0);
    runs++;
  }
  // It continued as new mid-turn (one turn, so nowhere else), and history holds references only.
  expect(runs).toBeGreaterThan(1);
  expect(historyBytes).toBeLessThan(10 * 1024 * 1024);
  // The model was never sent more than its budget and the newest outputs (plus the notes).
  expect(largest).toBeLessThan(1_000_000 + 2 * OUTPUT_BYTES);
  await run.dispose();
}, 600_000);
