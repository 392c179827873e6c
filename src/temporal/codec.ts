// Encryption at rest for Temporal payloads: a `PayloadCodec` that seals every payload with
// AES-256-GCM before it leaves the process, so prompts, transcripts and outputs reach the Temporal
// server (and its database) only as ciphertext. Clients and workers must use the same keys.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { SubagentError } from '../seam/errors';
import { envFlag } from './env';

/** One named AES-256 key. */
export interface EncryptionKey {
  /** Written to each payload's `encryption-key-id` metadata; names the key that decrypts it. */
  id: string;
  /** 32 bytes. */
  key: Buffer;
}

const ENCRYPTED_ENCODING = 'binary/encrypted';
const METADATA_ENCODING = 'encoding';
const METADATA_KEY_ID = 'encryption-key-id';
const CIPHER = 'aes-256-gcm';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Key ids accepted from the environment: short, and unable to hold base64 key material by mistake. */
const ENV_KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const utf8 = (value: string): Uint8Array => Buffer.from(value, 'utf8');
const fromUtf8 = (bytes: Uint8Array | null | undefined): string | undefined =>
  bytes ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8') : undefined;

/**
 * Encrypts each payload with AES-256-GCM under the current key (fresh 12-byte IV per payload,
 * key id as additional authenticated data). The encoded payload has
 * `metadata.encoding = "binary/encrypted"`, `metadata["encryption-key-id"] = <key id>` and
 * `data = iv (12) || ciphertext || auth tag (16)`, where the plaintext is the protobuf encoding
 * of the original payload (the scheme of Temporal's encryption samples).
 */
export class AesGcmPayloadCodec implements PayloadCodec {
  private readonly keys: ReadonlyMap<string, Buffer>;
  private readonly currentKeyId: string;
  private readonly currentKey: Buffer;
  private readonly allowPlaintext: boolean;

  /**
   * `keys` in any order; `currentKeyId` encrypts; every key in `keys` decrypts (rotation: old
   * keys still decrypt). `allowPlaintext` accepts payloads that are not encrypted, for a
   * migration of history written before encryption only (it is logged). Throws
   * `SubagentError('INVALID_CONFIG')` for no keys, an empty or duplicate id, a key that is not 32
   * bytes, or a `currentKeyId` not among the keys.
   */
  constructor(options: { keys: EncryptionKey[]; currentKeyId: string; allowPlaintext?: boolean }) {
    const keys = new Map<string, Buffer>();
    for (const { id, key } of options.keys ?? []) {
      if (typeof id !== 'string' || id.length === 0) {
        throw new SubagentError('an encryption key id must be a non-empty string', 'INVALID_CONFIG');
      }
      if (keys.has(id)) throw new SubagentError(`two encryption keys have the id "${id}"`, 'INVALID_CONFIG');
      if (!Buffer.isBuffer(key) || key.length !== KEY_BYTES) {
        const size = Buffer.isBuffer(key) ? `${key.length} bytes` : 'not a Buffer';
        throw new SubagentError(
          `encryption key "${id}" is ${size}; AES-256 needs ${KEY_BYTES} bytes`,
          'INVALID_CONFIG',
        );
      }
      keys.set(id, Buffer.from(key));
    }
    if (keys.size === 0) {
      throw new SubagentError('the payload codec needs at least one encryption key', 'INVALID_CONFIG');
    }
    const current = keys.get(options.currentKeyId);
    if (!current) {
      throw new SubagentError(
        `the current encryption key id "${options.currentKeyId}" is not among the keys (known ids: ${[...keys.keys()].join(', ')})`,
        'INVALID_CONFIG',
      );
    }
    this.keys = keys;
    this.currentKeyId = options.currentKeyId;
    this.currentKey = current;
    this.allowPlaintext = options.allowPlaintext ?? false;
    if (this.allowPlaintext) {
      console.warn(
        'payload codec: payloads that are not encrypted are accepted (a migration setting); turn it off once no such history is retained',
      );
    }
  }

  /** Resolves with one encrypted payload per input payload, in order, under the current key. */
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  /**
   * Resolves with the decrypted payloads, in order. Rejects with `PAYLOAD_NOT_ENCRYPTED` for a
   * payload that is not encrypted (one injected by whoever can write to the server, or history
   * from before encryption: `allowPlaintext` lets those through), `INVALID_CONFIG` when a payload
   * names a key id this codec does not hold, and with an `Error` when a payload is malformed or
   * fails authentication (tampered with, or relabelled to another key).
   */
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  private encrypt(payload: Payload): Payload {
    const plaintext = temporal.api.common.v1.Payload.encode(payload).finish();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(CIPHER, this.currentKey, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(this.currentKeyId, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return {
      metadata: {
        [METADATA_ENCODING]: utf8(ENCRYPTED_ENCODING),
        [METADATA_KEY_ID]: utf8(this.currentKeyId),
      },
      data: Buffer.concat([iv, ciphertext, cipher.getAuthTag()]),
    };
  }

  private decrypt(payload: Payload): Payload {
    const encoding = fromUtf8(payload.metadata?.[METADATA_ENCODING]);
    if (encoding !== ENCRYPTED_ENCODING) {
      if (this.allowPlaintext) return payload;
      throw new SubagentError(
        `refused a payload that is not encrypted (encoding "${encoding ?? 'none'}") where encryption is on; ` +
          'SUBAGENT_ENCRYPTION_ALLOW_PLAINTEXT=true accepts them while history from before encryption is migrated',
        'PAYLOAD_NOT_ENCRYPTED',
      );
    }
    const keyId = fromUtf8(payload.metadata?.[METADATA_KEY_ID]);
    if (keyId === undefined) throw new Error(`an encrypted payload carries no "${METADATA_KEY_ID}" metadata`);
    const key = this.keys.get(keyId);
    if (!key) {
      throw new SubagentError(
        `no encryption key with id "${keyId}" to decrypt a payload (known ids: ${[...this.keys.keys()].join(', ')})`,
        'INVALID_CONFIG',
      );
    }
    const data = payload.data ?? new Uint8Array(0);
    if (data.byteLength < IV_BYTES + TAG_BYTES) {
      throw new Error(
        `an encrypted payload under key "${keyId}" is ${data.byteLength} bytes, too short to hold an IV and auth tag`,
      );
    }
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const iv = bytes.subarray(0, IV_BYTES);
    const ciphertext = bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    let plaintext: Buffer;
    try {
      const decipher = createDecipheriv(CIPHER, key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(keyId, 'utf8'));
      decipher.setAuthTag(tag);
      plaintext = Buffer.concat([decipher.update(ciphertext), decipher.final()]);
    } catch (err) {
      throw new Error(
        `an encrypted payload under key "${keyId}" failed authentication: it was altered or sealed with another key`,
        {
          cause: err,
        },
      );
    }
    return temporal.api.common.v1.Payload.decode(plaintext);
  }
}

/**
 * The codec the environment configures. Reads `SUBAGENT_ENCRYPTION_KEYS`
 * (`"id1:base64key,id2:base64key"`, each key 32 bytes after base64 decoding; ids of letters,
 * digits, `.`, `_`, `-`, at most 64 characters) and `SUBAGENT_ENCRYPTION_KEY_ID` (the key that
 * encrypts; default: the last key listed), and `SUBAGENT_ENCRYPTION_ALLOW_PLAINTEXT=true` (accept
 * payloads that are not encrypted, for a migration only). Returns undefined when
 * `SUBAGENT_ENCRYPTION_KEYS` is unset or empty. Throws `SubagentError('INVALID_CONFIG')` for a malformed entry, a key that is
 * not 32 bytes, a duplicate id, or a current id that is not among the keys; messages name entries
 * by position or id and never contain key material.
 */
export function codecFromEnv(env: NodeJS.ProcessEnv = process.env): AesGcmPayloadCodec | undefined {
  const raw = env.SUBAGENT_ENCRYPTION_KEYS?.trim();
  if (!raw) return undefined;
  const keys: EncryptionKey[] = [];
  raw.split(',').forEach((entry, index) => {
    const where = `entry ${index + 1} of SUBAGENT_ENCRYPTION_KEYS`;
    const colon = entry.indexOf(':');
    if (colon < 0) throw new SubagentError(`${where} is not of the form "id:base64key"`, 'INVALID_CONFIG');
    const id = entry.slice(0, colon).trim();
    const encoded = entry.slice(colon + 1).trim();
    if (!ENV_KEY_ID.test(id)) {
      throw new SubagentError(
        `${where} has an invalid key id (letters, digits, ".", "_", "-"; 1 to 64 characters)`,
        'INVALID_CONFIG',
      );
    }
    if (keys.some((key) => key.id === id)) {
      throw new SubagentError(`SUBAGENT_ENCRYPTION_KEYS lists the key id "${id}" twice`, 'INVALID_CONFIG');
    }
    if (!encoded || !BASE64.test(encoded)) {
      throw new SubagentError(`key "${id}" in SUBAGENT_ENCRYPTION_KEYS is not valid base64`, 'INVALID_CONFIG');
    }
    const key = Buffer.from(encoded, 'base64');
    if (key.length !== KEY_BYTES) {
      throw new SubagentError(
        `key "${id}" in SUBAGENT_ENCRYPTION_KEYS is ${key.length} bytes after base64 decoding; AES-256 needs ${KEY_BYTES}`,
        'INVALID_CONFIG',
      );
    }
    keys.push({ id, key });
  });
  const requested = env.SUBAGENT_ENCRYPTION_KEY_ID?.trim();
  const currentKeyId = requested || keys[keys.length - 1]!.id;
  if (!keys.some((key) => key.id === currentKeyId)) {
    const named = ENV_KEY_ID.test(currentKeyId) ? ` "${currentKeyId}"` : '';
    throw new SubagentError(
      `SUBAGENT_ENCRYPTION_KEY_ID${named} names no key in SUBAGENT_ENCRYPTION_KEYS (known ids: ${keys.map((key) => key.id).join(', ')})`,
      'INVALID_CONFIG',
    );
  }
  const allowPlaintext = envFlag(env, 'SUBAGENT_ENCRYPTION_ALLOW_PLAINTEXT');
  return new AesGcmPayloadCodec({ keys, currentKeyId, allowPlaintext });
}

/**
 * A fresh random 32-byte key as base64, for an operator to put in `SUBAGENT_ENCRYPTION_KEYS`.
 * `node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"` gives the same.
 */
export function generateEncryptionKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}
