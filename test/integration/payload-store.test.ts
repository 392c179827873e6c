// Large payloads out of the history: a conversation far over Temporal's 2 MiB payload limit is
// carried through resume (continue-as-new) as a reference, its blobs encrypted by the codec, in
// files (the embedded default) and in PostgreSQL (deployments). A blob gone from the store is the
// typed error PAYLOAD_MISSING; the sweeper deletes the blobs of runs the server has forgotten.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { Client as PostgresClient } from 'pg';
import type { DataConverter } from '@temporalio/common';
import { type SubagentRun, TemporalSubagentService, runStarted } from '../../src';
import { AesGcmPayloadCodec } from '../../src/temporal/codec';
import {
  FilePayloadStore,
  type SubagentPayloadStore,
  payloadStorage,
  sweepPayloads,
} from '../../src/temporal/payload-store';
import { PostgresPayloadStore } from '../../src/temporal/postgres-payload-store';
import { type TestPostgres, createScriptedProvider, startTestPostgres } from '../../src/testing';
import { createSubagentWorker } from '../../src/worker';
import {
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  text,
  uniqueName,
  workflowBundle,
} from '../helpers/temporal';

const MiB = 1024 * 1024;
const MARKER = 'plaintext-marker-';

function converterFor(store: SubagentPayloadStore): DataConverter {
  const codec = new AesGcmPayloadCodec({ keys: [{ id: 'k1', key: randomBytes(32) }], currentKeyId: 'k1' });
  return { payloadCodecs: [codec], externalStorage: payloadStorage(store) };
}

/** A worker, a client and a service whose payloads over 32 KiB go to `store`. */
async function withStore(store: SubagentPayloadStore, providerName = uniqueName('offloaded')) {
  const scripted = createScriptedProvider({ name: providerName });
  const dataConverter = converterFor(store);
  const temporal = await connectTestTemporal('default', { dataConverter });
  // Not sweeping: the tests here sweep the store themselves, at moments of their own.
  const stopWorker = await startWorker(temporal, [scripted], { dataConverter, payloadSweepIntervalMs: 0 });
  const service = newService(temporal);
  service.registerProvider(scripted);
  return {
    temporal,
    service,
    start: (prompt: string, replies: string[]) =>
      service.start(scripted.name, {
        prompt: text(prompt),
        parent: { id: 'p' },
        agentOptions: { script: replies.map((reply) => ({ reply })) },
      }),
    async close() {
      await stopWorker();
      await temporal.close();
      await store.close();
    },
  };
}

type Setup = Awaited<ReturnType<typeof withStore>>;

/** The bytes of every run of `runId` in history, summed over its continue-as-new chain. */
async function historyBytes(setup: Setup, runId: string): Promise<number> {
  let total = 0;
  for await (const run of setup.temporal.client.workflow.list({ query: `WorkflowId = '${runId}'` })) {
    const { raw } = await setup.temporal.client.workflow.getHandle(runId, run.runId).describe();
    total += Number(raw.workflowExecutionInfo?.historySizeBytes ?? 0);
  }
  return total;
}

/** Resumes through a 20 MiB message and back; the last turn echoes the whole conversation. */
async function bigConversation(setup: Setup): Promise<SubagentRun> {
  const big = MARKER + 'x'.repeat(20 * MiB);
  const run = setup.start('first', ['one', 'two', '{conversation}']);
  expect(await run.result).toEqual({ output: text('one'), stopReason: 'completed' });
  const second = run.resume!(text(big));
  expect(await second.result).toEqual({ output: text('two'), stopReason: 'completed' });
  const third = second.resume!(text('third'));
  const { output, stopReason } = await third.result;
  expect(stopReason).toBe('completed');
  // The conversation came through both continue-as-new whole (compared by size, then its ends).
  const echoed = (output[0] as { text: string }).text;
  expect(echoed.length).toBe('first | '.length + big.length);
  expect(echoed.startsWith(`first | ${MARKER}xxx`) && echoed.endsWith('xxx')).toBe(true);
  // Every copy of the 20 MiB is a reference in history.
  expect(await historyBytes(setup, run.id)).toBeLessThan(MiB / 2);
  return third;
}

/**
 * Starts a run with an idempotency key, has the server forget it (deleted, as by an operator),
 * makes its blobs two hours old (`age`), then starts it again with the same key and request, a
 * sweep running right after the start stored its input and before the start reached the server.
 * No codec: the input is the same blob both times. Resolves with what that sweep deleted, and
 * the second run's result.
 */
async function startAgainAfterForgotten(store: SubagentPayloadStore, age: (runId: string) => Promise<void>) {
  const scripted = createScriptedProvider({ name: uniqueName('forgotten') });
  let sweepOnPut = false;
  let swept: Promise<string[]> | undefined;
  const racing: SubagentPayloadStore = {
    name: store.name,
    get: (key) => store.get(key),
    runs: (namespace) => store.runs(namespace),
    deleteRun: (namespace, runId) => store.deleteRun(namespace, runId),
    close: () => store.close(),
    async put(key, bytes) {
      await store.put(key, bytes);
      if (!sweepOnPut) return;
      sweepOnPut = false;
      swept = sweepPayloads(temporal.client, store);
      await swept;
    },
  };
  const temporal = await connectTestTemporal('default', { dataConverter: { externalStorage: payloadStorage(racing) } });
  // Not sweeping: the sweep this test is about is its own, run at the moment it chose.
  const stopWorker = await startWorker(temporal, [scripted], {
    dataConverter: { externalStorage: payloadStorage(store) },
    payloadSweepIntervalMs: 0,
  });
  try {
    const service = newService(temporal);
    service.registerProvider(scripted);
    const start = () =>
      service.start(scripted.name, {
        prompt: text('v'.repeat(64 * 1024)),
        parent: { id: 'p' },
        idempotencyKey: 'forgotten',
        agentOptions: { script: [{ reply: 'done' }] },
      });
    const first = start();
    await first.result;
    // Deleted while parked (the server deletes a closed run only after its visibility catches up,
    // tens of seconds on the dev server): gone from the server, its blobs left in the store.
    await temporal.client.workflowService.deleteWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: first.id },
    });
    await eventually(() =>
      temporal.client.workflow
        .getHandle(first.id)
        .describe()
        .then(
          () => undefined,
          (err: unknown) => (err instanceof WorkflowNotFoundError ? true : undefined),
        ),
    );
    await age(first.id);
    sweepOnPut = true;
    const again = start();
    expect(again.id).toBe(first.id);
    const deleted = await eventually(() => swept);
    if (deleted.length > 0) {
      // The run's input is gone: its workflow task fails on it, retried for ever.
      await temporal.client.workflow.getHandle(again.id).terminate('its input was swept');
      return { swept: deleted, result: undefined };
    }
    const result = await again.result;
    await again.dispose();
    return { swept: deleted, result };
  } finally {
    await stopWorker();
    await temporal.close();
  }
}

/**
 * Two runs' blobs in `store`, aged by `age`: one a start repeated with its key will store again
 * (`key`, with the input `bytes`), one the server never had (`forgotten`).
 */
async function twoAgedRuns(store: SubagentPayloadStore, age: (runId: string) => Promise<void>) {
  const key = { namespace: 'default', runId: `subagent:${uniqueName('restarted')}:1`, digest: 'e'.repeat(64) };
  const forgotten = `subagent:${uniqueName('forgotten')}:1`;
  const bytes = Buffer.from('the start input');
  await store.put(key, bytes);
  await store.put({ ...key, runId: forgotten }, bytes);
  await age(key.runId);
  await age(forgotten);
  return { key, forgotten, bytes };
}

/**
 * Sweeps `store` with a blob stored again (`age` made it two hours old first) right after the
 * sweep listed the runs and before it asks the server about them: a start repeated with its key
 * while a sweep is going. Beside it, a run as old and not written to again. Resolves with what
 * the sweep deleted, the run not written to again, and whether the blob is still there.
 */
async function sweepAroundAStart(
  client: Client,
  store: SubagentPayloadStore,
  age: (runId: string) => Promise<void>,
): Promise<{ deleted: string[]; forgotten: string; kept: boolean }> {
  const { key, forgotten, bytes } = await twoAgedRuns(store, age);
  const racing: SubagentPayloadStore = {
    name: store.name,
    get: (blob) => store.get(blob),
    put: (blob, data) => store.put(blob, data),
    deleteRun: (...args) => store.deleteRun(...args),
    close: () => store.close(),
    async runs(namespace) {
      const listed = await store.runs(namespace);
      await store.put(key, bytes);
      return listed;
    },
  };
  const deleted = await sweepPayloads(client, racing);
  return { deleted, forgotten, kept: (await store.get(key)) !== undefined };
}

/** A meeting point for `parties` callers: each `arrive()` resolves once all have arrived. */
function meeting(parties: number): { arrive(): Promise<void> } {
  let arrived = 0;
  let release!: () => void;
  const all = new Promise<void>((resolve) => (release = resolve));
  return {
    arrive() {
      arrived += 1;
      if (arrived === parties) release();
      return all;
    },
  };
}

/**
 * Two sweeps of `store` at once, as two workers of a fleet run them: both list the runs before
 * either goes on, a blob of one run is stored again right after (a start repeated with its key),
 * and the two delete each run at the same moment. Beside it, a run as old (`age` makes each two
 * hours old) and not written to again. Resolves with what each sweep deleted, the run not written
 * to again, and whether the blob stored again is still there.
 */
async function twoSweepsAtOnce(
  client: Client,
  store: SubagentPayloadStore,
  age: (runId: string) => Promise<void>,
): Promise<{ deleted: string[][]; forgotten: string; kept: boolean }> {
  const { key, forgotten, bytes } = await twoAgedRuns(store, age);
  const listed = meeting(2);
  let storedAgain: Promise<void> | undefined;
  const deleting = new Map([key.runId, forgotten].map((runId) => [runId, meeting(2)]));
  const sweeping = (): SubagentPayloadStore => ({
    name: store.name,
    get: (blob) => store.get(blob),
    put: (blob, data) => store.put(blob, data),
    close: async () => undefined,
    async runs(namespace) {
      // These two runs only (the store may hold other tests'), in one order for both sweeps.
      const runs = (await store.runs(namespace))
        .filter(({ runId }) => deleting.has(runId))
        .sort((a, b) => a.runId.localeCompare(b.runId));
      await listed.arrive();
      await (storedAgain ??= store.put(key, bytes));
      return runs;
    },
    async deleteRun(namespace, runId, unlessWrittenAfter) {
      await deleting.get(runId)!.arrive();
      return store.deleteRun(namespace, runId, unlessWrittenAfter);
    },
  });
  const deleted = await Promise.all([sweepPayloads(client, sweeping()), sweepPayloads(client, sweeping())]);
  return { deleted, forgotten, kept: (await store.get(key)) !== undefined };
}

/** Sets the times of `paths` to two hours ago: past the sweeper's grace for a start on its way. */
function ageTwoHours(...paths: string[]): void {
  const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
  for (const path of paths) utimesSync(path, twoHoursAgo, twoHoursAgo);
}

/** A file store of its own holding one blob, two hours old, of a run the server never had. */
async function storeWithAForgottenRun(label: string) {
  const store = new FilePayloadStore(mkdtempSync(join(tmpdir(), `subagent-payloads-${label}-`)));
  const forgotten = { namespace: 'default', runId: `subagent:${uniqueName(label)}:1`, digest: 'f'.repeat(64) };
  await store.put(forgotten, Buffer.from('blob'));
  ageTwoHours(join(store.dir, 'default', encodeURIComponent(forgotten.runId)));
  return { store, forgotten };
}

/** Ages run `runId`'s directory in the file store `store`, and every blob in it, by two hours. */
function ageRun(store: FilePayloadStore, runId: string): void {
  const runDir = join(store.dir, 'default', encodeURIComponent(runId));
  ageTwoHours(...readdirSync(runDir).map((name) => join(runDir, name)), runDir);
}

describe('in files (the embedded default)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-payloads-'));
  const store = new FilePayloadStore(dir);
  let setup: Setup;
  beforeAll(async () => (setup = await withStore(store)));
  afterAll(() => setup?.close());

  const blobsOf = (runId: string) => {
    const runDir = join(dir, 'default', encodeURIComponent(runId));
    return readdirSync(runDir).map((name) => join(runDir, name));
  };

  it('resumes a run with a 20 MiB conversation; history holds references, the store only ciphertext', async () => {
    const run = await bigConversation(setup);
    const blobs = blobsOf(run.id);
    expect(blobs.length).toBeGreaterThan(0);
    expect(blobs.filter((blob) => readFileSync(blob).includes(MARKER))).toEqual([]);
    await run.dispose();
  }, 120_000);

  it('rejects a read of a run whose blob is gone with PAYLOAD_MISSING, at once', async () => {
    const run = setup.start(MARKER + 'y'.repeat(MiB), ['done']);
    await run.result;
    for (const blob of blobsOf(run.id)) rmSync(blob);
    // A caller in another process: nothing cached, it reads the run's start from history.
    const elsewhere = new TemporalSubagentService({ client: setup.temporal.client });
    await expect(elsewhere.attach(run.id).result).rejects.toMatchObject({ code: 'PAYLOAD_MISSING' });
    await run.dispose();
  }, 60_000);

  it("sweeps the blobs of runs the server has forgotten, keeping live runs' and young ones", async () => {
    const live = setup.start(MARKER + 'z'.repeat(MiB), ['parked']);
    await runStarted(live);
    await live.result;
    const forgotten = `subagent:${uniqueName('gone')}:1`;
    const young = `subagent:${uniqueName('young')}:1`;
    for (const runId of [forgotten, young]) {
      await store.put({ namespace: 'default', runId, digest: 'a'.repeat(64) }, Buffer.from('blob'));
    }
    // Written two hours ago: past the sweeper's grace for a start still on the way.
    ageTwoHours(...[forgotten, live.id].map((runId) => join(dir, 'default', encodeURIComponent(runId))));
    const deleted = await sweepPayloads(setup.temporal.client, store);
    expect(deleted).toContain(forgotten);
    expect(deleted).not.toContain(live.id);
    expect(deleted).not.toContain(young);
    expect(blobsOf(live.id).length).toBeGreaterThan(0);
    await live.dispose();
  }, 60_000);

  it('keeps the blobs of a run written to between the sweep listing the runs and deleting them', async () => {
    // Before, the sweep went by the times it listed: a blob stored after (a start repeated with
    // its key, which reaches the server once the sweep has asked about the run) was deleted.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-between-')));
    const { deleted, forgotten, kept } = await sweepAroundAStart(setup.temporal.client, own, async (runId) =>
      ageRun(own, runId),
    );
    expect(deleted).toContain(forgotten);
    expect(deleted).toHaveLength(1);
    expect(kept).toBe(true);
  });

  it('sweeps the runs listed after one the store fails to delete, then rejects with UNAVAILABLE naming it', async () => {
    // Before, the sweep stopped at the first run it could not delete (a directory of another
    // user's, say): every sweep failed there, and the runs listed after it were never deleted.
    const files = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-undeletable-')));
    const runIds = ['a', 'b', 'c'].map((letter) => `subagent:${uniqueName(`undeletable-${letter}`)}:1`);
    for (const runId of runIds) {
      await files.put({ namespace: 'default', runId, digest: 'a'.repeat(64) }, Buffer.from('blob'));
      ageTwoHours(join(files.dir, 'default', encodeURIComponent(runId)));
    }
    let refused: string | undefined;
    const store: SubagentPayloadStore = {
      name: files.name,
      put: (key, bytes) => files.put(key, bytes),
      get: (key) => files.get(key),
      close: () => files.close(),
      // In one order, so the run refused is listed before the others.
      runs: async (namespace) => (await files.runs(namespace)).sort((a, b) => a.runId.localeCompare(b.runId)),
      async deleteRun(namespace, runId, unlessWrittenAfter) {
        if (refused === undefined || refused === runId) {
          refused = runId;
          throw Object.assign(new Error(`EACCES: permission denied, rmdir '${runId}'`), { code: 'EACCES' });
        }
        return files.deleteRun(namespace, runId, unlessWrittenAfter);
      },
    };
    const failed = await sweepPayloads(setup.temporal.client, store).catch((err: unknown) => err);
    expect(failed).toMatchObject({ code: 'UNAVAILABLE' });
    expect((failed as Error).message).toContain(`run ${runIds[0]}`);
    expect((await files.runs('default')).map((run) => run.runId)).toEqual([runIds[0]]);
  });

  it('deletes a run once and keeps one written to since, when two sweeps go over the store at once', async () => {
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-two-sweeps-')));
    const { deleted, forgotten, kept } = await twoSweepsAtOnce(setup.temporal.client, own, async (runId) =>
      ageRun(own, runId),
    );
    expect(deleted.flat()).toEqual([forgotten]);
    expect(kept).toBe(true);
    expect(await own.runs('default')).toHaveLength(1);
  });

  it('keeps the blobs of a run started again with its idempotency key after the server forgot it, from a sweep before the start reaches the server', async () => {
    // Before, the input blob was there already with its old time: put left it as it was, so the
    // sweep saw a run two hours old that the server did not have, and deleted its blobs.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-forgotten-')));
    const { swept, result } = await startAgainAfterForgotten(own, async (runId) => ageRun(own, runId));
    expect(swept).toEqual([]);
    expect(result).toEqual({ output: text('done'), stopReason: 'completed' });
  }, 60_000);
});

describe('run ids too long for a file name', () => {
  it.each([
    ['250 characters', 'l'.repeat(241)],
    ['90 non-ASCII characters', 'é'.repeat(81)],
  ])(
    'runs a provider whose name is %s with a 1 MiB prompt and answer offloaded, and the sweep lists the run by its id',
    async (_case, name) => {
      // Before, the run's directory was named by its whole encoded id, past the 255 bytes a file
      // name takes: the start was refused UNAVAILABLE (ENAMETOOLONG), and a turn whose result
      // was offloaded retried for ever, the run never ending.
      const dir = mkdtempSync(join(tmpdir(), 'subagent-payloads-long-names-'));
      const store = new FilePayloadStore(dir);
      const setup = await withStore(store, uniqueName(name));
      try {
        const prompt = MARKER + 'w'.repeat(MiB);
        const run = setup.start(prompt, ['{input}']);
        expect(await run.result).toEqual({ output: text(prompt), stopReason: 'completed' });
        expect(readdirSync(join(dir, 'default')).every((entry) => entry.length <= 255)).toBe(true);
        // Its blobs two hours old: a sweep would delete them if it took the run for one the
        // server does not have, as it would a name it could not map back to the run's id.
        ageTwoHours(join(dir, 'default', readdirSync(join(dir, 'default'))[0]!));
        expect((await store.runs('default')).map((listed) => listed.runId)).toEqual([run.id]);
        expect(await sweepPayloads(setup.temporal.client, store)).toEqual([]);
        const elsewhere = new TemporalSubagentService({ client: setup.temporal.client });
        expect(await elsewhere.attach(run.id).result).toEqual({ output: text(prompt), stopReason: 'completed' });
        await run.dispose();
      } finally {
        await setup.close();
      }
    },
    60_000,
  );
});

describe('a store that cannot be written', () => {
  it('rejects a start whose payload store cannot be written (a file where its directory should be) with UNAVAILABLE naming the store and why, and starts nothing', async () => {
    // Before, the caller read "Temporal call for run … failed: Unexpected error while making
    // gRPC request": the fault named the server, not the store, and ENOTDIR only deep in causes.
    const dir = mkdtempSync(join(tmpdir(), 'subagent-payloads-broken-'));
    writeFileSync(join(dir, 'not-a-directory'), '');
    const setup = await withStore(new FilePayloadStore(join(dir, 'not-a-directory')));
    try {
      const run = setup.start(MARKER + 'w'.repeat(MiB), ['never']);
      const refused = await run.result.catch((err: unknown) => err);
      expect(refused).toMatchObject({ code: 'UNAVAILABLE' });
      expect((refused as Error).message).toContain('payload store "files"');
      expect((refused as Error).message).toContain('ENOTDIR');
      await expect(setup.temporal.client.workflow.getHandle(run.id).describe()).rejects.toBeInstanceOf(
        WorkflowNotFoundError,
      );
    } finally {
      await setup.close();
    }
  }, 60_000);
});

describe("the worker's sweeper", () => {
  it('starts no sweep while the one before is still going, however short its interval', async () => {
    // Before, each tick started a sweep whatever the one before was doing: a sweep slower than
    // its interval (many runs, a slow store) piled up sweeps, each holding every run's entry.
    const dir = mkdtempSync(join(tmpdir(), 'subagent-payloads-sweeper-'));
    const files = new FilePayloadStore(dir);
    let calls = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const called: (() => void)[] = [];
    const store: SubagentPayloadStore = {
      name: files.name,
      put: (key, bytes) => files.put(key, bytes),
      get: (key) => files.get(key),
      deleteRun: (namespace, runId) => files.deleteRun(namespace, runId),
      close: () => files.close(),
      async runs(namespace) {
        calls += 1;
        called.splice(0).forEach((wake) => wake());
        if (calls === 1) await held;
        return files.runs(namespace);
      },
    };
    const nthCall = (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => (calls >= n ? resolve() : called.push(check));
        check();
      });
    const dataConverter = converterFor(store);
    const temporal = await connectTestTemporal('default', { dataConverter });
    const stopWorker = await startWorker(temporal, [createScriptedProvider({ name: uniqueName('sweeper') })], {
      dataConverter,
      payloadSweepIntervalMs: 10,
    });
    try {
      await nthCall(1);
      // Twenty intervals while the first sweep is held: a window, not a wait for something to happen.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(calls).toBe(1);
      release();
      await nthCall(2); // the sweeper goes on once the sweep before has ended
    } finally {
      release();
      await stopWorker();
      await temporal.close();
    }
  }, 60_000);

  it('sweeps the blobs of a run the server does not have soon after the worker starts, not an interval later', async () => {
    // Before, the first sweep came a whole interval (an hour by default) after the start: a worker
    // restarted more often (deploys, autoscaling, a crash loop) never swept, and the store grew.
    const { store, forgotten } = await storeWithAForgottenRun('first-sweep');
    const dataConverter = converterFor(store);
    const temporal = await connectTestTemporal('default', { dataConverter });
    const stopWorker = await startWorker(temporal, [createScriptedProvider({ name: uniqueName('first-sweep') })], {
      dataConverter,
      payloadSweepIntervalMs: 60 * 60 * 1000,
    });
    try {
      // The first sweep comes within 10 s of the start; the time out only bounds the wait.
      await eventually(async () => ((await store.get(forgotten)) === undefined ? true : undefined), 30_000);
      expect(await store.runs('default')).toEqual([]);
    } finally {
      await stopWorker();
      await temporal.close();
    }
  }, 60_000);

  it('stops a sweep under way when the worker shuts down, resolving the shutdown only once it has ended, with nothing deleted after', async () => {
    // Before, shutdown left the sweep going: it resolved while the sweep was held here, and the
    // sweep then asked the server (on a connection its caller may have closed) and deleted blobs.
    const { store: files, forgotten } = await storeWithAForgottenRun('shutdown');
    const events: string[] = [];
    let listing!: () => void;
    const listed = new Promise<void>((resolve) => (listing = resolve));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const store: SubagentPayloadStore = {
      name: files.name,
      put: (key, bytes) => files.put(key, bytes),
      get: (key) => files.get(key),
      close: () => files.close(),
      async runs(namespace) {
        listing();
        await gate;
        const runs = await files.runs(namespace);
        events.push('listed');
        return runs;
      },
      async deleteRun(...args) {
        events.push('delete');
        return files.deleteRun(...args);
      },
    };
    // Each Temporal worker's run, seen ending through the SDK's plugin hook.
    let pollersStopped!: () => void;
    const stopped = new Promise<void>((resolve) => (pollersStopped = resolve));
    const dataConverter = converterFor(store);
    const temporal = await connectTestTemporal('default', { dataConverter });
    const worker = await createSubagentWorker({
      connection: temporal.connection,
      providers: [createScriptedProvider({ name: uniqueName('shutdown-sweep') })],
      workflowBundle: workflowBundle(),
      dataConverter,
      payloadSweepIntervalMs: 10,
      workerOptions: {
        plugins: [
          {
            name: 'stop-observer',
            async runWorker(polling, next) {
              await next(polling);
              pollersStopped();
            },
          },
        ],
      },
    });
    expect(worker.taskQueues).toHaveLength(1);
    const running = worker.run();
    try {
      await listed;
      const shutdown = worker.shutdown().then(() => events.push('shutdown'));
      await stopped;
      // Whatever followed the pollers' end in the same turn of the event loop has run: the
      // shutdown would have resolved by now, were it not waiting for the sweep.
      await new Promise((resolve) => setImmediate(resolve));
      expect(events).toEqual([]);
      open();
      await shutdown;
      await running;
      expect(events).toEqual(['listed', 'shutdown']);
      expect(await files.get(forgotten)).toBeDefined();
    } finally {
      open();
      await worker.shutdown();
      await temporal.close();
    }
  }, 60_000);
});

/** Makes the rows of `runId` two hours old. */
async function agedRows(url: string, runId: string): Promise<void> {
  const sql = new PostgresClient({ connectionString: url });
  await sql.connect();
  try {
    await sql.query(`UPDATE subagent_payloads SET created_at = now() - interval '2 hours' WHERE run_id = $1`, [runId]);
  } finally {
    await sql.end();
  }
}

describe('in PostgreSQL (deployments)', () => {
  let postgres: TestPostgres;
  let setup: Setup;
  beforeAll(async () => {
    postgres = await startTestPostgres();
    setup = await withStore(new PostgresPayloadStore(postgres.url));
  }, 60_000);
  afterAll(async () => {
    await setup?.close();
    await postgres?.stop();
  });

  it('resumes a run with a 20 MiB conversation; history holds references', async () => {
    const run = await bigConversation(setup);
    await run.dispose();
  }, 120_000);

  it('stores blobs from many stores that create their table at the same moment on a fresh database', async () => {
    // Before, CREATE TABLE IF NOT EXISTS run by several processes at once (a deployment's workers
    // and callers starting together) failed all but one with a unique violation on pg_type, and
    // their first stores (a start: UNAVAILABLE) with it. The other process is a session here that
    // creates the table in a transaction held open until the stores wait on it.
    const sql = new PostgresClient({ connectionString: postgres.url });
    await sql.connect();
    const blocker = new PostgresClient({ connectionString: postgres.url, options: '-c search_path=racing' });
    await blocker.connect();
    const racing = Array.from(
      { length: 4 },
      () => new PostgresPayloadStore({ connectionString: postgres.url, options: '-c search_path=racing' }),
    );
    try {
      await sql.query('CREATE SCHEMA template; CREATE SCHEMA racing');
      const template = new PostgresPayloadStore({ connectionString: postgres.url, options: '-c search_path=template' });
      await template.runs('default');
      await template.close();
      await blocker.query('BEGIN');
      await blocker.query('CREATE TABLE subagent_payloads (LIKE template.subagent_payloads INCLUDING ALL)');
      const keys = racing.map((_, index) => ({ namespace: 'default', runId: 'racing', digest: `${index}`.repeat(64) }));
      const stored = Promise.allSettled(racing.map((store, index) => store.put(keys[index]!, Buffer.from('blob'))));
      await eventually(async () => {
        const { rows } = await sql.query<{ waiting: number }>(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE TABLE IF NOT EXISTS%'`,
        );
        return rows[0]!.waiting === racing.length ? true : undefined;
      });
      await blocker.query('COMMIT');
      expect(
        (await stored).map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : 'stored')),
      ).toEqual(racing.map(() => 'stored'));
      const back = await Promise.all(racing.map((store, index) => store.get(keys[index]!)));
      expect(back.map((bytes) => Buffer.from(bytes!).toString())).toEqual(racing.map(() => 'blob'));
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
      await Promise.all(racing.map((store) => store.close()));
      await sql.end();
    }
  });

  it('keeps the blobs of a run written to between the sweep listing the runs and deleting them', async () => {
    // Before, the sweep went by the times it listed: a row written after was deleted.
    const { deleted, forgotten, kept } = await sweepAroundAStart(
      setup.temporal.client,
      new PostgresPayloadStore(postgres.url),
      (runId) => agedRows(postgres.url, runId),
    );
    expect(deleted).toContain(forgotten);
    expect(deleted).toHaveLength(1);
    expect(kept).toBe(true);
  });

  it("keeps a blob stored again while the sweep's DELETE of its run waits on it", async () => {
    // Before, the DELETE's check that nothing of the run was written since the listing saw the
    // rows as they were when it began: a store of the same blob again (a start repeated with its
    // key) that held the row then, and committed while the DELETE waited for it, lost its row
    // once it had been told it was stored. The other session here holds that store open.
    const own = new PostgresPayloadStore(postgres.url);
    const sql = new PostgresClient({ connectionString: postgres.url });
    await sql.connect();
    const writer = new PostgresClient({ connectionString: postgres.url });
    await writer.connect();
    try {
      const key = { namespace: 'default', runId: `subagent:${uniqueName('renewed')}:1`, digest: 'e'.repeat(64) };
      await own.put(key, Buffer.from('the start input'));
      await own.put({ ...key, digest: 'd'.repeat(64) }, Buffer.from('an old output'));
      await agedRows(postgres.url, key.runId);
      const listed = (await own.runs('default')).find(({ runId }) => runId === key.runId)!;
      await writer.query('BEGIN');
      await writer.query(
        `INSERT INTO subagent_payloads (namespace, run_id, digest, data) VALUES ($1, $2, $3, $4)
         ON CONFLICT (namespace, run_id, digest) DO UPDATE SET created_at = now()`,
        [key.namespace, key.runId, key.digest, Buffer.from('the start input')],
      );
      const deleting = own.deleteRun('default', key.runId, listed.newestMs);
      await eventually(async () => {
        const { rows } = await sql.query<{ waiting: number }>(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM subagent_payloads%'`,
        );
        return rows[0]!.waiting === 1 ? true : undefined;
      });
      await writer.query('COMMIT');
      await deleting;
      const back = await own.get(key);
      expect(back && Buffer.from(back).toString()).toBe('the start input');
    } finally {
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
      await sql.end();
      await own.close();
    }
  });

  it('deletes a run once and keeps one written to since, when two sweeps go over the store at once', async () => {
    const own = new PostgresPayloadStore(postgres.url);
    try {
      const { deleted, forgotten, kept } = await twoSweepsAtOnce(setup.temporal.client, own, (runId) =>
        agedRows(postgres.url, runId),
      );
      expect(deleted.flat()).toEqual([forgotten]);
      expect(kept).toBe(true);
    } finally {
      await own.close();
    }
  });

  it("gives up on a statement the database holds past the URL's query_timeout, and still closes", async () => {
    // A statement waiting on the database (here on a lock another session holds) fails at its
    // timeout (two minutes unless the URL sets one), and the store's close, which waits for its
    // connections, still returns.
    const own = new PostgresPayloadStore(`${postgres.url}?query_timeout=1000`);
    const locker = new PostgresClient({ connectionString: postgres.url });
    await locker.connect();
    try {
      const key = { namespace: 'default', runId: `subagent:${uniqueName('held')}:1`, digest: 'f'.repeat(64) };
      await own.put(key, Buffer.from('a blob'));
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE subagent_payloads IN ACCESS EXCLUSIVE MODE');
      const asked = Date.now();
      await expect(own.get(key)).rejects.toThrow(/timeout/i);
      expect(Date.now() - asked).toBeLessThan(10_000);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
      await own.close();
    }
  }, 60_000);

  it('keeps the blobs of a run started again with its idempotency key after the server forgot it, from a sweep before the start reaches the server', async () => {
    // Before, the input's row was there already: ON CONFLICT DO NOTHING kept its old time.
    const { swept, result } = await startAgainAfterForgotten(new PostgresPayloadStore(postgres.url), (runId) =>
      agedRows(postgres.url, runId),
    );
    expect(swept).toEqual([]);
    expect(result).toEqual({ output: text('done'), stopReason: 'completed' });
  }, 60_000);
});

describe('a PostgreSQL server that does not answer', () => {
  it('gives up on connecting within 10 s, and the store still closes', async () => {
    // Before, a store whose database accepted connections but never answered (a wedged server, a
    // half-open network path) held every call for ever, the worker's sweep and shutdown with it.
    const silent = createServer(() => undefined);
    await new Promise<void>((listening) => silent.listen(0, '127.0.0.1', listening));
    const { port } = silent.address() as AddressInfo;
    const store = new PostgresPayloadStore(`postgres://postgres@127.0.0.1:${port}/postgres`);
    try {
      const asked = Date.now();
      await expect(store.runs('default')).rejects.toThrow(/timeout/i);
      expect(Date.now() - asked).toBeLessThan(20_000);
    } finally {
      await store.close();
      silent.close();
    }
  }, 60_000);
});
