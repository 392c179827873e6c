// `subagents audit`: a run's history exported as hash-chained, signed JSONL; a file verified, by
// its chain, by its signatures against a public key, and against the server's own history; and a
// signing key pair made.
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  createWriteStream,
  fchmodSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Client } from '@temporalio/client';
import {
  type AuditDraft,
  type AuditRecord,
  type AuditVerdict,
  auditDrafts,
  auditSignerFromEnv,
  generateAuditKeyPair,
  streamAudit,
  verifyAuditRecords,
} from '../audit';
import { SIGNATURE_RECORD } from '../audit/chain';
import { canonicalJson } from '../seam/json';
import { CliError, EXIT, Flags, describeOrUnknown, out, withClient } from './common';
import { ReaderGone, print } from './output';

export async function auditExport(flags: Flags, client: Client, id: string): Promise<number> {
  // A key that cannot sign is refused before anything is read or written.
  const signer = auditSignerFromEnv();
  await describeOrUnknown(client.workflow.getHandle(id), id);
  let written = 0;
  // Each record is written as it is sealed: one line at a time, however long the history.
  const lines = async function* () {
    for await (const record of streamAudit(client, id, signer)) {
      written++;
      yield JSON.stringify(record) + '\n';
    }
  };
  const file = flags.values.out ? String(flags.values.out) : undefined;
  if (!file) {
    for await (const line of lines()) await print(line);
    return EXIT.ok;
  }
  await writeWhole(file, lines());
  if (!flags.json) console.error(`wrote ${written} records to ${file}`);
  else console.log(JSON.stringify({ id, records: written, file }));
  return EXIT.ok;
}

/**
 * Writes `lines` to `file` as they come, through a partial file renamed over it at the end: an
 * export that fails part way leaves the file as it was. A file there already keeps its mode (one
 * only its owner may read stays so), and a symbolic link its place: what it points to is replaced.
 * A FIFO or a device is written directly.
 */
async function writeWhole(file: string, lines: AsyncIterable<string>): Promise<void> {
  const existing = statSync(file, { throwIfNoEntry: false });
  if (existing && !existing.isFile()) {
    // A FIFO's reader that has gone is one gone, as stdout's: the export stops quietly.
    await pipeline(Readable.from(lines), createWriteStream(file)).catch((err: unknown) => {
      throw (err as NodeJS.ErrnoException).code === 'EPIPE' ? new ReaderGone() : err;
    });
    return;
  }
  const target = existing ? realpathSync(file) : file;
  const partial = `${target}.${randomBytes(6).toString('hex')}.partial`;
  // Said of the file asked for, before the history is read.
  const cannotWrite = (err: unknown) =>
    new CliError(`cannot write ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, EXIT.failed);
  let fd: number;
  try {
    // Owner-only while it is written; then the mode of the file it replaces (the umask aside).
    fd = openSync(partial, 'wx', existing ? 0o600 : 0o666);
  } catch (err) {
    throw cannotWrite(err);
  }
  try {
    if (existing) fchmodSync(fd, existing.mode & 0o7777);
  } catch (err) {
    closeSync(fd);
    rmSync(partial, { force: true });
    throw cannotWrite(err);
  }
  try {
    await pipeline(Readable.from(lines), createWriteStream(partial, { fd }));
    renameSync(partial, target);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/**
 * Checks a file: its chain always; its signatures with `--public-key FILE`; and with
 * `--against-server`, every record against the one the server's history gives today. Reads the
 * file line by line (twice with `--against-server`, through one descriptor), a record at a time.
 */
export async function auditVerify(flags: Flags, file: string): Promise<number> {
  const handle = await open(file, 'r');
  try {
    // A key file that cannot be read is reported once the audit file has parsed, as when the file
    // was parsed whole first: a file that is not JSONL says so, whatever the key.
    let publicKey: string | undefined;
    let unreadableKey: unknown;
    try {
      publicKey = flags.values['public-key'] ? readFileSync(String(flags.values['public-key']), 'utf8') : undefined;
    } catch (err) {
      unreadableKey = err;
    }
    let verdict: AuditVerdict;
    /** The header's data: the run the file says it is of. */
    let header: unknown;
    try {
      verdict = await verifyAuditRecords(
        (async function* () {
          for await (const record of fileRecords(handle)) {
            if (header === undefined) header = (record as { data?: unknown } | null)?.data ?? null;
            yield record;
          }
        })(),
        publicKey === undefined ? {} : { publicKey },
      );
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      out(flags, `${file}: not JSONL`, { ok: false, reason: 'not JSONL' });
      return EXIT.tampered;
    }
    if (unreadableKey !== undefined) throw unreadableKey;
    if (!verdict.ok) {
      out(flags, `${file}: record ${verdict.seq}: ${verdict.reason}`, verdict);
      return EXIT.tampered;
    }
    if (!flags.values['against-server']) {
      const how = verdict.signed
        ? 'chain intact, signatures verified'
        : 'chain intact (signatures not checked: no --public-key)';
      out(flags, `${file}: ${verdict.records} records, ${how}`, verdict);
      return EXIT.ok;
    }
    return await withClient(async ({ client }) => {
      const { differences, count } = await differencesFromServer(
        client,
        String((header as { runId?: unknown }).runId),
        fileRecords(handle) as AsyncIterable<AuditRecord>,
      );
      if (count > 0) {
        const more = count > differences.length ? [`  and ${count - differences.length} more`] : [];
        out(
          flags,
          [`${file}: differs from the server's history:`, ...differences.map((d) => `  ${d}`), ...more].join('\n'),
          { ok: false, differences, differenceCount: count },
        );
        return EXIT.tampered;
      }
      out(flags, `${file}: ${verdict.records} records, chain intact, every record as the server's history has it`, {
        ...verdict,
        againstServer: true,
      });
      return EXIT.ok;
    });
  } finally {
    await handle.close();
  }
}

/**
 * The records of an open JSONL file from its start, one per line that is not blank, as they are
 * read. Throws the `SyntaxError` of a line that is not JSON.
 */
async function* fileRecords(handle: FileHandle): AsyncGenerator<unknown> {
  const parsed = function* (lines: string[]) {
    for (const line of lines) if (line.trim() !== '') yield JSON.parse(line) as unknown;
  };
  // The pieces of the line not ended yet, joined once when its end comes: a line of many chunks
  // is copied once, not again with each chunk.
  let pieces: string[] = [];
  for await (const chunk of handle.createReadStream({ encoding: 'utf8', start: 0, autoClose: false })) {
    const lines = (chunk as string).split('\n');
    if (lines.length === 1) {
      pieces.push(lines[0]!);
      continue;
    }
    lines[0] = [...pieces, lines[0]!].join('');
    pieces = [lines.pop()!];
    yield* parsed(lines);
  }
  yield* parsed([pieces.join('')]);
}

/** How many differences `audit verify --against-server` names; it counts the others. */
const SHOWN_DIFFERENCES = 20;

/**
 * The first `SHOWN_DIFFERENCES` ways the file's records differ from those the server's history
 * gives now, record by record, and how many there are in all. Holds those it names and no more:
 * a file of a million records that all differ (one record dropped near the start shifts every
 * record after it) was a million strings, printed as one.
 */
async function differencesFromServer(
  client: Client,
  runId: string,
  records: AsyncIterable<AuditRecord>,
): Promise<{ differences: string[]; count: number }> {
  const filed = (async function* () {
    for await (const record of records) if (record.seq > 0 && record.type !== SIGNATURE_RECORD) yield record;
  })();
  const server = auditDrafts(client, runId, false);
  const same = (a: AuditDraft, b: AuditDraft) =>
    a.type === b.type && a.time === b.time && canonicalJson(a.data) === canonicalJson(b.data);
  const differences: string[] = [];
  let count = 0;
  for (;;) {
    const [{ value: mine }, { value: theirs }] = await Promise.all([filed.next(), server.next()]);
    if (!mine && !theirs) break;
    if (mine && theirs && same(mine, theirs)) continue;
    if (count++ >= SHOWN_DIFFERENCES) continue;
    if (!theirs) differences.push(`record ${mine!.seq} (${mine!.type}) is not in the server's history`);
    else if (!mine) differences.push(`the server's history has a ${theirs.type} at ${theirs.time} the file lacks`);
    else {
      differences.push(
        `record ${mine.seq}: the file has ${mine.type} at ${mine.time}, the server ${theirs.type} at ${theirs.time}` +
          (mine.type === theirs.type && mine.time === theirs.time ? ' with other data' : ''),
      );
    }
  }
  return { differences, count };
}

/** Writes a new Ed25519 key pair: `<prefix>.key` (private, owner-only) and `<prefix>.pub`. */
export function auditKeygen(flags: Flags): number {
  const prefix = flags.values.out ? String(flags.values.out) : undefined;
  if (!prefix) throw new CliError('usage: subagents audit keygen --out PREFIX', EXIT.usage);
  const { privateKey, publicKey } = generateAuditKeyPair();
  writeFileSync(`${prefix}.key`, privateKey, { mode: 0o600 });
  writeFileSync(`${prefix}.pub`, publicKey);
  out(flags, `wrote ${prefix}.key (keep it secret: SUBAGENT_AUDIT_SIGNING_KEY=file:${prefix}.key) and ${prefix}.pub`, {
    privateKey: `${prefix}.key`,
    publicKey: `${prefix}.pub`,
  });
  return EXIT.ok;
}
