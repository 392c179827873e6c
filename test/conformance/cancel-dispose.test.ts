// Seam §5.5, cancel and dispose, made durable: cancel reaches the provider and the result settles
// `aborted` only after it stopped, whatever ended the activity; dispose is idempotent, returns
// once the child has stopped, and a dispose before the result settled ends it `error` (the
// disposed turn). Each test names its clause.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SubagentRun } from '../../src';
import {
  createScriptedProvider,
  type ReadyProcess,
  type ScriptedTurn,
  type ScriptedTurnEvent,
  spawnWorkerProcess,
} from '../../src/testing';
import { type SubagentRunOutcome, statusQuery } from '../../workflows/definitions';
import { eventually, startWorker, testRuns, text, turnGates, uniqueName } from '../helpers/temporal';

const turnEvents: ScriptedTurnEvent[] = [];
const scripted = createScriptedProvider({ name: uniqueName('cancel'), observer: (event) => turnEvents.push(event) });
const runs = testRuns([scripted], { worker: { heartbeatIntervalMs: 200 } });
const parent = { id: 'parent-agent' };

const eventsOf = (run: SubagentRun, kind?: ScriptedTurnEvent['kind']) =>
  turnEvents.filter((event) => event.runId === run.id && (kind === undefined || event.kind === kind));
const turnStarted = (run: SubagentRun, turn = 0) =>
  eventually(() => eventsOf(run, 'turn-start').find((event) => event.turn === turn));
const start = (script: ScriptedTurn[], extra: { idempotencyKey?: string } = {}) =>
  runs.service.start(scripted.name, {
    prompt: text('go'),
    parent,
    agentOptions: { script: script as never },
    ...extra,
  });
const handleOf = (run: SubagentRun) => runs.temporal.client.workflow.getHandle(run.id);
const closedOutcome = (run: SubagentRun) => handleOf(run).result() as Promise<SubagentRunOutcome>;
const statusOf = async (run: SubagentRun) => (await handleOf(run).describe()).status.name;

describe('§5.5 cancel', () => {
  it('§5.5 a cancel while the child runs ends the turn aborted; the result settles aborted only after the provider stopped', async () => {
    const run = start([{ hang: true }]);
    await turnStarted(run);
    run.cancel('the parent changed its mind');
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(eventsOf(run, 'cancelled')).toHaveLength(1);
    expect(await eventually(async () => ((await statusOf(run)) === 'COMPLETED' ? true : undefined))).toBe(true);
    expect((await closedOutcome(run)).closedBy).toBe('cancelled');
    await run.dispose();
  });

  it('§5.5 a cancel in the same tick as start (the pre-turn window) settles aborted with output [] and never calls the provider', async () => {
    const run = start([{ reply: 'should not run' }]);
    run.cancel();
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(eventsOf(run)).toEqual([]);
    await run.dispose();
  });

  it('§5.5 an already-aborted request signal settles aborted without calling the provider', async () => {
    const controller = new AbortController();
    controller.abort();
    const run = runs.service.start(scripted.name, { prompt: text('x'), parent, signal: controller.signal });
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(eventsOf(run)).toEqual([]);
    await run.dispose();
  });

  it('§5.5 aborting the request signal mid-run cancels the run', async () => {
    const controller = new AbortController();
    const run = runs.service.start(scripted.name, {
      prompt: text('x'),
      parent,
      signal: controller.signal,
      agentOptions: { script: [{ hang: true }] },
    });
    await turnStarted(run);
    controller.abort();
    expect((await run.result).stopReason).toBe('aborted');
    expect(eventsOf(run, 'cancelled')).toHaveLength(1);
    await run.dispose();
  });

  it('§5.5 a cancel after the run completed cleanly has no effect: it stays completed, and parked for resume', async () => {
    const run = start([{ reply: 'finished' }, { reply: 'resumed: {input}' }]);
    expect((await run.result).stopReason).toBe('completed');
    run.cancel();
    // What the run holds durably, read afresh: still completed, still parked, still resumable.
    expect(await runs.service.attach(run.id).result).toEqual({ output: text('finished'), stopReason: 'completed' });
    expect((await handleOf(run).query(statusQuery)).phase).toBe('parked');
    const resumed = run.resume!(text('again'));
    expect(await resumed.result).toEqual({ output: text('resumed: again'), stopReason: 'completed' });
    await resumed.dispose();
  });

  it('§5.5 a cancel in the same tick as a keyed start that joins a running run cancels that run', async () => {
    const idempotencyKey = uniqueName('joined');
    const first = start([{ hang: true }], { idempotencyKey });
    await turnStarted(first);
    const joined = start([{ hang: true }], { idempotencyKey });
    joined.cancel('cancelled through the second handle');
    expect(joined.id).toBe(first.id);
    expect(await joined.result).toEqual({ output: [], stopReason: 'aborted' });
    expect(await first.result).toEqual({ output: [], stopReason: 'aborted' });
    expect((await closedOutcome(first)).closedBy).toBe('cancelled');
  });
});

describe('§5.5 dispose', () => {
  it('§5.5 dispose is memoised, and returns once the provider has stopped and the workflow has closed', async () => {
    const run = start([{ hang: true }]);
    await turnStarted(run);
    const first = run.dispose();
    expect(run.dispose()).toBe(first);
    await first;
    expect(eventsOf(run, 'cancelled')).toHaveLength(1);
    expect(await statusOf(run)).toBe('COMPLETED');
    expect((await closedOutcome(run)).closedBy).toBe('disposed');
  });

  it('§5.5 a dispose before the result settled ends the turn disposed, which maps to error, not aborted', async () => {
    const run = start([{ hang: true }]);
    await turnStarted(run);
    await run.dispose();
    expect(await run.result).toEqual({
      output: [],
      stopReason: 'error',
      diagnostic: 'the run was disposed before it settled',
    });
    expect((await closedOutcome(run)).result.stopReason).toBe('error');
  });

  it('§5.5 a dispose in the same tick as start settles error without calling the provider', async () => {
    const run = start([{ reply: 'should not run' }]);
    await run.dispose();
    expect(await run.result).toEqual({
      output: [],
      stopReason: 'error',
      diagnostic: 'the run was disposed before it began',
    });
    expect(eventsOf(run)).toEqual([]);
    expect((await closedOutcome(run)).closedBy).toBe('disposed');
  });

  it('§5.5 dispose of an earlier segment leaves the resumed segment running', async () => {
    const gates = turnGates();
    const first = start([{ reply: 'a' }, { waitFor: gates.waitFor, reply: 'b' }]);
    await first.result;
    const second = first.resume!(text('more'));
    await turnStarted(second, 1);
    await first.dispose();
    gates.open(second.id, 1); // the resumed segment is still in its turn when the first handle is disposed
    expect(await second.result).toEqual({ output: text('b'), stopReason: 'completed' });
    await second.dispose();
  });
});

describe('§5.5 when the worker running the turn is dead', () => {
  const workers: ReadyProcess[] = [];
  afterAll(() => Promise.all(workers.map((worker) => worker.kill())));

  /** A provider whose first worker is a process of its own, and a second worker in this process. */
  async function deadWorkerSetup() {
    const name = uniqueName('dead-worker');
    const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-dead-worker-')), 'events.jsonl');
    writeFileSync(eventsFile, '');
    const provider = createScriptedProvider({
      name,
      observer: (event) => turnEvents.push(event),
      // Longer than a workflow task stuck on the dead worker takes to time out (10 s), so the
      // cancel reaches the dead turn before its heartbeat does.
      runSettings: { heartbeatTimeout: '15 seconds', retry: { initialInterval: '100 ms' } },
    });
    runs.service.registerProvider(provider);
    const logged = () =>
      readFileSync(eventsFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as ScriptedTurnEvent);
    const doomed = await spawnWorkerProcess({ PROVIDER_NAME: name, EVENTS_FILE: eventsFile });
    workers.push(doomed);
    return { name, provider, logged, doomed };
  }

  it('§5.5 a cancel wins over the heartbeat timeout that ends the dead turn: aborted, closed by cancel, its nested runs cancelled', async () => {
    const { name, provider, logged, doomed } = await deadWorkerSetup();
    const run = runs.service.start(name, {
      prompt: text('delegate, then wait'),
      parent,
      agentOptions: { script: [{ delegate: { provider: name, prompt: 'hang', script: [{ hang: true }] } }] },
    });
    const child = await eventually(() =>
      logged().find((event) => event.runId !== run.id && event.kind === 'turn-start'),
    );
    // The run has recorded its nested run, and no workflow task of it is in flight on the doomed
    // worker: one would wait out its 10 s timeout before the cancel could be handled.
    await eventually(async () => {
      const known = (await handleOf(run).query(statusQuery)).children.length === 1;
      return known && !(await handleOf(run).describe()).raw.pendingWorkflowTask ? true : undefined;
    });
    // A live worker takes the run's workflow tasks once the doomed one dies with both turns.
    const stopSurvivor = await startWorker(runs.temporal, [provider], { heartbeatIntervalMs: 200 });
    await doomed.kill('SIGKILL');
    try {
      run.cancel('cancelled while its worker is dead');
      expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
      expect((await closedOutcome(run)).closedBy).toBe('cancelled');
      const nested = runs.temporal.client.workflow.getHandle(child.runId);
      const nestedOutcome = (await nested.result()) as SubagentRunOutcome;
      expect(nestedOutcome).toMatchObject({ closedBy: 'cancelled', result: { stopReason: 'aborted' } });
      // Neither turn was run again after the cancel.
      expect(turnEvents.filter((event) => event.runId === run.id || event.runId === child.runId)).toEqual([]);
    } finally {
      await stopSurvivor();
    }
  }, 60_000);

  it('§5.5 a dispose wins over it too: error, closed by dispose', async () => {
    const { name, provider, logged, doomed } = await deadWorkerSetup();
    const run = runs.service.start(name, { prompt: text('hang'), parent, agentOptions: { script: [{ hang: true }] } });
    await eventually(() => logged().find((event) => event.runId === run.id && event.kind === 'turn-start'));
    const stopSurvivor = await startWorker(runs.temporal, [provider], { heartbeatIntervalMs: 200 });
    await doomed.kill('SIGKILL');
    try {
      await run.dispose();
      expect(await run.result).toEqual({
        output: [],
        stopReason: 'error',
        diagnostic: 'the run was disposed before it settled',
      });
      expect((await closedOutcome(run)).closedBy).toBe('disposed');
    } finally {
      await stopSurvivor();
    }
  }, 60_000);
});
