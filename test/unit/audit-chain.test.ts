// The audit chain on its own: sealed records verify, and each way of tampering with them (an
// edited, removed, reordered, appended or cut-off record, a recomputed hash) is caught at its seq.
// The hashes alone cannot stop a forger who re-hashes the whole chain; its signatures can. Sealed
// and checked a record at a time, the chain and its verdicts are the same.
import { createHash, createPrivateKey } from 'node:crypto';
import fc from 'fast-check';
import { canonicalJson } from '../../src';
import {
  type AuditDraft,
  type AuditRecord,
  type AuditSigner,
  auditSignerFromEnv,
  ed25519AuditSigner,
  generateAuditKeyPair,
  sealAudit,
  sealAuditRecords,
  verifyAudit,
  verifyAuditRecords,
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

  it.each<[string, (records: AuditRecord[]) => number, string]>([
    ['checkpoint signature', () => 101, 'the signature does not cover the record before it'],
    [
      'final signature',
      (r) => r.length - 1,
      'the file does not end with the final signature: it is unsigned, or was cut or rewritten',
    ],
  ])('fails a chain whose %s holds null where its data should be (it threw a TypeError)', async (_case, at, reason) => {
    const many = Array.from({ length: 150 }, (_, i) => ({ type: 'message', time: `t${i}`, data: { i } }));
    const records = await sealAudit(RUN, many, signer);
    const seq = at(records);
    expect(records[seq]!.type).toBe('audit.signature');
    const forged = forge(
      records.map((record) => (record.seq === seq ? { ...record, data: null } : record)),
      -1,
    );
    expect(verifyAudit(forged)).toMatchObject({ ok: true });
    expect(verifyAudit(forged, { publicKey: keys.publicKey })).toEqual({ ok: false, seq, reason });
  });

  it('takes a signer that answers with a Uint8Array, as a KMS client does (its numbers were written as the signature: it never verified)', async () => {
    const kms: AuditSigner = {
      keyId: 'kms',
      sign: async (message) => new Uint8Array(await signer.sign(message)),
    };
    const records = await sealAudit(RUN, drafts, kms);
    expect(verifyAudit(records, { publicKey: keys.publicKey })).toEqual({ ok: true, records: 6, signed: true });
  });

  it.each<[string, () => unknown]>([
    ['a base64 string', () => Buffer.alloc(64).toString('base64')],
    ['32 bytes', () => Buffer.alloc(32)],
    ['nothing', () => undefined],
  ])(
    'refuses a signer that answers with %s with INVALID_CONFIG (it wrote a signature no key verifies, or threw a TypeError)',
    async (_case, answer) => {
      const broken = { keyId: 'broken', sign: async () => answer() } as unknown as AuditSigner;
      await expect(sealAudit(RUN, drafts, broken)).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    },
  );

  it('signs a checkpoint every 100 records, each verifiable, and counts them in the header', async () => {
    const many = Array.from({ length: 250 }, (_, i) => ({ type: 'message', time: `t${i}`, data: { i } }));
    const records = await sealAudit(RUN, many, signer);
    const signatures = records.filter((record) => record.type === 'audit.signature');
    expect(signatures.map((record) => (record.data as { final: boolean }).final)).toEqual([false, false, true]);
    expect(records[0]!.data).toMatchObject({ records: records.length });
    expect(verifyAudit(records, { publicKey: keys.publicKey })).toMatchObject({ ok: true, signed: true });
  });
});

describe('the audit chain a record at a time', () => {
  /** Drafts made as they are asked for, with how many have been made so far. */
  const drafting = (length: number) => {
    const made = { count: 0 };
    const drafts = (async function* () {
      for (let i = 0; i < length; i++) {
        made.count++;
        yield { type: 'message', time: `t${i}`, data: { i, text: 'é'.repeat(i % 7) } };
      }
    })();
    return { made, drafts };
  };
  /** An Ed25519 key made from a fixed seed: its signatures are the same from one run to the next. */
  const fixedSigner = () => {
    const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.alloc(32, 7)]);
    const pem = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' });
    return ed25519AuditSigner(pem.toString(), 'golden');
  };
  afterEach(() => jest.useRealTimers());

  // The SHA-256 of the JSONL that sealAudit wrote for these 250 drafts before records were sealed
  // one at a time (at commit 29356ad): the file format, byte for byte.
  it.each([
    ['unsigned', false, 251, '877e09b4cd86a5fbf39794f6048ae199df37cdd27edca8a2ffe3e2e88acd3982'],
    ['signed', true, 254, 'a29123ce609fb3b473745a4fe9d6d0775230b8c53b0c799da34de89c47edaf57'],
  ])(
    'seals drafts as they come into the same bytes sealAudit wrote before (%s)',
    async (_case, signed, length, sha) => {
      jest.useFakeTimers({ now: new Date('2026-12-01T12:00:00.000Z') });
      const { drafts } = drafting(250);
      const hash = createHash('sha256');
      let records = 0;
      for await (const record of sealAuditRecords(
        'subagent-x:golden',
        250,
        drafts,
        signed ? fixedSigner() : undefined,
      )) {
        hash.update(JSON.stringify(record) + '\n');
        records++;
      }
      expect([records, hash.digest('hex')]).toEqual([length, sha]);
    },
  );

  it('takes each draft only once the record before it has been taken, and none past the count', async () => {
    const { made, drafts } = drafting(300);
    const seen: [number, number][] = [];
    const signer = ed25519AuditSigner(generateAuditKeyPair().privateKey, 'k');
    for await (const record of sealAuditRecords(RUN, 250, drafts, signer)) seen.push([record.seq, made.count]);
    // Record n (past the header) is at most draft n: the drafts are not read ahead and held.
    expect(seen.every(([seq, count]) => count <= Math.max(seq, 0))).toBe(true);
    expect(made.count).toBe(250);
    expect(seen).toHaveLength(254);
  });

  it('rejects with UNKNOWN_RUN when the drafts end before the count', async () => {
    const { drafts } = drafting(3);
    const records: AuditRecord[] = [];
    await expect(
      (async () => {
        for await (const record of sealAuditRecords(RUN, 5, drafts)) records.push(record);
      })(),
    ).rejects.toMatchObject({ code: 'UNKNOWN_RUN' });
    expect(records).toHaveLength(4);
  });

  it('gives the verdict verifyAudit gives, for each way of tampering, with and without a key', async () => {
    const keys = generateAuditKeyPair();
    const signer = ed25519AuditSigner(keys.privateKey, 'k');
    const signed = await sealAudit(RUN, drafts, signer);
    const many = Array.from({ length: 150 }, (_, i) => ({ type: 'message', time: `t${i}`, data: { i } }));
    const checkpointed = await sealAudit(RUN, many, signer);
    const atCheckpoint = (data: object) =>
      forge(
        checkpointed.map((r) => (r.seq === 101 ? { ...r, data: { ...(r.data as object), ...data } } : r)),
        -1,
      );
    const cases: unknown[][] = [
      checkpointed,
      atCheckpoint({ final: true }),
      atCheckpoint({ signature: 'AAAA' }),
      atCheckpoint({ covers: null }),
      sealed(),
      sealed().filter((_, i) => i !== 2),
      [...sealed().slice(0, 3), 'text'],
      sealed().slice(0, -1),
      [],
      signed,
      signed.slice(0, -1),
      forge(signed, 2),
      forge(signed, -1).map((r, i) => (i === 5 ? { ...r, data: { ...(r.data as object), final: false } } : r)),
    ];
    for (const records of cases) {
      for (const options of [{}, { publicKey: keys.publicKey }, { publicKey: 'not a key' }]) {
        const streamed = await verifyAuditRecords(
          (async function* () {
            yield* records;
          })(),
          options,
        );
        expect(streamed).toEqual(verifyAudit(records, options));
      }
    }
    // The verdicts a checkpoint's signature gets, as a whole chain had them.
    const withKey = { publicKey: keys.publicKey };
    expect(verifyAudit(atCheckpoint({ final: true }), withKey)).toEqual({
      ok: false,
      seq: 101,
      reason: 'a final signature that is not the last record',
    });
    expect(verifyAudit(atCheckpoint({ signature: 'AAAA' }), withKey)).toEqual({
      ok: false,
      seq: 101,
      reason: 'the signature does not verify with the public key given (key "k")',
    });
    expect(verifyAudit(atCheckpoint({ covers: null }), withKey)).toEqual({
      ok: false,
      seq: 101,
      reason: 'the signature does not cover the record before it',
    });
  });
});

describe('the signer the environment configures', () => {
  it.each([
    ['a key file that does not exist (it was a bare ENOENT)', 'file:/nonexistent/audit.key'],
    ['a key file that is a directory (it was a bare EISDIR)', 'file:/'],
    ['a key that is not PEM', 'not a key'],
  ])('refuses %s with INVALID_CONFIG', (_case, key) => {
    expect(() => auditSignerFromEnv({ SUBAGENT_AUDIT_SIGNING_KEY: key })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });
});

describe('canonical JSON, the text the chain hashes', () => {
  /** How it was written before: recursively, one call a level. */
  const recursive = (value: unknown): string => {
    if (Array.isArray(value)) return `[${value.map(recursive).join(',')}]`;
    if (typeof value === 'object' && value !== null) {
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto === null || Object.getPrototypeOf(proto) === null) {
        const record = value as Record<string, unknown>;
        const keys = Object.keys(record)
          .filter((key) => record[key] !== undefined)
          .sort();
        return `{${keys.map((key) => `${JSON.stringify(key)}:${recursive(record[key])}`).join(',')}}`;
      }
    }
    return JSON.stringify(value);
  };

  it('is the text it was for any value, holes, undefined and functions among it', () => {
    const values = fc.oneof(
      fc.anything({ withNullPrototype: true, withSparseArray: true, withDate: true }),
      fc.array(
        fc.oneof(
          fc.constant(undefined),
          fc.constant(() => 1),
          fc.integer(),
        ),
      ),
      fc.dictionary(
        fc.string(),
        fc.oneof(
          fc.constant(undefined),
          fc.constant(() => 1),
          fc.string(),
        ),
      ),
    );
    // Also 600 levels down, past the depth where the writer stops recursing.
    const buried = (value: unknown) => {
      let nested = value;
      for (let i = 0; i < 600; i++) nested = i % 2 ? [nested, i] : { z: i, a: nested };
      return nested;
    };
    fc.assert(
      fc.property(
        values,
        (value) =>
          canonicalJson(value) === recursive(value) && canonicalJson(buried(value)) === recursive(buried(value)),
      ),
    );
  });

  it('seals and verifies a record nested 20,000 objects deep, past any recursive writer (a RangeError)', async () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 20_000; i++) deep = { level: deep };
    expect(() => recursive(deep)).toThrow(RangeError);
    const records = await sealAudit(RUN, [{ type: 'text.delta', time: 't', data: { text: deep } }]);
    expect(verifyAudit(records)).toEqual({ ok: true, records: 2, signed: false });
    expect(canonicalJson(deep)).toBe('{"level":'.repeat(20_000) + '"bottom"' + '}'.repeat(20_000));
  });
});
