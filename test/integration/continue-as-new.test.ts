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
import { createSpawnProvider } from '../../src/worker';
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

it('continues a long segment as new between turns, delivering every message once and in order', async () => {
  const messages = Array.from({ length: 8 }, (_, i) => `m${i + 1}`);
  let next = 0;
  // Each turn starts with the next message on its way, so the segment keeps running turn after turn,
  // and the message sent at a continue-as-new boundary must survive the transition.
  onTurnStart = (event) => {
    if (next < messages.length) run.sendMessage!(text(messages[next++]!));
    return event;
  };
  const run = service.start(scripted.name, {
    prompt: text('m0'),
    parent: { id: 'p' },
    agentOptions: { script: Array.from({ length: 9 }, () => ({ delayMs: 150, reply: '{input}' })) },
  });
  const result = await run.result;
  onTurnStart = () => undefined;
  const inputs = events.filter((e) => e.runId === run.id && e.kind === 'turn-start').map((e) => e.input);
  expect(inputs.flat()).toEqual(['m0', ...messages]);
  expect(result).toEqual({ output: text(inputs.at(-1)!.join(' | ')), stopReason: 'completed' });
  expect(await runsOf(run.id)).toBeGreaterThan(1);
  await run.dispose();
}, 60_000);

it('carries an agent-loop conversation and a waiting message across continue-as-new', async () => {
  const since = fake.requests.length;
  fake.setHandler((request) => {
    const last = request.body.messages.at(-1);
    if (last.role === 'user') return toolCallReply([{ name: 'list_directory', arguments: {} }]);
    // The first answer is slow, so the second message arrives while it is being written.
    return textReply(`answered ${request.body.messages.length} messages`, {
      delayMs: fake.requests.length - since === 2 ? 500 : 0,
    });
  });
  const run = service.start('spawn', { prompt: text('first'), parent: { id: 'p' } });
  await fake.waitForRequests(since + 2);
  run.sendMessage!(text('second'));
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
