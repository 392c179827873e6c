// The payload store's configuration and its driver, without a server: what the environment
// selects, and a blob that is gone or altered read as PAYLOAD_MISSING.
import { createHook } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { ExternalStorageRunner } from '@temporalio/common/lib/internal-non-workflow';
import { offloadThresholdFromEnv, payloadStoreFromEnv } from '../../src/temporal/config';
import { DEFAULT_OFFLOAD_BYTES, FilePayloadStore, payloadStorage } from '../../src/temporal/payload-store';
import { PostgresPayloadStore } from '../../src/temporal/postgres-payload-store';

/**
 * A sweep's cutoff that takes every blob stored so far: a file's time is finer than a millisecond,
 * so one stored within `Date.now()`'s millisecond is after it.
 */
const pastEverythingStored = () => Date.now() + 1;

describe('payloadStoreFromEnv', () => {
  it('uses files under the default directory when nothing is configured, and none without one', () => {
    expect(payloadStoreFromEnv({}, '/data/payloads')).toMatchObject({ name: 'files', dir: '/data/payloads' });
    expect(payloadStoreFromEnv({})).toBeUndefined();
  });

  it.each([
    ['file:/srv/payloads', FilePayloadStore],
    ['postgres://u@db:5432/temporal', PostgresPayloadStore],
    ['postgresql://u@db/temporal', PostgresPayloadStore],
  ])('reads SUBAGENT_PAYLOAD_STORE=%s', async (value, kind) => {
    const store = payloadStoreFromEnv({ SUBAGENT_PAYLOAD_STORE: value });
    expect(store).toBeInstanceOf(kind);
    await store!.close();
  });

  it('turns offloading off with "off", even for the embedded default', () => {
    expect(payloadStoreFromEnv({ SUBAGENT_PAYLOAD_STORE: 'off' }, '/data/payloads')).toBeUndefined();
  });

  it.each(['s3://bucket', 'file:', '/srv/payloads', 'postgres://user:secret@db:notaport/temporal'])(
    'refuses SUBAGENT_PAYLOAD_STORE=%s with INVALID_CONFIG',
    (value) => {
      expect(() => payloadStoreFromEnv({ SUBAGENT_PAYLOAD_STORE: value })).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    },
  );

  it('reads the offload threshold, refusing what is not a whole number of bytes', () => {
    expect(offloadThresholdFromEnv({})).toBe(DEFAULT_OFFLOAD_BYTES);
    expect(offloadThresholdFromEnv({ SUBAGENT_PAYLOAD_OFFLOAD_BYTES: '4096' })).toBe(4096);
    expect(() => offloadThresholdFromEnv({ SUBAGENT_PAYLOAD_OFFLOAD_BYTES: '4 KiB' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });
});

it.each([
  ['4 MiB, past the 2 MiB Temporal takes in the history', 4 * 1024 * 1024],
  ['NaN', NaN],
  ['-1', -1],
])(
  'refuses an offload threshold of %s with INVALID_CONFIG, from the environment and from payloadStorage',
  (_case, bytes) => {
    const refused = expect.objectContaining({ code: 'INVALID_CONFIG' });
    expect(() => offloadThresholdFromEnv({ SUBAGENT_PAYLOAD_OFFLOAD_BYTES: String(bytes) })).toThrow(refused);
    const store = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-threshold-')));
    expect(() => payloadStorage(store, { thresholdBytes: bytes })).toThrow(refused);
  },
);

describe('the store driver', () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-payloads-unit-'));
  const runner = new ExternalStorageRunner(payloadStorage(new FilePayloadStore(dir), { thresholdBytes: 1024 }));
  const target = { kind: 'workflow' as const, namespace: 'default', id: 'subagent:unit:1' };
  const payload = {
    metadata: { encoding: Buffer.from('json/plain') },
    data: Buffer.from(JSON.stringify('x'.repeat(10_000))),
  };

  it('offloads a payload over the threshold and reads it back; a small one stays inline', async () => {
    const small = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('1') };
    const [reference, inline] = await runner.store([payload, small], { target });
    expect(reference!.data?.length).toBeLessThan(payload.data.length);
    expect(inline).toBe(small);
    const [back] = await runner.retrieve([reference!]);
    expect(Buffer.from(back!.data!).toString()).toBe(payload.data.toString());
  });

  it('reads a blob that is gone, or not what was written, as PAYLOAD_MISSING (not retried)', async () => {
    const own = { ...target, id: 'subagent:unit:2' };
    const [reference] = await runner.store([payload], { target: own });
    const runDir = join(dir, 'default', encodeURIComponent(own.id));
    const [blob] = readdirSync(runDir);
    writeFileSync(join(runDir, blob!), 'altered');
    const altered = await runner.retrieve([reference!]).catch((err: unknown) => err);
    expect(altered).toBeInstanceOf(ApplicationFailure);
    expect(altered).toMatchObject({ type: 'PAYLOAD_MISSING', nonRetryable: true });
    rmSync(join(runDir, blob!));
    await expect(runner.retrieve([reference!])).rejects.toMatchObject({ type: 'PAYLOAD_MISSING', nonRetryable: true });
  });

  it("lists a store's runs past a name in it that no run id was encoded to, which it leaves alone", async () => {
    // Before, one such name (put there by another program) failed every sweep with a URIError,
    // so no run's blobs were deleted again.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-names-')));
    await own.put({ namespace: 'default', runId: 'subagent:unit:4', digest: 'b'.repeat(64) }, Buffer.from('blob'));
    mkdirSync(join(own.dir, 'default', '%zz'));
    expect((await own.runs('default')).map((run) => run.runId)).toEqual(['subagent:unit:4']);
  });

  it.each(['.', '..'])(
    'files the blobs of a run whose id is %s in a directory of its own, which it lists and deletes alone',
    async (runId) => {
      // Before, encodeURIComponent left the id as it was, so its directory was the namespace's
      // ('.'), whose blobs were then listed as runs and swept while it lived, or the store's root
      // ('..'), never listed or swept, and deleting the run removed every namespace's blobs.
      const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-dots-')));
      const blob = { namespace: 'default', runId, digest: 'c'.repeat(64) };
      const other = { namespace: 'default', runId: 'subagent:unit:5', digest: 'd'.repeat(64) };
      await own.put(blob, Buffer.from('dotted'));
      await own.put(other, Buffer.from('other'));
      expect(Buffer.from((await own.get(blob))!).toString()).toBe('dotted');
      expect((await own.runs('default')).map((run) => run.runId).sort()).toEqual([runId, other.runId].sort());
      await own.deleteRun('default', runId);
      expect(await own.get(blob)).toBeUndefined();
      expect(Buffer.from((await own.get(other))!).toString()).toBe('other');
      expect((await own.runs('default')).map((run) => run.runId)).toEqual([other.runId]);
    },
  );

  it('puts back a run directory a deletion moved aside and left (its process died), leaving one being deleted now alone', async () => {
    // Before, such a directory (a sweep's process killed between moving a run aside and removing
    // it) was never listed or removed again, and a run stored again meanwhile had lost its blobs.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-abandoned-')));
    const left = { namespace: 'default', runId: 'subagent:unit:left', digest: 'e'.repeat(64) };
    const going = { namespace: 'default', runId: 'subagent:unit:going', digest: 'f'.repeat(64) };
    await own.put(left, Buffer.from('left'));
    await own.put(going, Buffer.from('going'));
    const namespaceDir = join(own.dir, 'default');
    const aside = (runId: string, movedAt: number) =>
      `#deleting-${movedAt}-${randomUUID()}-${encodeURIComponent(runId)}`;
    renameSync(
      join(namespaceDir, encodeURIComponent(left.runId)),
      join(namespaceDir, aside(left.runId, Date.now() - 60 * 60 * 1000)),
    );
    const goingAside = aside(going.runId, Date.now());
    renameSync(join(namespaceDir, encodeURIComponent(going.runId)), join(namespaceDir, goingAside));
    expect((await own.runs('default')).map((run) => run.runId)).toEqual([left.runId]);
    expect(Buffer.from((await own.get(left))!).toString()).toBe('left');
    expect(readdirSync(namespaceDir).sort()).toEqual([goingAside, encodeURIComponent(left.runId)].sort());
  });

  it('deletes a run whose directory name is too long to carry into its name aside (240 bytes), and removes such an aside a dead process left', async () => {
    // Before, moving it aside as `#deleting-<time>-<uuid>-<its name>` failed (ENAMETOOLONG), and
    // with it every sweep, at that run.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-long-')));
    const long = {
      namespace: 'default',
      runId: `subagent:${'l'.repeat(240 - 'subagent%3A'.length)}`,
      digest: 'e'.repeat(64),
    };
    expect(encodeURIComponent(long.runId)).toHaveLength(240);
    await own.put(long, Buffer.from('long'));
    expect(await own.deleteRun('default', long.runId, pastEverythingStored())).toBe(true);
    expect(await own.get(long)).toBeUndefined();
    const namespaceDir = join(own.dir, 'default');
    expect(readdirSync(namespaceDir)).toEqual([]);
    mkdirSync(join(namespaceDir, `#deleting-${Date.now() - 60 * 60 * 1000}-${randomUUID()}`));
    expect(await own.runs('default')).toEqual([]);
    expect(readdirSync(namespaceDir)).toEqual([]);
  });

  it('files a run id and namespace too long for a file name (1,000 bytes, tripled by encoding) under a prefix and hash, lists the run by its id, deletes it, and puts it back when a dead sweep left it aside', async () => {
    // Before, its directory was named by the whole encoded id: every write failed ENAMETOOLONG, so
    // a start with a payload to offload was refused and a turn's large result retried for ever.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-hashed-')));
    const namespace = `ns-${'ñ'.repeat(300)}`;
    const runId = `subagent-${'é'.repeat(477)}:${randomUUID()}`;
    expect(Buffer.byteLength(runId)).toBe(1000);
    const blob = { namespace, runId, digest: 'a'.repeat(64) };
    const short = { namespace, runId: 'subagent-short:1', digest: 'b'.repeat(64) };
    await own.put(blob, Buffer.from('long'));
    await own.put(short, Buffer.from('short'));
    expect(Buffer.from((await own.get(blob))!).toString()).toBe('long');
    expect((await own.runs(namespace)).map((run) => run.runId).sort()).toEqual([runId, short.runId].sort());
    const [namespaceName] = readdirSync(own.dir);
    expect(namespaceName!.length).toBeLessThanOrEqual(255);
    const namespaceDir = join(own.dir, namespaceName!);
    const names = readdirSync(namespaceDir);
    // A short id keeps its name: the blobs stored before are found where they are.
    expect(names).toContain(encodeURIComponent(short.runId));
    const hashed = names.find((name) => name !== encodeURIComponent(short.runId))!;
    expect(hashed.startsWith('subagent-%C3%A9')).toBe(true);
    expect(hashed.length).toBeLessThanOrEqual(
      255 - '#deleting-1765000000000-00000000-0000-0000-0000-000000000000-'.length,
    );
    // Moved aside by a sweep whose process died an hour ago: put back, listed by its id again.
    const aside = `#deleting-${Date.now() - 60 * 60 * 1000}-${randomUUID()}-${hashed}`;
    renameSync(join(namespaceDir, hashed), join(namespaceDir, aside));
    expect((await own.runs(namespace)).map((run) => run.runId).sort()).toEqual([runId, short.runId].sort());
    expect(Buffer.from((await own.get(blob))!).toString()).toBe('long');
    expect(await own.deleteRun(namespace, runId, pastEverythingStored())).toBe(true);
    expect(await own.get(blob)).toBeUndefined();
    expect((await own.runs(namespace)).map((run) => run.runId)).toEqual([short.runId]);
    // A name of that form without the id kept in it (another program's, or a put under way) is left alone.
    mkdirSync(join(namespaceDir, `x#${'c'.repeat(64)}`));
    expect((await own.runs(namespace)).map((run) => run.runId)).toEqual([short.runId]);
  });

  it('lists 3,000 runs with at most 32 run directories stat-ed at once, each with its time, past one gone since the listing', async () => {
    // Before, every run directory was stat-ed at once (100,000 requests queued ahead of every
    // other file operation of the worker). Node's own async hooks count the file system requests
    // in flight; no hook in the store.
    const own = new FilePayloadStore(mkdtempSync(join(tmpdir(), 'subagent-payloads-many-')));
    const namespaceDir = join(own.dir, 'default');
    const expected = Array.from({ length: 3000 }, (_, index) => {
      const runId = `subagent:unit:many-${index}`;
      const runDir = join(namespaceDir, encodeURIComponent(runId));
      mkdirSync(runDir, { recursive: true });
      const time = new Date(Date.UTC(2026, 0, 1) + index * 1000);
      utimesSync(runDir, time, time);
      return { runId, newestMs: statSync(runDir).mtimeMs };
    });
    // A run another worker's sweep deleted between the listing and its stat, as a link to it.
    symlinkSync(join(namespaceDir, 'deleted'), join(namespaceDir, encodeURIComponent('subagent:unit:deleted')));
    const inFlight = new Set<number>();
    let most = 0;
    const hook = createHook({
      init(id, type) {
        if (type !== 'FSREQPROMISE') return;
        inFlight.add(id);
        most = Math.max(most, inFlight.size);
      },
      before: (id) => inFlight.delete(id),
      destroy: (id) => inFlight.delete(id),
    });
    hook.enable();
    let runs: Awaited<ReturnType<FilePayloadStore['runs']>>;
    try {
      runs = await own.runs('default');
    } finally {
      hook.disable();
    }
    const byId = (a: { runId: string }, b: { runId: string }) => a.runId.localeCompare(b.runId);
    expect(runs.sort(byId)).toEqual(expected.sort(byId));
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(32);
  });

  it('stores the same payload many times at once (one run, one batch) whole, and reads it back', async () => {
    // Identical payloads stored at once (two tool calls that read the same file, say) write the
    // same blob concurrently; before, their partial files could share a name within a millisecond,
    // so one truncated the other's bytes or found its partial file gone.
    const own = { ...target, id: 'subagent:unit:3' };
    const big = {
      metadata: { encoding: Buffer.from('json/plain') },
      data: Buffer.from(JSON.stringify('y'.repeat(4 << 20))),
    };
    const references = await runner.store(
      Array.from({ length: 16 }, () => big),
      { target: own },
    );
    const back = await runner.retrieve(references);
    expect(back.map((one) => Buffer.from(one.data!).equals(big.data))).toEqual(references.map(() => true));
    expect(readdirSync(join(dir, 'default', encodeURIComponent(own.id)))).toHaveLength(1);
  });
});
