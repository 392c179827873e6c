// Long runs: 1,000 steering messages over 300 turns in one run stay within Temporal's history
// limits by continuing as new between turns, and no message is lost at a transition. Runs on a
// dev server of its own that suggests continue-as-new every 500 events.
import type { TranscriptEntry } from '../../src';
import { createScriptedProvider, ScriptedTurnEvent } from '../../src/testing';
import { runContextQuery, sendMessageSignal } from '../../workflows/definitions';
import { newService, startTestServer, startWorker, TestServer, text } from '../helpers/temporal';

const THRESHOLD = 500;
let temporal: TestServer;
let stopWorker: () => Promise<void>;
let onTurnStart: (event: ScriptedTurnEvent) => Promise<void> = async () => undefined;
const turnsSeen = new Map<string, Set<number>>();
const scripted = createScriptedProvider({
  observer: (event) => {
    if (event.kind !== 'turn-start') return;
    turnsSeen.set(event.runId, (turnsSeen.get(event.runId) ?? new Set()).add(event.turn));
    return onTurnStart(event);
  },
});
let service: ReturnType<typeof newService>;

beforeAll(async () => {
  temporal = await startTestServer({ dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': THRESHOLD } });
  stopWorker = await startWorker(temporal, [scripted]);
  service = newService(temporal);
  service.registerProvider(scripted);
}, 60_000);
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
});

it('carries 1,000 messages over 300 turns through continue-as-new, each once and in order', async () => {
  let sent = 0;
  let runId = '';
  // Turns 0-99 bring four messages each, turns 100-299 three: 1,000 in all. Each batch is
  // recorded before its turn ends, so the run keeps turning until the last one is answered.
  onTurnStart = async (event) => {
    if (event.runId !== runId || event.turn >= 300) return;
    const batch = event.turn < 100 ? 4 : 3;
    const handle = temporal.client.workflow.getHandle(runId);
    for (let i = 0; i < batch; i++) await handle.signal(sendMessageSignal, { content: text(`m${++sent}`) });
  };
  const run = service.start(scripted.name, { prompt: text('m0'), parent: { id: 'p' }, agentOptions: { script: [] } });
  runId = run.id;
  const result = await run.result;
  expect(result.stopReason).toBe('completed');
  expect(sent).toBe(1000);
  expect(turnsSeen.get(run.id)!.size).toBe(301);

  const { entries } = await temporal.client.workflow.getHandle(run.id).query(runContextQuery);
  const users = entries.filter((entry): entry is Extract<TranscriptEntry, { kind: 'user' }> => entry.kind === 'user');
  expect(users.map((entry) => (entry.content[0] as { text: string }).text)).toEqual(
    Array.from({ length: 1001 }, (_, i) => `m${i}`),
  );

  const executions = [];
  for await (const execution of temporal.client.workflow.list({ query: `WorkflowId = '${run.id}'` })) {
    executions.push(execution);
  }
  expect(executions.length).toBeGreaterThan(3);
  // Each run stops near the threshold: at most one turn's events past it.
  for (const execution of executions) expect(execution.historyLength).toBeLessThan(THRESHOLD + 60);
  await run.dispose();
}, 180_000);
