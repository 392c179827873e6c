// Long segments continue as new between turns when the server suggests it, carrying the
// conversation and every pending message; a caller waiting on the result follows the run.
// Runs against a dev server of its own whose continue-as-new threshold is tiny.
import {
  createScriptedProvider,
  FakeOpenAI,
  ScriptedTurnEvent,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { runStarted, type SubagentRun } from '../../src';
import { createSpawnProvider } from '../../src/worker';
import { statusQuery } from '../../workflows/definitions';
import { eventually, newService, startTestServer, startWorker, TestServer, text } from '../helpers/temporal';

let temporal: TestServer;
let fake: FakeOpenAI;
let stopWorker: () => Promise<void>;
let service: ReturnType<typeof newService>;
const events: ScriptedTurnEvent[] = [];
let onTurnStart: (event: ScriptedTurnEvent) => unknown = () => undefined;
const scripted = createScriptedProvider({
  observer: (event) => {
    events.push(event);
    if (event.kind === 'turn-start') return onTurnStart(event);
  },
});

beforeAll(async () => {
  temporal = await startTestServer({ dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': 20 } });
  fake = await startFakeOpenAI();
  const spawn = createSpawnProvider({ endpoint: { baseURL: fake.baseURL, model: 'fake-model' } });
  stopWorker = await startWorker(temporal, [scripted, spawn], { heartbeatIntervalMs: 200 });
  service = newService(temporal);
  service.registerProvider(scripted);
  service.registerProvider(spawn);
}, 60_000);
afterAll(async () => {
  await stopWorker?.();
  await fake?.close();
  await temporal?.close();
});

async function runsOf(workflowId: string): Promise<number> {
  const query = `WorkflowId = '${workflowId}'`;
  return eventually(async () => {
    const { count } = await temporal.client.workflow.count(query);
    return count > 1 ? count : undefined;
  });
}

const pendingOf = async (run: SubagentRun) =>
  (await temporal.client.workflow.getHandle(run.id).query(statusQuery)).pendingMessages;

it('continues a long segment as new between turns, delivering every message once and in order', async () => {
  const messages = Array.from({ length: 8 }, (_, i) => `m${i + 1}`);
  let next = 0;
  // Each turn starts by queueing the next message and goes on once it is in, so the segment keeps
  // running turn after turn, and a message queued at a continue-as-new boundary must survive it.
  onTurnStart = async () => {
    if (next >= messages.length) return;
    run.sendMessage!(text(messages[next++]!));
    await eventually(async () => ((await pendingOf(run)) === 1 ? true : undefined));
  };
  const run = service.start(scripted.name, {
    prompt: text('m0'),
    parent: { id: 'p' },
    agentOptions: { script: Array.from({ length: 9 }, () => ({ reply: '{input}' })) },
  });
  await runStarted(run);
  // An observer that began in the first Temporal run follows the segment into the next ones.
  const observer = service.attach(run.id);
  const result = await run.result;
  expect(await observer.result).toEqual(result);
  onTurnStart = () => undefined;
  const inputs = events.filter((e) => e.runId === run.id && e.kind === 'turn-start').map((e) => e.input);
  expect(inputs.flat()).toEqual(['m0', ...messages]);
  expect(result).toEqual({ output: text(inputs.at(-1)!.join(' | ')), stopReason: 'completed' });
  expect(await runsOf(run.id)).toBeGreaterThan(1);
  await run.dispose();
}, 60_000);

it('carries an agent-loop conversation and a waiting message across continue-as-new', async () => {
  const since = fake.requests.length;
  let messageQueued!: () => void;
  const queued = new Promise<void>((resolve) => (messageQueued = resolve));
  fake.setHandler(async (request) => {
    const last = request.body.messages.at(-1);
    if (last.role === 'user') return toolCallReply([{ name: 'list_directory', arguments: {} }]);
    // The first answer waits for the second message, which so arrives while it is being written.
    if (fake.requests.length - since === 2) await queued;
    return textReply(`answered ${request.body.messages.length} messages`);
  });
  const run = service.start('spawn', { prompt: text('first'), parent: { id: 'p' } });
  await fake.waitForRequests(since + 2);
  run.sendMessage!(text('second'));
  await eventually(async () => ((await pendingOf(run)) === 1 ? true : undefined));
  messageQueued();
  expect(await run.result).toEqual({ output: text('answered 8 messages'), stopReason: 'completed' });
  const last = fake.requests.at(-1)!.body.messages as { role: string; content: string }[];
  expect(last.map((m) => m.role)).toEqual([
    'system',
    'user',
    'assistant',
    'tool',
    'assistant',
    'user',
    'assistant',
    'tool',
  ]);
  expect(last.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['first', 'second']);
  expect(await runsOf(run.id)).toBeGreaterThan(1);
  await run.dispose();
});

it('continues one long agent-loop turn as new between its model calls, carrying its conversation', async () => {
  const since = fake.requests.length;
  const steps = 12;
  fake.setHandler(async () => {
    const calls = fake.requests.length - since;
    return calls <= steps ? toolCallReply([{ name: 'list_directory', arguments: {} }]) : textReply('done');
  });
  const run = service.start('spawn', { prompt: text('one long turn'), parent: { id: 'p' } });
  // A message that arrives mid-turn is handed to the child once, at a step boundary.
  await fake.waitForRequests(since + 3);
  run.sendMessage!(text('mid-turn'));
  expect(await run.result).toEqual({ output: text('done'), stopReason: 'completed' });
  // One turn only: no boundary between turns to continue at, so every continuation was mid-turn.
  expect(await runsOf(run.id)).toBeGreaterThan(1);
  const last = fake.requests.at(-1)!.body.messages as { role: string; content: string }[];
  expect(last.filter((m) => m.role === 'assistant')).toHaveLength(steps);
  expect(last.filter((m) => m.role === 'tool')).toHaveLength(steps);
  expect(last.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['one long turn', 'mid-turn']);
  await run.dispose();
}, 60_000);
