// The audit chain: records numbered and hash-chained behind a header that counts them, and signed.
// The hashes catch a careless edit; they cannot stop a forger, who can recompute them. The
// signatures can: an Ed25519 signature over the chain's head every CHECKPOINT records and at its
// end, by a key the forger does not hold, checked with its public key alone. Pure: no Temporal here.
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SubagentError } from '../seam/errors';
import { canonicalJson, describeValue } from '../seam/json';

export interface AuditRecord {
  seq: number;
  type: string;
  /** ISO time of the history event the record comes from. */
  time: string;
  data: unknown;
  /** The previous record's hash; 64 zeros for the header. */
  prev: string;
  /** SHA-256 of this record's canonical JSON without `hash`. */
  hash: string;
}

/** A record before it is sealed into the chain. */
export type AuditDraft = Pick<AuditRecord, 'type' | 'time' | 'data'>;

/** What an `audit.signature` record holds: a signature over the chain's head at `seq`. */
export interface AuditSignature {
  keyId: string;
  algorithm: 'ed25519';
  /** The record signed: its seq and hash (everything before it is in that hash, link by link). */
  covers: { seq: number; hash: string };
  /** The last signature, over the record just before it: nothing may follow. */
  final: boolean;
  /** Base64. */
  signature: string;
}

/**
 * Signs audit chains. A local Ed25519 key (`ed25519AuditSigner`), or anything that signs with one
 * elsewhere (a KMS): the verifier needs only the public key.
 */
export interface AuditSigner {
  /** Names the key in every signature, so a verifier knows which public key to use. */
  readonly keyId: string;
  /** An Ed25519 signature of `message`: 64 bytes, a Buffer or a Uint8Array. */
  sign(message: Buffer): Promise<Uint8Array>;
}

export const SIGNATURE_RECORD = 'audit.signature';
/** A signature every this many records, so a long export proves its beginning even if cut short. */
export const CHECKPOINT = 100;
const GENESIS = '0'.repeat(64);

/** A signer with a local Ed25519 private key (PEM, PKCS#8), as `generateAuditKeyPair` makes. */
export function ed25519AuditSigner(privateKeyPem: string, keyId: string): AuditSigner {
  let key: KeyObject;
  try {
    key = createPrivateKey(privateKeyPem);
  } catch (err) {
    throw new SubagentError('the audit signing key is not a PEM private key', 'INVALID_CONFIG', { cause: err });
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new SubagentError(`the audit signing key is ${key.asymmetricKeyType}; it must be Ed25519`, 'INVALID_CONFIG');
  }
  return { keyId, sign: async (message) => sign(null, message, key) };
}

/** A new Ed25519 key pair, as PEM: the private key signs exports, the public key verifies them. */
export function generateAuditKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/**
 * The signer the environment configures: `SUBAGENT_AUDIT_SIGNING_KEY` (a PEM private key, or
 * `file:<path>` of one) and `SUBAGENT_AUDIT_KEY_ID` (default `audit`). Undefined when no key is
 * set; `INVALID_CONFIG` for one that is not an Ed25519 private key, or a file that cannot be read.
 */
export function auditSignerFromEnv(env: NodeJS.ProcessEnv = process.env): AuditSigner | undefined {
  const configured = env.SUBAGENT_AUDIT_SIGNING_KEY?.trim();
  if (!configured) return undefined;
  let pem = configured;
  if (configured.startsWith('file:')) {
    const path = configured.slice('file:'.length);
    try {
      pem = readFileSync(path, 'utf8');
    } catch (err) {
      throw new SubagentError(
        `SUBAGENT_AUDIT_SIGNING_KEY names a file that cannot be read: ${path} (${(err as Error).message})`,
        'INVALID_CONFIG',
        { cause: err },
      );
    }
  }
  return ed25519AuditSigner(pem, env.SUBAGENT_AUDIT_KEY_ID?.trim() || 'audit');
}

/**
 * Numbers and chains the records behind a header that says how many there are; with `signer`,
 * a signature record after every CHECKPOINT records and a final one at the end.
 */
export async function sealAudit(
  runId: string,
  drafts: readonly AuditDraft[],
  signer?: AuditSigner,
): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  for await (const record of sealAuditRecords(runId, drafts.length, drafts, signer)) records.push(record);
  return records;
}

/**
 * The records `sealAudit` makes, yielded one at a time as each draft comes: the header (which
 * counts them, so `count` is known first), then each draft sealed, with the signatures between.
 * Holds one record and the chain's head, whatever the count. Reads `count` drafts and no more;
 * rejects with `UNKNOWN_RUN` if `drafts` ends before (the run's history lost records since they
 * were counted: it was deleted while it was read).
 */
export async function* sealAuditRecords(
  runId: string,
  count: number,
  drafts: AsyncIterable<AuditDraft> | Iterable<AuditDraft>,
  signer?: AuditSigner,
): AsyncGenerator<AuditRecord> {
  // Signature records are counted in the header, so the count is known before any is made: one
  // after every CHECKPOINT drafts but the last, and the final one.
  const signatures = signer ? Math.floor(Math.max(count - 1, 0) / CHECKPOINT) + 1 : 0;
  let head: AuditRecord | undefined;
  const seal = (draft: AuditDraft): AuditRecord => {
    const unsealed = {
      seq: head ? head.seq + 1 : 0,
      type: draft.type,
      time: draft.time,
      data: draft.data,
      prev: head?.hash ?? GENESIS,
    };
    return (head = { ...unsealed, hash: hashOf(unsealed) });
  };
  const signHead = async (final: boolean) => {
    const covers = { seq: head!.seq, hash: head!.hash };
    const signature: unknown = await signer!.sign(signedMessage(runId, covers, final));
    // A KMS client's answer may be a Uint8Array (whose toString is its numbers, not base64), or
    // not an Ed25519 signature at all: refused rather than written where no key would verify it.
    if (!(signature instanceof Uint8Array) || signature.length !== 64) {
      throw new SubagentError(
        `the audit signer "${signer!.keyId}" returned ${describeValue(signature)}${signature instanceof Uint8Array ? ` of ${signature.length} bytes` : ''}, not an Ed25519 signature (64 bytes)`,
        'INVALID_CONFIG',
      );
    }
    const data: AuditSignature = {
      keyId: signer!.keyId,
      algorithm: 'ed25519',
      covers,
      final,
      signature: Buffer.from(signature).toString('base64'),
    };
    return seal({ type: SIGNATURE_RECORD, time: new Date().toISOString(), data });
  };
  yield seal({
    type: 'audit.header',
    time: new Date().toISOString(),
    data: { runId, records: count + 1 + signatures, format: 2, ...(signer ? { keyId: signer.keyId } : {}) },
  });
  let sealed = 0;
  if (count > 0) {
    for await (const draft of drafts) {
      yield seal(draft);
      sealed++;
      if (sealed === count) break;
      if (signer && sealed % CHECKPOINT === 0) yield await signHead(false);
    }
  }
  if (sealed < count) {
    throw new SubagentError(
      `the history of run "${runId}" gave ${sealed} records where it had ${count} a moment before: it was deleted while it was read`,
      'UNKNOWN_RUN',
    );
  }
  if (signer) yield await signHead(true);
}

/** `signed`: the signatures were checked with a public key, and hold. */
export type AuditVerdict = { ok: true; records: number; signed: boolean } | { ok: false; seq: number; reason: string };

export interface VerifyAuditOptions {
  /**
   * The signer's public key (PEM or KeyObject). With it the chain must be signed: every signature
   * verifies, and a final one closes the file. Without it, only the hashes are checked, which a
   * forger can recompute.
   */
  publicKey?: string | KeyObject;
}

/** Checks a chain of records (parsed JSONL): every hash, every link, the order, the count, and the signatures. */
export function verifyAudit(records: readonly unknown[], options: VerifyAuditOptions = {}): AuditVerdict {
  const check = new ChainCheck(options);
  for (const record of records) check.add(record);
  return check.verdict();
}

/**
 * `verifyAudit` over records that come one at a time (a file read line by line): the same
 * verdict, holding a few records whatever the chain's length. Reads `records` to its end;
 * rejects only with what `records` throws.
 */
export async function verifyAuditRecords(
  records: AsyncIterable<unknown> | Iterable<unknown>,
  options: VerifyAuditOptions = {},
): Promise<AuditVerdict> {
  const check = new ChainCheck(options);
  for await (const record of records) check.add(record);
  return check.verdict();
}

/**
 * A chain checked record by record. Its verdict names the first problem in the order a whole
 * chain is checked in: the first broken hash or link; then the header's count; then, with a public
 * key, the key itself, a file that does not end with the final signature, and the first signature
 * that fails. So a signature is checked once the record after it (or the end) says whether it is
 * the last; it holds the header's data, the last two records and the first problem.
 */
class ChainCheck {
  private count = 0;
  private header: unknown;
  private chainProblem: AuditVerdict | undefined;
  private signatureProblem: AuditVerdict | undefined;
  /** The last record, and the one before it (what a signature in last place covers). */
  private last: AuditRecord | undefined;
  private beforeLast: AuditRecord | undefined;
  private readonly key: KeyObject | undefined;
  private readonly keyProblem: AuditVerdict | undefined;

  constructor(private readonly options: VerifyAuditOptions) {
    const { publicKey } = options;
    if (publicKey === undefined) return;
    try {
      this.key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
    } catch {
      this.keyProblem = { ok: false, seq: 0, reason: 'the public key given is not a PEM public key' };
    }
  }

  add(raw: unknown): void {
    const index = this.count++;
    if (index === 0) this.header = (raw as { data?: unknown } | undefined)?.data;
    if (this.chainProblem) return;
    this.chainProblem = chainProblem(raw, index, this.last?.hash ?? GENESIS);
    if (this.chainProblem) return;
    // The record before is not the last: its signature, if it is one, can be checked now.
    if (this.last) this.checkSignature(this.last, this.beforeLast, false);
    this.beforeLast = this.last;
    this.last = raw as AuditRecord;
  }

  verdict(): AuditVerdict {
    if (this.chainProblem) return this.chainProblem;
    const header = this.header as { records?: unknown; runId?: unknown } | undefined;
    if (header?.records !== this.count) {
      return {
        ok: false,
        seq: this.count,
        reason: `the header announces ${String(header?.records)} records, the file holds ${this.count}: records were removed from the end`,
      };
    }
    if (this.options.publicKey === undefined) return { ok: true, records: this.count, signed: false };
    if (this.keyProblem) return this.keyProblem;
    const last = this.last!;
    if (last.type !== SIGNATURE_RECORD || !(last.data as Partial<AuditSignature> | null)?.final) {
      return {
        ok: false,
        seq: last.seq,
        reason: 'the file does not end with the final signature: it is unsigned, or was cut or rewritten',
      };
    }
    this.checkSignature(last, this.beforeLast, true);
    return this.signatureProblem ?? { ok: true, records: this.count, signed: true };
  }

  /** Notes the first signature problem, in record order: `record`'s, if it is a signature and fails. */
  private checkSignature(record: AuditRecord, before: AuditRecord | undefined, isLast: boolean): void {
    if (!this.key || this.signatureProblem || record.type !== SIGNATURE_RECORD) return;
    // A forger's file may hold anything where a signature's data should be, null included.
    const signature = (record.data ?? {}) as Partial<AuditSignature>;
    const covers = signature.covers;
    if (covers?.seq !== record.seq - 1 || !before || before.hash !== covers.hash) {
      this.signatureProblem = {
        ok: false,
        seq: record.seq,
        reason: 'the signature does not cover the record before it',
      };
    } else if (signature.final !== isLast) {
      this.signatureProblem = { ok: false, seq: record.seq, reason: 'a final signature that is not the last record' };
    } else if (
      !signatureHolds(this.key, signedMessage(String(this.headerRunId()), covers, signature.final), signature.signature)
    ) {
      this.signatureProblem = {
        ok: false,
        seq: record.seq,
        reason: `the signature does not verify with the public key given (key "${signature.keyId}")`,
      };
    }
  }

  private headerRunId(): unknown {
    return (this.header as { runId?: unknown } | null | undefined)?.runId;
  }
}

/** What is wrong with `raw` as record `index` of a chain whose previous hash is `prev`; undefined when nothing is. */
function chainProblem(raw: unknown, index: number, prev: string): AuditVerdict | undefined {
  const record = raw as Partial<AuditRecord>;
  if (typeof record !== 'object' || record === null || typeof record.hash !== 'string') {
    return { ok: false, seq: index, reason: 'not an audit record' };
  }
  if (record.seq !== index) {
    return {
      ok: false,
      seq: index,
      reason: `record ${index} says it is record ${String(record.seq)}: reordered or removed`,
    };
  }
  if (record.prev !== prev) {
    return {
      ok: false,
      seq: index,
      reason: 'its link to the previous record is broken: a record before it was edited, removed or reordered',
    };
  }
  const { hash, ...unsealed } = record;
  if (hashOf(unsealed) !== hash) {
    return { ok: false, seq: index, reason: 'its content does not match its hash: it was edited' };
  }
  return undefined;
}

/** Whether `signature` (base64) is `key`'s over `message`; a malformed one is simply not. */
function signatureHolds(key: KeyObject, message: Buffer, signature: unknown): boolean {
  try {
    return verify(null, message, key, Buffer.from(String(signature), 'base64'));
  } catch {
    return false;
  }
}

/** The bytes a signature covers: the run, the record signed and its hash, and whether it is the last. */
function signedMessage(runId: string, covers: { seq: number; hash: string }, final: boolean): Buffer {
  return Buffer.from(canonicalJson({ audit: runId, seq: covers.seq, hash: covers.hash, final }));
}

function hashOf(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}
