// Fault (a): 50 concurrent runs while their only worker process is SIGKILLed three times at
// random moments and restarted. Every run completes, each turn's result is recorded once, and
// every steering message reaches the child once, in order.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TranscriptEntry } from '../../src';
import { createScriptedProvider, ReadyProcess, ScriptedTurnEvent, spawnWorkerProcess } from '../../src/testing';
import { runContextQuery } from '../../workflows/definitions';
import { connectTestTemporal, newService, TestTemporal, text, uniqueName } from '../helpers/temporal';

let temporal: TestTemporal;
const workers: ReadyProcess[] = [];

beforeAll(async () => {
  temporal = await connectTestTemporal();
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await temporal?.close();
});

const RUNS = 50;
const MESSAGES = ['first', 'second', 'third'];
const textOf = (entry: TranscriptEntry) =>
  entry.kind === 'tool' ? '' : entry.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Follows the fixture's event log with one reader, resolving waits for a run's turn to start. */
function eventLog(file: string) {
  const seen = new Set<string>();
  const waiters: { key: string; resolve: () => void }[] = [];
  let read = 0;
  const timer = setInterval(() => {
    const text = readFileSync(file, 'utf8');
    const complete = text.lastIndexOf('\n') + 1;
    for (const line of text.slice(read, complete).split('\n').filter(Boolean)) {
      const event = JSON.parse(line) as ScriptedTurnEvent;
      if (event.kind === 'turn-start') seen.add(`${event.runId}#${event.turn}`);
    }
    read = complete;
    for (const waiter of waiters.splice(0)) {
      if (seen.has(waiter.key)) waiter.resolve();
      else waiters.push(waiter);
    }
  }, 100);
  return {
    turnStarted: (runId: string, turn: number) =>
      new Promise<void>((resolve) => waiters.push({ key: `${runId}#${turn}`, resolve })),
    close: () => clearInterval(timer),
  };
}

it('completes 50 concurrent runs through three SIGKILLs of their worker, each message delivered once and in order', async () => {
  const name = uniqueName('faults');
  const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-faults-')), 'events.jsonl');
  writeFileSync(eventsFile, '');
  const env = { PROVIDER_NAME: name, EVENTS_FILE: eventsFile };
  const service = newService(temporal);
  service.registerProvider(
    createScriptedProvider({
      name,
      resumable: false,
      runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms', maximumAttempts: 20 } },
    }),
  );
  let current = await spawnWorkerProcess(env);
  workers.push(current);

  const script = Array.from({ length: 8 }, () => ({ delayMs: 700, reply: 'answered {input}' }));
  const runs = Array.from({ length: RUNS }, (_, i) =>
    service.start(name, { prompt: text(`task ${i}`), parent: { id: 'p' }, agentOptions: { script } }),
  );
  // Steering messages go out while workers die: message k at a random moment of turn k, so each
  // arrives while the run is still busy and the run lives until its last message.
  const log = eventLog(eventsFile);
  const steering = Promise.all(
    runs.map(async (run) => {
      for (const [turn, message] of MESSAGES.entries()) {
        await log.turnStarted(run.id, turn);
        await sleep(Math.random() * 300);
        run.sendMessage!(text(message));
      }
    }),
  );
  const kills = (async () => {
    for (let kill = 0; kill < 3; kill++) {
      await sleep(800 + Math.random() * 1500);
      await current.kill('SIGKILL');
      current = await spawnWorkerProcess(env);
      workers.push(current);
    }
  })();

  const results = await Promise.all(runs.map((run) => run.result)).finally(() => log.close());
  await Promise.all([steering, kills]);
  expect(results.every((result) => result.stopReason === 'completed')).toBe(true);
  expect(new Set(workers.map((worker) => worker.child.pid)).size).toBe(4);

  const events = readFileSync(eventsFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ScriptedTurnEvent);
  for (const run of runs) {
    // The durable conversation: the prompt, then the three messages in order, each once.
    const { entries } = await temporal.client.workflow.getHandle(run.id).query(runContextQuery);
    const users = entries.filter((entry) => entry.kind === 'user').map(textOf);
    expect(users).toEqual([expect.stringMatching(/^task \d+$/), ...MESSAGES]);
    // One recorded result per turn, however many attempts the kills caused.
    const history = await temporal.client.workflow.getHandle(run.id).fetchHistory();
    const completions = history.events!.filter((event) => event.activityTaskCompletedEventAttributes).length;
    expect(completions).toBe(entries.filter((entry) => entry.kind === 'assistant').length);
    // No message reached two different turns (a retried turn repeats its own input only).
    const turnsOf = new Map<string, Set<number>>();
    for (const event of events.filter((e) => e.runId === run.id && e.kind === 'turn-start')) {
      for (const message of event.input) turnsOf.set(message, (turnsOf.get(message) ?? new Set()).add(event.turn));
    }
    for (const message of MESSAGES) expect(turnsOf.get(message)?.size).toBe(1);
  }
  await Promise.all(runs.map((run) => run.dispose()));
}, 180_000);
