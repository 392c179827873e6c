// The audit chain on its own: sealed records verify, and each way of tampering with them (an
// edited, removed, reordered, appended or cut-off record, a recomputed hash) is caught at its seq.
// The hashes alone cannot stop a forger who re-hashes the whole chain; its signatures can.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../src';
import {
  type AuditDraft,
  type AuditRecord,
  ed25519AuditSigner,
  generateAuditKeyPair,
  sealAudit,
  verifyAudit,
} from '../../src/audit';

const drafts: AuditDraft[] = [
  {
    type: 'start',
    time: '2026-12-01T00:00:00.000Z',
    data: { provider: 'scripted', request: { prompt: 'audited task' } },
  },
  { type: 'message', time: '2026-12-01T00:00:01.000Z', data: { content: 'steer' } },
  { type: 'turn', time: '2026-12-01T00:00:02.000Z', data: { turn: 0, stopReason: 'completed' } },
  { type: 'close', time: '2026-12-01T00:00:03.000Z', data: { closedBy: 'settled' } },
];
/** The record edited and its own hash recomputed, as a forger who knows the scheme would. */
const reseal = ({ hash: _, ...record }: AuditRecord, data: unknown): AuditRecord => {
  const unsealed = { ...record, data };
  return { ...unsealed, hash: createHash('sha256').update(canonicalJson(unsealed)).digest('hex') };
};
const RUN = 'subagent-scripted:run';
let unsigned: AuditRecord[];
beforeAll(async () => (unsigned = await sealAudit(RUN, drafts)));
const sealed = () => JSON.parse(JSON.stringify(unsigned)) as AuditRecord[];

describe('the audit chain', () => {
  it('seals drafts behind a header that counts them, each record linked to the one before', () => {
    const records = sealed();
    expect(records.map((record) => record.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(records[0]).toMatchObject({
      type: 'audit.header',
      prev: '0'.repeat(64),
      data: { runId: 'subagent-scripted:run', records: 5 },
    });
    for (let seq = 1; seq < records.length; seq++) expect(records[seq]!.prev).toBe(records[seq - 1]!.hash);
    expect(verifyAudit(records)).toEqual({ ok: true, records: 5, signed: false });
  });

  it('does not depend on the key order a record was written in', () => {
    const records = sealed().map(({ hash, data, ...rest }) => ({ data, hash, ...rest }));
    expect(verifyAudit(records)).toEqual({ ok: true, records: 5, signed: false });
  });

  it.each<[string, (records: AuditRecord[]) => unknown[], number]>([
    [
      'an edited record',
      (r) => r.map((x, i) => (i === 1 ? { ...x, data: { provider: 'scripted', request: { prompt: 'innocent' } } } : x)),
      1,
    ],
    [
      'an edited record whose own hash was recomputed',
      (r) => r.map((x, i) => (i === 2 ? reseal(x, { content: 'other' }) : x)),
      3,
    ],
    ['a removed record', (r) => r.filter((_, i) => i !== 2), 2],
    ['two records swapped', (r) => [r[0], r[1], r[3], r[2], r[4]], 2],
    ['the last record cut off', (r) => r.slice(0, -1), 4],
    ['something that is not a record', (r) => [...r.slice(0, 3), 'text', ...r.slice(3)], 3],
  ])('detects %s, at the seq where the chain breaks', (_case, tamper, seq) => {
    const verdict = verifyAudit(tamper(sealed()));
    expect(verdict).toMatchObject({ ok: false, seq });
  });
});

/**
 * A forger who knows the scheme but not the key: drops record `removed` (none for -1), then
 * renumbers, re-links, re-hashes and recounts the whole chain.
 */
function forge(records: AuditRecord[], removed: number): AuditRecord[] {
  const kept = records.filter((record) => record.seq !== removed);
  const forged: AuditRecord[] = [];
  for (const [seq, { hash: _, prev: __, seq: ___, ...rest }] of kept.entries()) {
    const data = seq === 0 ? { ...(rest.data as object), records: kept.length } : rest.data;
    const unsealed = { seq, type: rest.type, time: rest.time, data, prev: forged.at(-1)?.hash ?? '0'.repeat(64) };
    forged.push({ ...unsealed, hash: createHash('sha256').update(canonicalJson(unsealed)).digest('hex') });
  }
  return forged;
}

describe('the signed audit chain', () => {
  const keys = generateAuditKeyPair();
  const signer = ed25519AuditSigner(keys.privateKey, 'audit-2026');
  let signed: AuditRecord[];
  beforeAll(async () => (signed = await sealAudit(RUN, drafts, signer)));
  const copy = () => JSON.parse(JSON.stringify(signed)) as AuditRecord[];

  it('ends with a final signature over the record before it, and verifies with the public key alone', () => {
    const records = copy();
    expect(records.at(-1)).toMatchObject({
      type: 'audit.signature',
      data: { keyId: 'audit-2026', algorithm: 'ed25519', final: true, covers: { seq: 4, hash: records[4]!.hash } },
    });
    expect(verifyAudit(records, { publicKey: keys.publicKey })).toEqual({ ok: true, records: 6, signed: true });
  });

  it('fails a forged chain that was re-hashed consistently: the hashes hold, the signature does not', () => {
    const forged = forge(copy(), 2);
    expect(verifyAudit(forged)).toMatchObject({ ok: true });
    expect(verifyAudit(forged, { publicKey: keys.publicKey })).toMatchObject({
      ok: false,
      reason: 'the signature does not cover the record before it',
    });
  });

  it('fails a forged chain whose final signature was pointed at the forged head', () => {
    const forged = forge(copy(), 2);
    const head = forged.at(-2)!;
    const last = forged.at(-1)!;
    const covers = { seq: head.seq, hash: head.hash };
    const repointed = forge([...forged.slice(0, -1), { ...last, data: { ...(last.data as object), covers } }], -1);
    expect(verifyAudit(repointed)).toMatchObject({ ok: true });
    expect(verifyAudit(repointed, { publicKey: keys.publicKey })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('does not verify with the public key given'),
    });
  });

  it.each<[string, (records: AuditRecord[]) => unknown[]]>([
    ['an unsigned chain', () => sealed()],
    ['a chain cut before its final signature (and recounted)', (r) => forge(r.slice(0, -1), -1)],
  ])('fails %s when a public key is given', (_case, tamper) => {
    expect(verifyAudit(tamper(copy()), { publicKey: keys.publicKey })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('does not end with the final signature'),
    });
  });

  it('fails with another key', () => {
    expect(verifyAudit(copy(), { publicKey: generateAuditKeyPair().publicKey })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('does not verify'),
    });
  });

  it('signs a checkpoint every 100 records, each verifiable, and counts them in the header', async () => {
    const many = Array.from({ length: 250 }, (_, i) => ({ type: 'message', time: `t${i}`, data: { i } }));
    const records = await sealAudit(RUN, many, signer);
    const signatures = records.filter((record) => record.type === 'audit.signature');
    expect(signatures.map((record) => (record.data as { final: boolean }).final)).toEqual([false, false, true]);
    expect(records[0]!.data).toMatchObject({ records: records.length });
    expect(verifyAudit(records, { publicKey: keys.publicKey })).toMatchObject({ ok: true, signed: true });
  });
});
