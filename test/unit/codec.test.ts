// The AES-256-GCM payload codec: round trips, random IVs, key ids, rotation, tampering and
// pass-through, and `codecFromEnv` parsing. The end-to-end run against a real server is in
// test/integration/codec-at-rest.test.ts.
import { randomBytes } from 'node:crypto';
import { type Payload, defaultPayloadConverter } from '@temporalio/common';
import { AesGcmPayloadCodec, codecFromEnv, EncryptionKey, generateEncryptionKey, SubagentError } from '../../src';

const keyA: EncryptionKey = { id: 'key-a', key: randomBytes(32) };
const keyB: EncryptionKey = { id: 'key-b', key: randomBytes(32) };
const codecA = () => new AesGcmPayloadCodec({ keys: [keyA], currentKeyId: 'key-a' });

const toPayload = (value: unknown): Payload => defaultPayloadConverter.toPayload(value);
const fromPayload = (payload: Payload): unknown => defaultPayloadConverter.fromPayload(payload);
const metadataText = (payload: Payload, name: string) => Buffer.from(payload.metadata![name]!).toString('utf8');

describe('AesGcmPayloadCodec', () => {
  it('round-trips JSON payloads, in order', async () => {
    const codec = codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: `k1:${generateEncryptionKey()}` })!;
    const values = [{ prompt: 'hello', n: 1, nested: [true, null] }, 'plain string', 42, null];
    const encoded = await codec.encode(values.map(toPayload));
    expect(encoded).toHaveLength(values.length);
    const decoded = await codec.decode(encoded);
    expect(decoded.map(fromPayload)).toEqual(values);
    expect(decoded.map((payload) => metadataText(payload, 'encoding'))).toEqual(
      values.map((v) => metadataText(toPayload(v), 'encoding')),
    );
  });

  it('produces different ciphertext for the same input (random IV) and hides the plaintext', async () => {
    const codec = codecA();
    const payload = toPayload({ secret: 'PLAINTEXT-MARKER' });
    const [first, second] = await codec.encode([payload, payload]);
    expect(Buffer.from(first!.data!).equals(Buffer.from(second!.data!))).toBe(false);
    expect(Buffer.from(first!.data!.subarray(0, 12)).equals(Buffer.from(second!.data!.subarray(0, 12)))).toBe(false);
    expect(Buffer.from(first!.data!).includes('PLAINTEXT-MARKER')).toBe(false);
    // iv (12) || ciphertext || tag (16); the plaintext is the protobuf encoding of the payload.
    expect(first!.data!.byteLength).toBeGreaterThan(12 + 16);
  });

  it('labels each payload binary/encrypted with the key id, and nothing else', async () => {
    const [encoded] = await codecA().encode([toPayload('x')]);
    expect(Object.keys(encoded!.metadata!).sort()).toEqual(['encoding', 'encryption-key-id']);
    expect(metadataText(encoded!, 'encoding')).toBe('binary/encrypted');
    expect(metadataText(encoded!, 'encryption-key-id')).toBe('key-a');
  });

  it('rotates: a codec holding [A, B] with B current decodes old A payloads and encodes with B', async () => {
    const [old] = await codecA().encode([toPayload({ v: 'old' })]);
    const rotated = new AesGcmPayloadCodec({ keys: [keyB, keyA], currentKeyId: 'key-b' });
    expect((await rotated.decode([old!])).map(fromPayload)).toEqual([{ v: 'old' }]);
    const [fresh] = await rotated.encode([toPayload({ v: 'new' })]);
    expect(metadataText(fresh!, 'encryption-key-id')).toBe('key-b');
    expect((await rotated.decode([fresh!])).map(fromPayload)).toEqual([{ v: 'new' }]);
    // The retired codec cannot read what the new key sealed.
    await expect(codecA().decode([fresh!])).rejects.toThrow(/key-b/);
  });

  it('refuses an unknown key id, naming it and the known ids but no key material', async () => {
    const onlyB = new AesGcmPayloadCodec({ keys: [keyB], currentKeyId: 'key-b' });
    const [encoded] = await codecA().encode([toPayload('x')]);
    const err = await onlyB.decode([encoded!]).then(
      () => undefined,
      (e: unknown) => e as SubagentError,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.code).toBe('INVALID_CONFIG');
    expect(err!.message).toContain('"key-a"');
    expect(err!.message).toContain('known ids: key-b');
    expect(err!.message).not.toContain(keyA.key.toString('base64'));
    expect(err!.message).not.toContain(keyB.key.toString('base64'));
  });

  it('rejects a tampered payload: a flipped byte anywhere, or a payload relabelled to another key', async () => {
    const codec = codecA();
    const [encoded] = await codec.encode([toPayload({ v: 1 })]);
    const length = encoded!.data!.byteLength;
    for (const index of [0, 12, Math.floor(length / 2), length - 1]) {
      const data = Uint8Array.from(encoded!.data!);
      data[index]! ^= 0x01;
      await expect(codec.decode([{ ...encoded!, data }])).rejects.toThrow(/failed authentication/);
    }
    await expect(codec.decode([{ ...encoded!, data: encoded!.data!.subarray(0, 20) }])).rejects.toThrow(/too short/);

    // The key id is authenticated data: sealed under A, relabelled as B (with B holding A's bytes), it fails.
    const sameBytes = new AesGcmPayloadCodec({ keys: [keyA, { id: 'key-b', key: keyA.key }], currentKeyId: 'key-a' });
    const relabelled = { ...encoded!, metadata: { ...encoded!.metadata, 'encryption-key-id': Buffer.from('key-b') } };
    await expect(sameBytes.decode([relabelled])).rejects.toThrow(/failed authentication/);
    expect((await sameBytes.decode([encoded!])).map(fromPayload)).toEqual([{ v: 1 }]);
  });

  it('refuses payloads that are not binary/encrypted with PAYLOAD_NOT_ENCRYPTED (a downgrade)', async () => {
    for (const payload of [toPayload({ injected: 'in clear' }), {}]) {
      await expect(codecA().decode([payload])).rejects.toMatchObject({ code: 'PAYLOAD_NOT_ENCRYPTED' });
    }
  });

  it('passes them through unchanged only with allowPlaintext, the migration setting', async () => {
    const plain = toPayload({ written: 'before encryption was enabled' });
    const empty: Payload = {};
    const migrating = new AesGcmPayloadCodec({ keys: [keyA], currentKeyId: 'key-a', allowPlaintext: true });
    const decoded = await migrating.decode([plain, empty]);
    expect(decoded[0]).toBe(plain);
    expect(decoded[1]).toBe(empty);
    expect(fromPayload(decoded[0]!)).toEqual({ written: 'before encryption was enabled' });
  });

  it('round-trips payloads with empty data and extra metadata', async () => {
    const codec = codecA();
    const payload: Payload = {
      metadata: { encoding: Buffer.from('binary/plain'), custom: Buffer.from('meta') },
      data: new Uint8Array(0),
    };
    const [decoded] = await codec.decode(await codec.encode([payload]));
    expect(metadataText(decoded!, 'encoding')).toBe('binary/plain');
    expect(metadataText(decoded!, 'custom')).toBe('meta');
    expect(decoded!.data?.byteLength ?? 0).toBe(0);
  });

  it('refuses bad constructor options with INVALID_CONFIG', () => {
    const invalid = expect.objectContaining({ code: 'INVALID_CONFIG' });
    expect(() => new AesGcmPayloadCodec({ keys: [], currentKeyId: 'x' })).toThrow(invalid);
    expect(() => new AesGcmPayloadCodec({ keys: [keyA], currentKeyId: 'key-b' })).toThrow(invalid);
    expect(() => new AesGcmPayloadCodec({ keys: [keyA, keyA], currentKeyId: 'key-a' })).toThrow(invalid);
    expect(
      () => new AesGcmPayloadCodec({ keys: [{ id: 'short', key: randomBytes(16) }], currentKeyId: 'short' }),
    ).toThrow(invalid);
  });
});

describe('codecFromEnv', () => {
  const k1 = generateEncryptionKey();
  const k2 = generateEncryptionKey();

  it('generates 32-byte base64 keys', () => {
    expect(Buffer.from(k1, 'base64')).toHaveLength(32);
    expect(k1).not.toBe(k2);
  });

  it('returns undefined when SUBAGENT_ENCRYPTION_KEYS is unset or empty', () => {
    expect(codecFromEnv({})).toBeUndefined();
    expect(codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: '' })).toBeUndefined();
    expect(codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: '   ' })).toBeUndefined();
    expect(codecFromEnv({ SUBAGENT_ENCRYPTION_KEY_ID: 'k1' })).toBeUndefined();
  });

  it('encrypts with the last key listed by default, and decrypts with every key', async () => {
    const codec = codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: `k1:${k1}, k2:${k2}` })!;
    const [encoded] = await codec.encode([toPayload('x')]);
    expect(metadataText(encoded!, 'encryption-key-id')).toBe('k2');
    const onlyK1 = codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: `k1:${k1}` })!;
    const [old] = await onlyK1.encode([toPayload('old')]);
    expect((await codec.decode([old!])).map(fromPayload)).toEqual(['old']);
  });

  it('encrypts with SUBAGENT_ENCRYPTION_KEY_ID when set', async () => {
    const codec = codecFromEnv({ SUBAGENT_ENCRYPTION_KEYS: `k1:${k1},k2:${k2}`, SUBAGENT_ENCRYPTION_KEY_ID: 'k1' })!;
    const [encoded] = await codec.encode([toPayload('x')]);
    expect(metadataText(encoded!, 'encryption-key-id')).toBe('k1');
  });

  const short = randomBytes(16).toString('base64');
  const cases: [string, NodeJS.ProcessEnv, RegExp][] = [
    ['an entry without a colon', { SUBAGENT_ENCRYPTION_KEYS: k1 }, /entry 1 .*"id:base64key"/],
    ['an empty entry (trailing comma)', { SUBAGENT_ENCRYPTION_KEYS: `k1:${k1},` }, /entry 2/],
    ['an empty id', { SUBAGENT_ENCRYPTION_KEYS: `:${k1}` }, /invalid key id/],
    ['an id that looks like a key (reversed entry)', { SUBAGENT_ENCRYPTION_KEYS: `${k1}:k1` }, /invalid key id/],
    ['an empty key', { SUBAGENT_ENCRYPTION_KEYS: 'k1:' }, /"k1" .*not valid base64/],
    ['a key that is not base64', { SUBAGENT_ENCRYPTION_KEYS: `k1:${k1.slice(0, -2)}!!` }, /"k1" .*not valid base64/],
    ['a 16-byte key', { SUBAGENT_ENCRYPTION_KEYS: `k1:${short}` }, /"k1" .*16 bytes/],
    ['a duplicate id', { SUBAGENT_ENCRYPTION_KEYS: `k1:${k1},k1:${k2}` }, /"k1" twice/],
    [
      'a current id not among the keys',
      { SUBAGENT_ENCRYPTION_KEYS: `k1:${k1}`, SUBAGENT_ENCRYPTION_KEY_ID: 'k9' },
      /"k9" names no key .*known ids: k1/,
    ],
    [
      'a key pasted as the current id',
      { SUBAGENT_ENCRYPTION_KEYS: `k1:${k1}`, SUBAGENT_ENCRYPTION_KEY_ID: k2 },
      /names no key/,
    ],
  ];
  it.each(cases)('throws INVALID_CONFIG for %s, without echoing key material', (_name, env, message) => {
    let caught: unknown;
    try {
      codecFromEnv(env);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SubagentError);
    const err = caught as SubagentError;
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toMatch(message);
    for (const secret of [k1, k2, short, k1.slice(0, -2)]) expect(err.message).not.toContain(secret);
  });
});
