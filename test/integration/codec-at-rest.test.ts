// Encryption at rest, end to end: one run against a real Temporal server whose SQLite file is
// then scanned for the prompt and reply text, with an unencrypted control run beside it.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Payload } from '@temporalio/common';
import { AesGcmPayloadCodec, type EncryptionKey, TemporalSubagentService, textOf } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { startTestServer, startWorker } from '../helpers/temporal';

const keyA: EncryptionKey = { id: 'key-a', key: randomBytes(32) };
const metadataText = (payload: Payload, name: string) => Buffer.from(payload.metadata![name]!).toString('utf8');

describe('end to end: no prompt text reaches the server database file', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'subagent-codec-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** One run on a fresh server with its own SQLite file; resolves with the file's bytes once the server stopped. */
  async function runAndReadDatabase(name: string, prompt: string, codec: AesGcmPayloadCodec | undefined) {
    const dbFilename = join(dir, `${name}.db`);
    const dataConverter = codec ? { payloadCodecs: [codec] } : undefined;
    const temporal = await startTestServer({ dbFilename, ...(dataConverter ? { dataConverter } : {}) });
    let reply: string | undefined;
    let storedEncoding: string | undefined;
    try {
      const provider = createScriptedProvider({ name: `codec-${name}-${randomBytes(4).toString('hex')}` });
      const stopWorker = await startWorker(temporal, [provider], dataConverter ? { dataConverter } : {});
      try {
        const service = new TemporalSubagentService({ client: temporal.client });
        service.registerProvider(provider);
        const run = service.start(provider.name, { prompt: [{ type: 'text', text: prompt }], parent: { id: 'p' } });
        try {
          const result = await run.result;
          expect(result.stopReason).toBe('completed');
          reply = textOf(result.output);
        } finally {
          await run.dispose();
        }
        // What the server holds for the workflow input, read without any codec.
        const history = await temporal.connection.workflowService.getWorkflowExecutionHistory({
          namespace: 'default',
          execution: { workflowId: run.id },
        });
        const input = history.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
        storedEncoding = input ? metadataText(input, 'encoding') : undefined;
      } finally {
        await stopWorker();
      }
    } finally {
      await temporal.close();
    }
    const files = [dbFilename, `${dbFilename}-wal`].filter((file) => existsSync(file));
    return { reply: reply!, storedEncoding, bytes: Buffer.concat(files.map((file) => readFileSync(file))) };
  }

  it('stores only ciphertext with the codec; the same run without it stores the prompt in clear', async () => {
    const canary = `PROMPT-CANARY-${randomBytes(8).toString('hex')}`;
    const codec = new AesGcmPayloadCodec({ keys: [keyA], currentKeyId: 'key-a' });
    const [encrypted, control] = await Promise.all([
      runAndReadDatabase('encrypted', canary, codec),
      runAndReadDatabase('control', canary, undefined),
    ]);

    expect(encrypted.reply).toBe(`scripted reply to: ${canary}`);
    expect(encrypted.storedEncoding).toBe('binary/encrypted');
    expect(encrypted.bytes.length).toBeGreaterThan(0);
    expect(encrypted.bytes.includes(canary)).toBe(false);
    expect(encrypted.bytes.includes('scripted reply to:')).toBe(false);

    // The control proves the scan can fail: without the codec the prompt and reply are in the file.
    expect(control.reply).toBe(`scripted reply to: ${canary}`);
    expect(control.storedEncoding).toBe('json/plain');
    expect(control.bytes.includes(canary)).toBe(true);
    expect(control.bytes.includes('scripted reply to:')).toBe(true);
  }, 120_000);
});
