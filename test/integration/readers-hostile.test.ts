// Readers of a run (`run.events()`, nested or not, and the audit's records that `subagents logs`
// and `audit export` print) given a history that holds what a raw Temporal client wrote into it:
// signals with arguments our workers never send.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { temporal } from '@temporalio/proto';
import { AesGcmPayloadCodec, type EncryptionKey, type SubagentRunEvent, runStarted } from '../../src';
import type { SubagentRunOutcome } from '../../workflows/definitions';
import { ENCRYPTED_FAILURE_CONVERTER_PATH } from '../../src/temporal/failure-converter';
import { type AuditDraft, auditDrafts } from '../../src/audit';
import { createScriptedProvider } from '../../src/testing';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  testRuns,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('readers-hostile') });
/** A run of it parks for 8 seconds: long enough to resume it once it is seen parked. */
const shortWindow = createScriptedProvider({
  name: uniqueName('readers-short-window'),
  runSettings: { resumeWindow: '8 seconds' },
});
const runs = testRuns([scripted, shortWindow]);

const CLI = resolve(__dirname, '..', '..', 'src', 'cli', 'index.ts');

/** The CLI as a process against `temporal`'s server and namespace: what it printed (it rejects with its exit code). */
const cli = (temporal: TestTemporal, args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', CLI, ...args], {
    env: { ...process.env, TEMPORAL_ADDRESS: temporal.address, TEMPORAL_NAMESPACE: temporal.namespace },
    timeout: 30_000,
    maxBuffer: 1024 * 1024,
  });

/** A run that has settled its first segment and waits, parked. */
async function parkedRun() {
  const run = runs.service.start(scripted.name, { prompt: text('hello'), parent: { id: 'parent' } });
  await run.result;
  return run;
}

/** What each reader makes of the run's history: its events (nested or not), its audit records. */
async function read(runId: string) {
  const run = runs.service.attach(runId);
  const events = async (nested: boolean) => {
    const seen: SubagentRunEvent[] = [];
    for await (const event of run.events!({ follow: false, nested })) seen.push(event);
    return seen;
  };
  const drafts: AuditDraft[] = [];
  for await (const draft of auditDrafts(runs.temporal.client, runId, false)) drafts.push(draft);
  return { events: await events(false), nested: await events(true), drafts };
}

/**
 * Resets the run's Temporal run `temporalRunId` to the end of its first workflow task of its own
 * (without handing the run the updates after it again, if asked); the reset's run.
 */
async function resetToOwnFirstTask(
  runId: string,
  temporalRunId: string,
  reason: string,
  { withoutUpdates = false } = {},
): Promise<string> {
  const { client } = runs.temporal;
  const { events } = await client.workflow.getHandle(runId, temporalRunId).fetchHistory();
  // A run a reset made has copies of the run before it up to its reset point: its own task comes after.
  const own = events!.findIndex((event) => event.workflowTaskFailedEventAttributes?.newRunId === temporalRunId);
  const task = events!
    .slice(own + 1)
    .find((event) => event.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)!;
  const { runId: made } = await client.workflowService.resetWorkflowExecution({
    namespace: runs.temporal.namespace,
    workflowExecution: { workflowId: runId, runId: temporalRunId },
    workflowTaskFinishEventId: task.eventId,
    reason,
    requestId: uniqueName('reset'),
    ...(withoutUpdates
      ? { resetReapplyExcludeTypes: [temporal.api.enums.v1.ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE] }
      : {}),
  });
  return made!;
}

/** Waits until `temporalRunId` is the run's current Temporal run and it waits, parked. */
const parkedIn = (runId: string, temporalRunId: string) =>
  eventually(async () => {
    const { runId: current } = await runs.temporal.client.workflow.getHandle(runId).describe();
    return current === temporalRunId && (await runs.status(runId)).phase === 'parked' ? true : undefined;
  });

const otherType = () =>
  runs.temporal.client.workflow.start('someOtherWorkflow', {
    taskQueue: uniqueName('nobody'),
    workflowId: `subagent-other:${uniqueName('x')}`,
    args: [{ foo: 1 }],
  });

describe('a run whose history holds a signal a raw client sent', () => {
  it.each([
    ['textDelta', 'without an argument', () => []],
    ['textDelta', 'with null', () => [null]],
    ['textDelta', 'with a number for its text', () => [{ turn: 0, attempt: 1, text: 5 }]],
    ['childSettled', 'with null', () => [null]],
    ['childStarted', 'without a run id', () => [{}]],
    ['childStarted', 'naming a run id with a lone surrogate', () => [{ runId: 'subagent-x:\ud800' }]],
    ['childStarted', 'naming a run id that is a number', () => [{ runId: 42 }]],
    ['childStarted', "naming a workflow whose id is not a run's", () => [{ runId: 'orders-1' }]],
    ['childSettled', "naming a workflow whose id is not a run's", () => [{ runId: 'orders-1', segment: 0 }]],
  ] as [string, string, () => unknown[]][])(
    'reads on past a %s signal %s: events(), nested too, and the audit; no step stands for it',
    async (signalName, _case, args) => {
      const run = await parkedRun();
      await runs.temporal.client.workflow.getHandle(run.id).signal(signalName, ...(args() as []));
      await run.dispose();
      const { events, nested, drafts } = await read(run.id);
      for (const seen of [events, nested]) {
        expect(seen.map((event) => event.type)).toEqual(['turn-start', 'text', 'turn-end', 'settled', 'closed']);
      }
      expect(drafts.map((draft) => draft.type)).toContain(
        { textDelta: 'text.delta', childSettled: 'child.settled', childStarted: 'child.start' }[signalName],
      );
    },
  );

  it('reads nested events past a childStarted signal naming a workflow of another type, which it does not read', async () => {
    const run = await parkedRun();
    const other = await otherType();
    try {
      await runs.temporal.client.workflow.getHandle(run.id).signal('childStarted', { runId: other.workflowId });
      const { events, nested } = await read(run.id);
      expect(nested).toEqual(events);
      expect(events.at(-1)).toMatchObject({ type: 'child-start', childId: other.workflowId });
      await expect(runs.service.attach(other.workflowId).result).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
    } finally {
      await other.terminate();
      await runs.temporal.client.workflow.getHandle(run.id).terminate();
    }
  });

  it('reads the events and the audit of a run a sendMessage signal with null stopped (its workflow task fails at it)', async () => {
    const run = await parkedRun();
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    try {
      await handle.signal('sendMessage', null as never);
      const { events, nested, drafts } = await read(run.id);
      expect(events.map((event) => event.type)).toEqual(['turn-start', 'text', 'turn-end', 'settled']);
      expect(nested).toEqual(events);
      expect(drafts.at(-1)).toMatchObject({ type: 'message', data: {} });
    } finally {
      await handle.terminate();
    }
  });
});

describe('a reader that stops reading a quiet run', () => {
  it.each([false, true])(
    'ends its events at once when its signal aborts, the read waiting for the next event given up (nested: %s) (it waited on the server for the run’s next event, days maybe)',
    async (nested) => {
      const run = await parkedRun();
      try {
        const stop = new AbortController();
        const events = run.events!({ nested, signal: stop.signal })[Symbol.asyncIterator]();
        // To the settle point: the run is parked, and writes nothing more until told.
        for (let next = await events.next(); next.value?.type !== 'settled'; next = await events.next()) {
          expect(next.done).toBe(false);
        }
        const waiting = events.next();
        stop.abort();
        expect(await Promise.race([waiting, sleep(10_000, 'still waiting', { ref: false })])).toEqual({
          done: true,
          value: undefined,
        });
        expect(await events.next()).toEqual({ done: true, value: undefined });
      } finally {
        await run.dispose();
      }
    },
  );
});

describe('subagents show --tree', () => {
  it('shows each run once of runs that a raw client made each other’s children (it walked the cycle without end)', async () => {
    const [a, b] = [await parkedRun(), await parkedRun()];
    try {
      const signal = (to: string, child: string) =>
        runs.temporal.client.workflow.getHandle(to).signal('childStarted', { runId: child });
      await signal(a.id, a.id);
      await signal(a.id, b.id);
      await signal(b.id, a.id);
      const childrenOf = async (id: string) => (await runs.status(id)).children;
      await eventually(async () => ((await childrenOf(b.id)).length > 0 ? true : undefined));
      expect(await childrenOf(a.id)).toEqual([a.id, b.id]);
      expect(await childrenOf(b.id)).toEqual([a.id]);
      const { stdout } = await cli(runs.temporal, ['show', a.id, '--tree', '--json']);
      const nodes = JSON.parse(stdout) as { id: string; treeDepth: number }[];
      expect(nodes.map(({ id, treeDepth }) => [id, treeDepth])).toEqual([
        [a.id, 0],
        [b.id, 1],
      ]);
    } finally {
      await a.dispose();
      await b.dispose();
    }
  });
});

describe('a run an operator reset', () => {
  it('is read on into the run the reset made: a follower of its events and its audit reach its real close, not the reset’s termination', async () => {
    const run = await parkedRun();
    const { client } = runs.temporal;
    const handle = client.workflow.getHandle(run.id);
    const followed: SubagentRunEvent[] = [];
    const following = (async () => {
      for await (const event of run.events!()) followed.push(event);
    })();
    await eventually(() => (followed.some((event) => event.type === 'settled') ? true : undefined));
    const { events } = await handle.fetchHistory();
    const firstTask = events!.find(
      (event) => event.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    )!;
    const { runId: resetRunId } = await client.workflowService.resetWorkflowExecution({
      namespace: runs.temporal.namespace,
      workflowExecution: { workflowId: run.id, runId: (await handle.describe()).runId },
      workflowTaskFinishEventId: firstTask.eventId,
      reason: 'an operator reset it',
      requestId: uniqueName('reset'),
    });
    // The reset run settles its segment again, and waits.
    await eventually(async () => ((await runs.status(run.id)).phase === 'parked' ? true : undefined));
    await run.dispose();
    await following;
    expect(followed.filter((event) => event.type === 'closed')).toEqual([
      expect.objectContaining({ closedBy: 'disposed' }),
    ]);
    const drafts: AuditDraft[] = [];
    for await (const draft of auditDrafts(client, run.id, false)) drafts.push(draft);
    const types = drafts.map((draft) => draft.type);
    expect(types.slice(types.indexOf('reset'))).toEqual(['reset', 'turn', 'result', 'dispose', 'close']);
    expect(drafts.find((draft) => draft.type === 'reset')!.data).toMatchObject({
      temporalRunId: resetRunId,
      reason: 'an operator reset it',
    });
    expect(drafts.at(-1)!.data).toMatchObject({ temporalRunId: resetRunId, closedBy: 'disposed' });
  });
});

describe('a run an operator reset more than once, or from an earlier run', () => {
  /** Follows the run's events from now on; resolves with them once the stream ends. */
  function follow(run: { events?: (options?: { follow?: boolean }) => AsyncIterable<SubagentRunEvent> }) {
    const followed: SubagentRunEvent[] = [];
    const done = (async () => {
      for await (const event of run.events!()) followed.push(event);
      return followed;
    })();
    return { followed, done };
  }

  /**
   * The run's one turn told twice, once by the run a reset made (`made`), which the run was then
   * disposed of in; its audit from the reset on says so. Resolves with the run's events.
   */
  async function expectToldAgain(runId: string, made: string): Promise<SubagentRunEvent[]> {
    const { events } = await read(runId);
    const once = ['turn-start', 'text', 'turn-end', 'settled'];
    expect(events.map((event) => event.type)).toEqual([...once, ...once, 'closed']);
    expect(await auditFromReset(runId)).toEqual([
      ['reset', made],
      ['turn', made],
      ['result', made],
      ['dispose', made],
      ['close', made],
    ]);
    return events;
  }

  /** The audit's records from the first reset on, with the Temporal run each came from. */
  async function auditFromReset(runId: string) {
    const drafts: AuditDraft[] = [];
    for await (const draft of auditDrafts(runs.temporal.client, runId, false)) drafts.push(draft);
    const types = drafts.map((draft) => [draft.type, (draft.data as { temporalRunId: string }).temporalRunId]);
    return types.slice(types.findIndex(([type]) => type === 'reset'));
  }

  it.each([
    ['again from its first run', (first: string) => first],
    ['from the run the first reset made', (_first: string, middle: string) => middle],
  ])(
    'reads a run reset a second time %s, the run between the resets too: events() followed and read after, and the audit, once each, to its real close',
    async (_case, baseOf) => {
      const run = await parkedRun();
      const { followed, done } = follow(run);
      await eventually(() => (followed.some((event) => event.type === 'settled') ? true : undefined));
      const first = (await runs.temporal.client.workflow.getHandle(run.id).describe()).runId;
      const middle = await resetToOwnFirstTask(run.id, first, 'the first reset');
      await parkedIn(run.id, middle);
      const last = await resetToOwnFirstTask(run.id, baseOf(first, middle), 'the second reset');
      await parkedIn(run.id, last);
      await run.dispose();
      const read: SubagentRunEvent[] = [];
      for await (const event of run.events!({ follow: false })) read.push(event);
      expect(await done).toEqual(read);
      expect(read.filter((event) => event.type === 'closed')).toEqual([
        expect.objectContaining({ closedBy: 'disposed' }),
      ]);
      expect(read.map((event) => event.offset)).toEqual(read.map((_, index) => index));
      const once = ['turn-start', 'text', 'turn-end', 'settled'];
      expect(read.map((event) => event.type)).toEqual([...once, ...once, ...once, 'closed']);
      expect(await auditFromReset(run.id)).toEqual([
        ['reset', middle],
        ['turn', middle],
        ['result', middle],
        ['reset', last],
        ['turn', last],
        ['result', last],
        ['dispose', last],
        ['close', last],
      ]);
    },
  );

  it('tells what the run a reset made does again: the turn’s start and the settle point in events(), the result in the audit (they were left out as told already)', async () => {
    const run = await parkedRun();
    const made = await resetToOwnFirstTask(
      run.id,
      (await runs.temporal.client.workflow.getHandle(run.id).describe()).runId,
      'once more',
    );
    await parkedIn(run.id, made);
    await run.dispose();
    const events = await expectToldAgain(run.id, made);
    expect(events.filter((event) => event.type === 'settled')).toEqual([
      expect.objectContaining({ segment: 0, result: expect.objectContaining({ stopReason: 'completed' }) }),
      expect.objectContaining({ segment: 0, result: expect.objectContaining({ stopReason: 'completed' }) }),
    ]);
  });

  it('reads a run an operator reset after it closed on into the run the reset made, to its new close (it ended at the close the reset undid)', async () => {
    const run = await parkedRun();
    const { client } = runs.temporal;
    const closed = (await client.workflow.getHandle(run.id).describe()).runId;
    await run.dispose();
    // Taken up without the dispose (an update, which a reset hands the run again by default).
    const made = await resetToOwnFirstTask(run.id, closed, 'take it up again', { withoutUpdates: true });
    await parkedIn(run.id, made);
    await runs.service.attach(run.id).dispose();
    await expectToldAgain(run.id, made);
  });

  it('reads a run reset from the Temporal run before its continue-as-new on into the run the reset made (it ended at the termination of the run it continued as)', async () => {
    const run = await parkedRun();
    const first = (await runs.temporal.client.workflow.getHandle(run.id).describe()).runId;
    const resumed = run.resume!(text('again'));
    await resumed.result;
    const { followed, done } = follow(run);
    await eventually(() => (followed.filter((event) => event.type === 'settled').length === 2 ? true : undefined));
    const made = await resetToOwnFirstTask(run.id, first, 'back to the first segment');
    await parkedIn(run.id, made);
    await runs.service.attach(run.id).dispose();
    const read: SubagentRunEvent[] = [];
    for await (const event of run.events!({ follow: false })) read.push(event);
    expect(await done).toEqual(read);
    expect(read.filter((event) => event.type === 'closed')).toEqual([
      expect.objectContaining({ closedBy: 'disposed' }),
    ]);
    expect(await auditFromReset(run.id)).toEqual([
      ['reset', made],
      ['turn', made],
      ['result', made],
      ['dispose', made],
      ['close', made],
    ]);
  });
});

describe('subagents list', () => {
  it('lists a run once, as its current Temporal run shows it: one resumed and then reset (it listed every Temporal run of it, each with its last status)', async () => {
    const run = await parkedRun();
    const { client } = runs.temporal;
    const resumed = run.resume!(text('again'));
    await resumed.result;
    const continued = (await client.workflow.getHandle(run.id).describe()).runId;
    const made = await resetToOwnFirstTask(run.id, continued, 'an operator reset it');
    await parkedIn(run.id, made);
    try {
      // The visibility store lists the three Temporal runs: the first (continued as new), the one
      // the reset ended and the one it made.
      await eventually(async () => {
        let listed = 0;
        for await (const _ of client.workflow.list({ query: `WorkflowId = '${run.id}'` })) listed++;
        return listed === 3 ? true : undefined;
      });
      const rowsOf = async (args: string[]) => {
        const { stdout } = await cli(runs.temporal, ['list', '--provider', scripted.name, ...args, '--json']);
        return (JSON.parse(stdout) as { id: string; status: string }[]).filter((row) => row.id === run.id);
      };
      expect(await rowsOf([])).toEqual([expect.objectContaining({ id: run.id, status: 'parked' })]);
      expect(await rowsOf(['--status', 'parked'])).toHaveLength(1);
      expect(await rowsOf(['--status', 'running'])).toEqual([]);
    } finally {
      await runs.service.attach(run.id).dispose();
    }
  });
});

describe('a caller waiting on a run an operator reset', () => {
  const gates = turnGates();

  it('gets the settle point of the run the reset made: run.result and attach(id).result (they waited for that run to close)', async () => {
    const run = runs.service.start(scripted.name, {
      prompt: text('hello'),
      parent: { id: 'parent' },
      agentOptions: { script: [{ waitFor: gates.waitFor }] },
    });
    const { client } = runs.temporal;
    const handle = client.workflow.getHandle(run.id);
    try {
      await runStarted(run);
      // The turn is held: both waiters are on the run's first Temporal run when the reset ends it.
      await eventually(async () => ((await handle.describe()).raw.pendingActivities?.length ? true : undefined));
      let settled: unknown[] | undefined;
      void Promise.all([run.result, runs.service.attach(run.id).result]).then((results) => (settled = results));
      const first = (await handle.describe()).runId;
      const made = await resetToOwnFirstTask(run.id, first, 'an operator reset it mid-turn');
      gates.open(run.id, 0);
      await parkedIn(run.id, made);
      const results = await eventually(() => settled);
      expect(results).toEqual([
        expect.objectContaining({ stopReason: 'completed', output: text('scripted reply to: hello') }),
        expect.objectContaining({ stopReason: 'completed', output: text('scripted reply to: hello') }),
      ]);
    } finally {
      gates.open(run.id, 0);
      await run.dispose();
    }
  });
});

describe('a handle on a run an operator reset after it closed', () => {
  it('resumes it through the handle that saw its resume window pass: the run the reset made parks with a window of its own (the handle refused at once, NOT_RESUMABLE, saying the window had ended)', async () => {
    const run = runs.service.start(shortWindow.name, { prompt: text('hello'), parent: { id: 'parent' } });
    await run.result;
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    expect(((await handle.result()) as SubagentRunOutcome).closedBy).toBe('expired');
    const made = await resetToOwnFirstTask(run.id, (await handle.describe()).runId, 'take it up again');
    await parkedIn(run.id, made);
    const resumed = run.resume!(text('again'));
    try {
      expect(await resumed.result).toMatchObject({ stopReason: 'completed', output: text('scripted reply to: again') });
    } finally {
      await resumed.dispose();
    }
    expect(((await handle.result()) as SubagentRunOutcome).closedBy).toBe('disposed');
  });

  it('keeps its segment on a handle whose resume the run refused while a reset had its turn run again: it resumes once the turn settles (the handle counted itself resumed, and refused for good)', async () => {
    const gates = turnGates();
    const run = runs.service.start(scripted.name, {
      prompt: text('hello'),
      parent: { id: 'parent' },
      agentOptions: { script: [{ waitFor: gates.waitFor }] },
    });
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    try {
      await runStarted(run);
      gates.open(run.id, 0);
      await run.result;
      // The gate shut again: the turn the reset has run again waits at it.
      rmSync(gates.waitFor.replace('{run}', run.id).replace('{turn}', '0'));
      const made = await resetToOwnFirstTask(run.id, (await handle.describe()).runId, 'once more');
      await eventually(async () => {
        const described = await handle.describe();
        return described.runId === made && described.raw.pendingActivities?.length ? true : undefined;
      });
      await expect(run.resume!(text('too early')).result).rejects.toMatchObject({
        code: 'NOT_RESUMABLE',
        message: expect.stringContaining('still running'),
      });
      gates.open(run.id, 0);
      await parkedIn(run.id, made);
      const resumed = run.resume!(text('again'));
      expect(await resumed.result).toMatchObject({ stopReason: 'completed' });
      await resumed.dispose();
    } finally {
      gates.open(run.id, 0);
      await runs.service.attach(run.id).dispose();
    }
  });

  it('disposes it through a handle that saw it closed (the handle did nothing, and the run the reset made stayed parked)', async () => {
    const run = await parkedRun();
    const handle = runs.temporal.client.workflow.getHandle(run.id);
    const closed = (await handle.describe()).runId;
    await run.dispose();
    const attached = runs.service.attach(run.id);
    await attached.result;
    const made = await resetToOwnFirstTask(run.id, closed, 'take it up again', { withoutUpdates: true });
    await parkedIn(run.id, made);
    await attached.dispose();
    const { runId, status } = await handle.describe();
    expect({ runId, status: status.name }).toEqual({ runId: made, status: 'COMPLETED' });
    expect(((await handle.result()) as SubagentRunOutcome).closedBy).toBe('disposed');
  });
});

describe('a run whose payloads are encrypted, read without the keys', () => {
  const key: EncryptionKey = { id: 'key-a', key: randomBytes(32) };
  const sealing = createScriptedProvider({ name: uniqueName('sealed-read') });
  const dataConverter = {
    payloadCodecs: [new AesGcmPayloadCodec({ keys: [key], currentKeyId: key.id })],
    failureConverterPath: ENCRYPTED_FAILURE_CONVERTER_PATH,
  };
  let sealed: TestTemporal;
  let plain: TestTemporal;
  let stopWorker: () => Promise<void>;
  beforeAll(async () => {
    sealed = await connectTestTemporal('default', { dataConverter });
    stopWorker = await startWorker(sealed, [sealing], { dataConverter });
    plain = await connectTestTemporal('default');
  });
  afterAll(async () => {
    await stopWorker?.();
    await sealed?.close();
    await plain?.close();
  });

  it('is refused with INVALID_CONFIG saying so: events(), result, the audit and the CLI (it was UNAVAILABLE, as if the server were away, or the converter’s bare "Unknown encoding")', async () => {
    const owner = newService(sealed);
    owner.registerProvider(sealing);
    const run = owner.start(sealing.name, { prompt: text('hello'), parent: { id: 'parent' } });
    await run.result;
    try {
      const reader = newService(plain);
      reader.registerProvider(sealing);
      const attached = reader.attach(run.id);
      const refused = { code: 'INVALID_CONFIG', message: expect.stringMatching(/encrypted.*no codec/) };
      await expect(attached.events!({ follow: false })[Symbol.asyncIterator]().next()).rejects.toMatchObject(refused);
      await expect(attached.result).rejects.toMatchObject(refused);
      await expect(auditDrafts(plain.client, run.id, false).next()).rejects.toMatchObject(refused);
      for (const args of [
        ['logs', run.id, '--no-follow'],
        ['show', run.id],
        ['audit', 'export', run.id],
      ]) {
        const failed = await cli(plain, args).catch((err: { code: number; stderr: string }) => err);
        expect(failed).toMatchObject({
          code: 6,
          stderr: expect.stringMatching(/^INVALID_CONFIG: .*encrypted.*no codec/),
        });
      }
    } finally {
      await run.dispose();
    }
  });

  it('lists a closed sealed run without its keys, from what the server shows in the clear (the listing decoded every run’s memo: exit 6)', async () => {
    const owner = newService(sealed);
    owner.registerProvider(sealing);
    const run = owner.start(sealing.name, { prompt: text('hello'), parent: { id: 'parent' } });
    await run.result;
    await run.dispose();
    const { stdout } = await cli(plain, ['list', '--provider', sealing.name, '--json']);
    expect(JSON.parse(stdout)).toContainEqual(expect.objectContaining({ id: run.id, status: 'closed' }));
  });
});
