// The audit chain on its own: sealed records verify, and each way of tampering with them (an
// edited, removed, reordered, appended or cut-off record, a recomputed hash) is caught at its seq.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../src';
import { type AuditDraft, type AuditRecord, sealAudit, verifyAudit } from '../../src/audit';

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
const sealed = () => JSON.parse(JSON.stringify(sealAudit('subagent-scripted:run', drafts))) as AuditRecord[];

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
    expect(verifyAudit(records)).toEqual({ ok: true, records: 5 });
  });

  it('does not depend on the key order a record was written in', () => {
    const records = sealed().map(({ hash, data, ...rest }) => ({ data, hash, ...rest }));
    expect(verifyAudit(records)).toEqual({ ok: true, records: 5 });
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
