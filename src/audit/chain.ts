// The audit chain: records numbered and hash-chained behind a header that counts them, so
// `verifyAudit` detects an edited, removed, reordered or cut-off record. Pure: no Temporal here.
import { createHash } from 'node:crypto';
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

const GENESIS = '0'.repeat(64);

/** Numbers and chains the records behind a header that says how many there are. */
export function sealAudit(runId: string, drafts: readonly AuditDraft[]): AuditRecord[] {
  const header: AuditDraft = {
    type: 'audit.header',
    time: new Date().toISOString(),
    data: { runId, records: drafts.length + 1, format: 1 },
  };
  const records: AuditRecord[] = [];
  let prev = GENESIS;
  for (const [seq, draft] of [header, ...drafts].entries()) {
    const unsealed = { seq, type: draft.type, time: draft.time, data: draft.data, prev };
    const record = { ...unsealed, hash: hashOf(unsealed) };
    records.push(record);
    prev = record.hash;
  }
  return records;
}

export type AuditVerdict = { ok: true; records: number } | { ok: false; seq: number; reason: string };

/** Checks a chain of records (parsed JSONL): every hash, every link, the order and the count. */
export function verifyAudit(records: readonly unknown[]): AuditVerdict {
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
  const declared = (records[0] as { data?: { records?: unknown } } | undefined)?.data?.records;
  if (declared !== records.length) {
    return {
      ok: false,
      seq: records.length,
      reason: `the header announces ${String(declared)} records, the file holds ${records.length}: records were removed from the end`,
    };
  }
  return { ok: true, records: records.length };
}

function hashOf(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}
