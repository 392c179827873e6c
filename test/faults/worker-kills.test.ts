// Fault (a): 50 concurrent runs while their only worker process is SIGKILLed three times at
// random moments and restarted. The kills interrupt turns, which are redone; every run completes,
// each turn's result is recorded once, and every steering message reaches the child once, in order.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SubagentRun, TranscriptEntry } from '../../src';
import { createScriptedProvider, ReadyProcess, ScriptedTurnEvent, spawnWorkerProcess } from '../../src/testing';
import { runContextQuery, statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  newService,
  TestTemporal,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

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

/** Follows the fixture's event log with one reader: turns started, and what each worker holds. */
function eventLog(file: string) {
  const seen = new Set<string>();
  const waiters: { key: string; resolve: () => void }[] = [];
  /** By worker pid: the attempts it has begun and not ended, and whether it redid an interrupted one. */
  const inFlight = new Map<number, Set<string>>();
  const redone = new Set<number>();
  let read = 0;
  const timer = setInterval(() => {
    const text = readFileSync(file, 'utf8');
    const complete = text.lastIndexOf('\n') + 1;
    for (const line of text.slice(read, complete).split('\n').filter(Boolean)) {
      const event = JSON.parse(line) as ScriptedTurnEvent & { pid: number };
      const attempt = `${event.runId}#${event.turn}#${event.attempt}`;
      if (!inFlight.has(event.pid)) inFlight.set(event.pid, new Set());
      if (event.kind === 'turn-start') {
        seen.add(`${event.runId}#${event.turn}`);
        inFlight.get(event.pid)!.add(attempt);
        if (event.attempt > 1) redone.add(event.pid);
      }
      if (event.kind === 'turn-end') inFlight.get(event.pid)!.delete(attempt);
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
    inFlight: (pid: number) => inFlight.get(pid)?.size ?? 0,
    redone: (pid: number) => redone.has(pid),
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

  // Each turn waits at its gate: turn k until message k is queued (so it reaches turn k + 1), the
  // last one until the test lets it go. The kills land on whatever is in flight at the time.
  const gates = turnGates();
  const script = Array.from({ length: MESSAGES.length + 1 }, () => ({
    waitFor: gates.waitFor,
    reply: 'answered {input}',
  }));
  const runs = Array.from({ length: RUNS }, (_, i) =>
    service.start(name, { prompt: text(`task ${i}`), parent: { id: 'p' }, agentOptions: { script } }),
  );
  const log = eventLog(eventsFile);
  const pendingOf = async (run: SubagentRun) => {
    try {
      return (await temporal.client.workflow.getHandle(run.id).query(statusQuery)).pendingMessages;
    } catch {
      return undefined; // no worker answers while the only one is being replaced
    }
  };
  // Three SIGKILLs at random moments, each while the worker holds turns in flight and, from the
  // second on, once it has redone a turn the kill before it interrupted: so each kill's turns are
  // redone by the worker after it, whatever the load does to the timing. The runs' last turns wait
  // for the third kill, so there are turns in flight for each kill however fast the runs go.
  const kills = (async () => {
    for (let kill = 0; kill < 3; kill++) {
      await sleep(800 + Math.random() * 1500);
      const pid = current.child.pid!;
      await eventually(() => (log.inFlight(pid) >= 3 && (kill === 0 || log.redone(pid)) ? true : undefined), 60_000);
      await current.kill('SIGKILL');
      current = await spawnWorkerProcess(env);
      workers.push(current);
    }
  })();
  const steering = Promise.all(
    runs.map(async (run) => {
      for (const [turn, message] of MESSAGES.entries()) {
        await log.turnStarted(run.id, turn);
        await sleep(Math.random() * 300); // a random moment of the turn
        run.sendMessage!(text(message));
        await eventually(async () => ((await pendingOf(run)) === 1 ? true : undefined), 60_000);
        gates.open(run.id, turn);
      }
      await log.turnStarted(run.id, MESSAGES.length);
      await kills.catch(() => undefined); // a failed kill fails the test below, not by a timeout
      gates.open(run.id, MESSAGES.length);
    }),
  );

  const results = await Promise.all(runs.map((run) => run.result)).finally(() => log.close());
  await Promise.all([steering, kills]);
  expect(results.every((result) => result.stopReason === 'completed')).toBe(true);
  expect(new Set(workers.map((worker) => worker.child.pid)).size).toBe(4);

  const events = readFileSync(eventsFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ScriptedTurnEvent);
  // The kills did interrupt turns: each one at least one, which a later attempt redid.
  const retried = events.filter((event) => event.kind === 'turn-start' && event.attempt > 1);
  expect(retried.length).toBeGreaterThanOrEqual(3);
  expect(
    new Set(retried.map((event) => (event as ScriptedTurnEvent & { pid: number }).pid)).size,
  ).toBeGreaterThanOrEqual(2);
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
