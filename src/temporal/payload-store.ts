// Large payloads out of the history (a claim check): a payload over a size threshold is written to
// a store, and history keeps a small reference to it. Built on the SDK's external storage, so every
// client and worker offloads and fetches without knowing it, after the codec has run: a blob is as
// encrypted as the history would have been. Blobs are filed by namespace, run and SHA-256, so a
// retried write stores nothing twice, a read checks what it got, and a run's blobs go together
// once the server has forgotten the run (`sweepPayloads`).
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import {
  ApplicationFailure,
  type DataConverter,
  ExternalStorage,
  type LoadedDataConverter,
  type Payload,
  type StorageDriver,
  StorageDriverClaim,
} from '@temporalio/common';
import { ExternalStorageRunner } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../seam/constants';
import { SubagentError } from '../seam/errors';

const PayloadProto = temporal.api.common.v1.Payload;

/** Payloads at least this large (encoded) leave the history unless configured otherwise. */
export const DEFAULT_OFFLOAD_BYTES = 32 * 1024;
/**
 * The highest offload threshold: a payload under it stays in the history, where Temporal refuses
 * one over 2 MiB (with a threshold of 4 MiB, a turn that answered 3 MiB was retried until the run
 * ended error, and a start of 3 MiB was refused as UNAVAILABLE, since the limit a store allows
 * the caller is 256 MiB).
 */
export const MAX_OFFLOAD_BYTES = DEFAULT_MAX_PAYLOAD_BYTES;
/** The largest payload a run takes when payloads are offloaded (without, Temporal's 2 MiB applies). */
export const OFFLOADED_MAX_PAYLOAD_BYTES = 256 * 1024 * 1024;
/** A run whose newest blob is younger than this keeps its blobs: its start may still be on the way. */
const SWEEP_GRACE_MS = 60 * 60 * 1000;
/**
 * A run directory being deleted is first renamed to `#deleting-<epoch ms>-<uuid>-<its name>` (its
 * name left out where the whole would be too long): a name no run id is encoded to (`#` always is),
 * so no listing takes it for a run.
 */
const DELETING = '#deleting-';
/**
 * One left that long (its process died while deleting it) is put back, for sweeps to judge again;
 * one without its run's name (too long to add), removed.
 */
const ABANDONED_DELETION_MS = 10 * 60 * 1000;
/** The longest file name most file systems take (an encoded name is ASCII: bytes). */
const MAX_NAME_BYTES = 255;
/**
 * How much of an id whose encoding is longer than a file name takes begins its directory's name,
 * before `#` and the SHA-256 of the whole id: 185 bytes in all, so that `DELETING`'s 61 more
 * still fit and a deletion moved aside can always be put back.
 */
const HASHED_PREFIX_BYTES = 120;
/** A directory name of that form (`#` is in no encoded id, so no short id's name is one). */
const HASHED_NAME = /^[^#]*#[0-9a-f]{64}$/;
/** In a run directory named so: the run's id, which the listing reads back (no digest's name). */
const RUN_ID_FILE = '#run-id';
/** Blobs written outside any run (none are expected) are filed under this run id, and kept. */
const NO_RUN = '-';
/** How many run directories the file store stats at once when it lists a namespace's runs. */
const LIST_CONCURRENCY = 32;

/** Where one blob lives: the namespace, the run's workflow id, and the SHA-256 of its bytes (hex). */
export interface PayloadBlobKey {
  namespace: string;
  runId: string;
  digest: string;
}

/** A store for offloaded payloads. Writes are idempotent: a key always names the same bytes. */
export interface SubagentPayloadStore {
  /** Names the store in every reference history keeps: readers need a store of the same name. */
  readonly name: string;
  put(key: PayloadBlobKey, bytes: Uint8Array): Promise<void>;
  /** The blob's bytes, or undefined when the store has no such blob. */
  get(key: PayloadBlobKey): Promise<Uint8Array | undefined>;
  /**
   * The runs of `namespace` that have blobs, with when the newest was written (epoch ms). A `put`
   * of a blob the store holds already counts as a write: the sweeper spares a run written lately.
   */
  runs(namespace: string): Promise<{ runId: string; newestMs: number }[]>;
  /**
   * Deletes the run's blobs. With `unlessWrittenAfter` (epoch ms, the `newestMs` listed), keeps
   * them when one was written since, resolving false: the sweeper asks the server about each run
   * after listing them all, and a start repeated with its key may store the run's input meanwhile.
   * Resolves false too when the run is gone already (another worker's sweep deleted it).
   */
  deleteRun(namespace: string, runId: string, unlessWrittenAfter?: number): Promise<boolean | void>;
  close(): Promise<void>;
}

export interface PayloadStorageOptions {
  /** Payloads of at least this many bytes (encoded) are offloaded. Default 32 KiB. */
  thresholdBytes?: number;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A store driver the SDK can run, keeping the store it writes to at hand for the sweeper. */
class PayloadStoreDriver implements StorageDriver {
  readonly type = 'durable-subagents';
  readonly name: string;

  constructor(readonly blobs: SubagentPayloadStore) {
    this.name = blobs.name;
  }

  async store(context: Parameters<StorageDriver['store']>[0], payloads: Payload[]): Promise<StorageDriverClaim[]> {
    const target = context.target;
    const namespace = target?.namespace ?? 'default';
    const runId = (target?.kind === 'workflow' ? target.id : undefined) ?? NO_RUN;
    return Promise.all(
      payloads.map(async (payload) => {
        const bytes = PayloadProto.encode(payload).finish();
        const digest = sha256(bytes);
        try {
          await this.blobs.put({ namespace, runId, digest }, bytes);
        } catch (err) {
          throw this.unavailable('store', runId, err);
        }
        return new StorageDriverClaim({ namespace, run: runId, digest });
      }),
    );
  }

  async retrieve(_context: unknown, claims: StorageDriverClaim[]): Promise<Payload[]> {
    return Promise.all(
      claims.map(async ({ claimData }) => {
        const key = { namespace: claimData.namespace!, runId: claimData.run!, digest: claimData.digest! };
        let bytes: Uint8Array | undefined;
        try {
          bytes = await this.blobs.get(key);
        } catch (err) {
          throw this.unavailable('read', key.runId, err);
        }
        // Not retried: a blob that is gone (or not what was written) stays so. An activity that
        // meets one fails for good; a caller gets the code.
        if (!bytes) {
          throw ApplicationFailure.nonRetryable(
            `payload ${key.digest} of run ${key.runId} is missing from the payload store "${this.name}"`,
            'PAYLOAD_MISSING',
          );
        }
        if (sha256(bytes) !== key.digest) {
          throw ApplicationFailure.nonRetryable(
            `payload ${key.digest} of run ${key.runId} in the payload store "${this.name}" does not match its digest`,
            'PAYLOAD_MISSING',
          );
        }
        return PayloadProto.decode(bytes);
      }),
    );
  }

  /**
   * A store that failed (a directory not writable, a disk full, the database down), named as
   * such: the client would report it as a failed call to the server ("Unexpected error while
   * making gRPC request"), and a worker's failing task likewise. `UNAVAILABLE`: it may pass.
   */
  private unavailable(verb: 'store' | 'read', runId: string, err: unknown): SubagentError {
    const why = err instanceof Error ? err.message : String(err);
    return new SubagentError(
      `the payload store "${this.name}" could not ${verb} a payload of run ${runId}: ${why}`,
      'UNAVAILABLE',
      { cause: err },
    );
  }
}

/** The payload limit applied by default: just under Temporal's 2 MiB, unless payloads are offloaded. */
export function defaultPayloadLimit(converter: Pick<DataConverter, 'externalStorage'> | undefined): number {
  return converter?.externalStorage ? OFFLOADED_MAX_PAYLOAD_BYTES : DEFAULT_MAX_PAYLOAD_BYTES;
}

/**
 * External storage for a data converter: payloads of `thresholdBytes` or more go to `store`.
 * Throws `INVALID_CONFIG` for a threshold that is not a whole number of 0 to `MAX_OFFLOAD_BYTES`.
 */
export function payloadStorage(store: SubagentPayloadStore, options: PayloadStorageOptions = {}): ExternalStorage {
  const threshold = options.thresholdBytes ?? DEFAULT_OFFLOAD_BYTES;
  if (!(Number.isSafeInteger(threshold) && threshold >= 0 && threshold <= MAX_OFFLOAD_BYTES)) {
    throw new SubagentError(
      `thresholdBytes must be a whole number of bytes from 0 to ${MAX_OFFLOAD_BYTES} (got ${threshold}): Temporal refuses a payload over 2 MiB that stays in the history`,
      'INVALID_CONFIG',
    );
  }
  return new ExternalStorage({ drivers: [new PayloadStoreDriver(store)], payloadSizeThreshold: threshold });
}

/** The store behind a data converter's external storage, when it is one of ours. */
export function payloadStoreOf(
  converter: DataConverter | LoadedDataConverter | undefined,
): SubagentPayloadStore | undefined {
  const driver = converter?.externalStorage?.drivers.find((candidate) => candidate instanceof PayloadStoreDriver);
  return (driver as PayloadStoreDriver | undefined)?.blobs;
}

/**
 * `payloads` with every reference replaced by the payload it names, for code that reads raw
 * history. Rejects with `PAYLOAD_MISSING` (an `ApplicationFailure`) for a blob the store lacks.
 */
export async function retrievePayloads(
  converter: LoadedDataConverter,
  payloads: Payload[] | null | undefined,
): Promise<Payload[]> {
  const list = payloads ?? [];
  if (!converter.externalStorage) return list;
  return new ExternalStorageRunner(converter.externalStorage).retrieve(list);
}

/** Payloads as files: `<dir>/<namespace>/<run id>/<sha256>`. The embedded default's store. */
export class FilePayloadStore implements SubagentPayloadStore {
  readonly name = 'files';

  constructor(readonly dir: string) {}

  private runDir(namespace: string, runId: string): string {
    return join(this.dir, fileName(namespace), fileName(runId));
  }

  async put({ namespace, runId, digest }: PayloadBlobKey, bytes: Uint8Array): Promise<void> {
    const dir = this.runDir(namespace, runId);
    const path = join(dir, digest);
    // A blob already here is written again as far as the sweeper can tell: a start repeated with
    // its idempotency key after the server forgot the run stores the same input blob, whose old
    // time had let a sweep delete it between this put and the start reaching the server.
    if (await renewed(path, dir)) return;
    await mkdir(dir, { recursive: true });
    // Before any blob: a listing that finds the run's blobs finds its id. Written with each new
    // blob, so a process that died between the directory and its id leaves it for the next put.
    if (HASHED_NAME.test(fileName(runId))) await writeWhole(join(dir, RUN_ID_FILE), runId);
    await writeWhole(path, bytes);
  }

  async get({ namespace, runId, digest }: PayloadBlobKey): Promise<Uint8Array | undefined> {
    if (!/^[0-9a-f]{64}$/.test(digest)) return undefined;
    try {
      return await readFile(join(this.runDir(namespace, runId), digest));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async runs(namespace: string): Promise<{ runId: string; newestMs: number }[]> {
    const dir = join(this.dir, fileName(namespace));
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    names = await this.putBackAbandoned(dir, names);
    // A directory's modification time moves with every blob added to it (and `put` sets it for a
    // blob stored again). A name no run id was encoded to is not ours: left alone, rather than
    // failing every sweep.
    const runs = names.filter((name) => HASHED_NAME.test(name) || decodedRunId(name) !== undefined);
    // A few at a time: a stat for each of 100,000 runs at once queued them all ahead of every
    // other file operation of the process (they share libuv's few threads), each held in memory.
    // A run deleted since the listing (another worker's sweep) is left out, as is a hashed name
    // whose id is not (yet) there to read.
    const listed = await mapBounded(runs, LIST_CONCURRENCY, async (name) => {
      try {
        const runId = decodedRunId(name) ?? (await storedRunId(join(dir, name)));
        if (runId === undefined) return undefined;
        return { runId, newestMs: (await stat(join(dir, name))).mtimeMs };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    });
    return listed.filter((run) => run !== undefined);
  }

  /**
   * `names` (a namespace directory's) with each run directory that a deletion moved aside and left
   * for `ABANDONED_DELETION_MS` (its process died between the move and the removal) put back
   * under its own name (or removed, without one). Otherwise never removed, and a run stored again
   * meanwhile had lost blobs.
   */
  private async putBackAbandoned(dir: string, names: string[]): Promise<string[]> {
    const abandoned = new RegExp(`^${DELETING}(\\d+)-[0-9a-f-]{36}(?:-(.+))?$`);
    const listed = new Set(names);
    for (const name of names) {
      const match = abandoned.exec(name);
      if (!match || Date.now() - Number(match[1]) < ABANDONED_DELETION_MS) continue;
      const runName = match[2];
      try {
        if (runName === undefined) await rm(join(dir, name), { recursive: true, force: true });
        else await putBack(join(dir, name), join(dir, runName));
      } catch (err) {
        // Put back by another sweep since the listing.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      listed.delete(name);
      if (runName !== undefined) listed.add(runName);
    }
    return [...listed];
  }

  async deleteRun(namespace: string, runId: string, unlessWrittenAfter?: number): Promise<boolean> {
    const dir = this.runDir(namespace, runId);
    // Moved out of the way in one step before its time is checked: of two sweeps deleting a run at
    // once only one moves it (the other finds it gone, and deletes nothing), and a blob stored
    // before the move is in what was moved, whose time then says so. Checked first and removed
    // after, a blob stored between the two (a start repeated with its key) was removed with it.
    const aside = `${DELETING}${Date.now()}-${randomUUID()}`;
    // Its run's name too where the file system takes a name that long (255 bytes), so that a
    // process that dies with it aside leaves a directory the next listing can put back.
    const named = `${aside}-${fileName(runId)}`;
    const doomed = join(this.dir, fileName(namespace), named.length <= MAX_NAME_BYTES ? named : aside);
    try {
      await rename(dir, doomed);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    if (unlessWrittenAfter !== undefined && (await stat(doomed)).mtimeMs > unlessWrittenAfter) {
      await putBack(doomed, dir);
      return false;
    }
    await rm(doomed, { recursive: true, force: true });
    return true;
  }

  async close(): Promise<void> {}
}

/**
 * A namespace or run id as the name of its directory: percent-encoded, and `.` and `..` too
 * (`encodeURIComponent` leaves them as they are, and a path reads them as the directory itself
 * and the one above it: a workflow id of `..` had its blobs filed in the store's root). An id
 * whose encoding is over 255 bytes (a workflow id takes 1,000, and encoding triples non-ASCII)
 * is named by the first `HASHED_PREFIX_BYTES` of it, `#` and the SHA-256 of the whole id: its
 * encoding whole failed every write of its run with `ENAMETOOLONG`.
 */
function fileName(id: string): string {
  const encoded = id === '.' || id === '..' ? id.replaceAll('.', '%2E') : encodeURIComponent(id);
  if (encoded.length <= MAX_NAME_BYTES) return encoded;
  let prefix = encoded.slice(0, HASHED_PREFIX_BYTES);
  // Not half an escape: the prefix reads back as the id's beginning.
  const escape = prefix.lastIndexOf('%');
  if (escape > prefix.length - 3) prefix = prefix.slice(0, escape);
  return `${prefix}#${createHash('sha256').update(id, 'utf8').digest('hex')}`;
}

/** The run id a run directory's name encodes, or undefined for a name none was encoded to. */
function decodedRunId(name: string): string | undefined {
  try {
    const runId = decodeURIComponent(name);
    return fileName(runId) === name ? runId : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The run id kept in the run directory `dir`, whose name is hashed; undefined when the file holds
 * an id of another name (not one `put` wrote). Rejects with `ENOENT` when there is none.
 */
async function storedRunId(dir: string): Promise<string | undefined> {
  const runId = await readFile(join(dir, RUN_ID_FILE), 'utf8');
  return fileName(runId) === basename(dir) ? runId : undefined;
}

/**
 * Writes `path` whole or not at all: a reader never sees half a blob. Each write has a partial
 * file of its own: the same blob is often written by several puts at once (identical payloads in
 * one batch), and a shared name let one truncate another's bytes or rename them away.
 */
async function writeWhole(path: string, data: Uint8Array | string): Promise<void> {
  const partial = `${path}.${randomUUID()}.partial`;
  try {
    await writeFile(partial, data);
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * Sets the times of the blob at `path` and of its run directory to now. False when the blob is
 * not there, or its times may not be set by this process: then it is written (again) whole.
 */
async function renewed(path: string, dir: string): Promise<boolean> {
  const now = new Date();
  try {
    await utimes(path, now, now);
    await utimes(dir, now, now);
    return true;
  } catch {
    return false;
  }
}

/**
 * Moves a run directory `deleteRun` moved aside back to `dir`. A put that came meanwhile made
 * `dir` again: then the blobs go back into it one by one (a blob there already is the same bytes).
 */
async function putBack(doomed: string, dir: string): Promise<void> {
  try {
    await rename(doomed, dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
  }
  for (const name of await readdir(doomed)) await rename(join(doomed, name), join(dir, name));
  await rm(doomed, { recursive: true, force: true });
}

/** `fn` over `items`, at most `limit` at once; the results in the order of `items`. */
async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** What `sweepPayloads` goes by besides its client and store. */
export interface SweepPayloadsOptions {
  /** The time the sweep takes as now (epoch ms). Default `Date.now()`. */
  now?: number;
  /**
   * Stops the sweep: once it aborts, no other run is asked about or deleted, and the sweep resolves
   * with what it deleted so far. A store call or a question to the server in flight is awaited.
   */
  signal?: AbortSignal;
}

/**
 * Deletes the blobs of every run the server no longer has (closed, and its namespace's retention
 * passed), except runs with a blob written within the last hour or since the runs were listed: a
 * start stores its input before the run exists. Resolves with the run ids whose blobs were deleted.
 * Rejects with `UNAVAILABLE` naming a run the store failed to delete, once it has swept the others;
 * rejects with what the store or the server threw when the listing or a question about a run fails.
 */
export async function sweepPayloads(
  client: Client,
  store: SubagentPayloadStore,
  options: SweepPayloadsOptions = {},
): Promise<string[]> {
  const { namespace } = client.options;
  const { now = Date.now(), signal } = options;
  const deleted: string[] = [];
  const failed: { runId: string; err: unknown }[] = [];
  if (signal?.aborted) return deleted;
  for (const { runId, newestMs } of await store.runs(namespace)) {
    // Between runs only: a describe or a deletion under way is let finish, and none starts after.
    if (signal?.aborted) break;
    if (now - newestMs < SWEEP_GRACE_MS) continue;
    if (runId === NO_RUN || (await runExists(client, runId))) continue;
    if (signal?.aborted) break;
    // Unless written since it was listed: a start whose input went to the store after the listing
    // may reach the server only after the question above.
    let removed: boolean | void;
    try {
      removed = await store.deleteRun(namespace, runId, newestMs);
    } catch (err) {
      // The runs after it are swept all the same: one run the store cannot delete (a directory
      // of another user's) stopped every sweep there, and the runs listed after it grew for ever.
      failed.push({ runId, err });
      continue;
    }
    if (removed === false) continue;
    deleted.push(runId);
  }
  if (failed.length > 0) {
    const [{ runId, err }] = failed as [(typeof failed)[number]];
    const why = err instanceof Error ? err.message : String(err);
    throw new SubagentError(
      `the payload store "${store.name}" could not delete the blobs of ${failed.length} run(s), run ${runId} first: ${why} (the blobs of ${deleted.length} other run(s) deleted)`,
      'UNAVAILABLE',
      { cause: err },
    );
  }
  return deleted;
}

async function runExists(client: Client, runId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(runId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
