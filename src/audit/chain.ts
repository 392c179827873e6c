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
import { canonicalJson } from '../seam/json';

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
  /** An Ed25519 signature of `message`. */
  sign(message: Buffer): Promise<Buffer>;
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
 * set; `INVALID_CONFIG` for one that is not an Ed25519 private key.
 */
export function auditSignerFromEnv(env: NodeJS.ProcessEnv = process.env): AuditSigner | undefined {
  const configured = env.SUBAGENT_AUDIT_SIGNING_KEY?.trim();
  if (!configured) return undefined;
  const pem = configured.startsWith('file:') ? readFileSync(configured.slice('file:'.length), 'utf8') : configured;
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
  // Signature records are counted in the header, so the count is known before any is made: one
  // after every CHECKPOINT drafts but the last, and the final one.
  const signatures = signer ? Math.floor(Math.max(drafts.length - 1, 0) / CHECKPOINT) + 1 : 0;
  const header: AuditDraft = {
    type: 'audit.header',
    time: new Date().toISOString(),
    data: { runId, records: drafts.length + 1 + signatures, format: 2, ...(signer ? { keyId: signer.keyId } : {}) },
  };
  const records: AuditRecord[] = [];
  const append = (draft: AuditDraft) => {
    const unsealed = {
      seq: records.length,
      type: draft.type,
      time: draft.time,
      data: draft.data,
      prev: records.at(-1)?.hash ?? GENESIS,
    };
    records.push({ ...unsealed, hash: hashOf(unsealed) });
  };
  const signHead = async (final: boolean) => {
    const head = records.at(-1)!;
    const covers = { seq: head.seq, hash: head.hash };
    const signature = await signer!.sign(signedMessage(runId, covers, final));
    const data: AuditSignature = {
      keyId: signer!.keyId,
      algorithm: 'ed25519',
      covers,
      final,
      signature: signature.toString('base64'),
    };
    append({ type: SIGNATURE_RECORD, time: new Date().toISOString(), data });
  };
  append(header);
  for (const [index, draft] of drafts.entries()) {
    append(draft);
    if (signer && (index + 1) % CHECKPOINT === 0 && index + 1 < drafts.length) await signHead(false);
  }
  if (signer) await signHead(true);
  return records;
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
  let prev = GENESIS;
  for (const [index, raw] of records.entries()) {
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
    prev = hash;
  }
  const header = (records[0] as { data?: { records?: unknown; runId?: unknown } } | undefined)?.data;
  if (header?.records !== records.length) {
    return {
      ok: false,
      seq: records.length,
      reason: `the header announces ${String(header?.records)} records, the file holds ${records.length}: records were removed from the end`,
    };
  }
  if (options.publicKey === undefined) return { ok: true, records: records.length, signed: false };
  return (
    verifySignatures(records as AuditRecord[], String(header.runId), options.publicKey) ?? {
      ok: true,
      records: records.length,
      signed: true,
    }
  );
}

/** The first signature problem, or undefined when every signature holds and the last one closes the file. */
function verifySignatures(
  records: AuditRecord[],
  runId: string,
  publicKey: string | KeyObject,
): AuditVerdict | undefined {
  let key: KeyObject;
  try {
    key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
  } catch {
    return { ok: false, seq: 0, reason: 'the public key given is not a PEM public key' };
  }
  const last = records.at(-1)!;
  if (last.type !== SIGNATURE_RECORD || !(last.data as AuditSignature).final) {
    return {
      ok: false,
      seq: last.seq,
      reason: 'the file does not end with the final signature: it is unsigned, or was cut or rewritten',
    };
  }
  for (const record of records) {
    if (record.type !== SIGNATURE_RECORD) continue;
    const signature = record.data as AuditSignature;
    const covered = records[signature.covers?.seq];
    if (!covered || covered.hash !== signature.covers.hash || signature.covers.seq !== record.seq - 1) {
      return { ok: false, seq: record.seq, reason: 'the signature does not cover the record before it' };
    }
    if (signature.final !== (record === last)) {
      return { ok: false, seq: record.seq, reason: 'a final signature that is not the last record' };
    }
    if (!signatureHolds(key, signedMessage(runId, signature.covers, signature.final), signature.signature)) {
      return {
        ok: false,
        seq: record.seq,
        reason: `the signature does not verify with the public key given (key "${signature.keyId}")`,
      };
    }
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
