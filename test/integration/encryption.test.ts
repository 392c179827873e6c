// Encryption nobody can downgrade, walked through as docs/operations.md tells an operator to:
// a key rotated under a parked run, a payload injected unencrypted (refused, then let through by
// the migration setting only), failure messages sealed like every payload.
import { randomBytes } from 'node:crypto';
import type { DataConverter, Payload } from '@temporalio/common';
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow';
import { AesGcmPayloadCodec, type EncryptionKey } from '../../src';
import { isTaskFailing } from '../../src/temporal/errors';
import { ENCRYPTED_FAILURE_CONVERTER_PATH } from '../../src/temporal/failure-converter';
import { EventType, type HistoryEvent } from '../../src/temporal/run-history';
import { createScriptedProvider } from '../../src/testing';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  text,
  uniqueName,
} from '../helpers/temporal';
import { wakeUpdate } from '../../workflows/definitions';

const keyA: EncryptionKey = { id: 'key-a', key: randomBytes(32) };
const keyB: EncryptionKey = { id: 'key-b', key: randomBytes(32) };
const scripted = createScriptedProvider({ name: uniqueName('sealed'), runSettings: { retry: { maximumAttempts: 1 } } });

const converter = (keys: EncryptionKey[], currentKeyId: string, allowPlaintext = false): DataConverter => ({
  payloadCodecs: [new AesGcmPayloadCodec({ keys, currentKeyId, allowPlaintext })],
  failureConverterPath: ENCRYPTED_FAILURE_CONVERTER_PATH,
});

/**
 * A client, a worker and a service that all use `dataConverter`; `stop()` ends the worker and the
 * connection. With `{ worker: false }` the worker starts only at `startWorker()`.
 */
async function deployment(dataConverter: DataConverter, { worker = true } = {}) {
  const temporal = await connectTestTemporal('default', { dataConverter });
  let stopWorker: (() => Promise<void>) | undefined;
  const service = newService(temporal);
  service.registerProvider(scripted);
  const deployed = {
    temporal,
    service,
    startWorker: async () => {
      stopWorker = await startWorker(temporal, [scripted], { dataConverter });
    },
    stop: async () => {
      await stopWorker?.();
      await temporal.close();
    },
  };
  if (worker) await deployed.startWorker();
  return deployed;
}

/** The run's raw history, read with no codec at all: what the server holds. */
async function rawHistory(raw: TestTemporal, runId: string, temporalRunId?: string): Promise<HistoryEvent[]> {
  const response = await raw.connection.workflowService.getWorkflowExecutionHistory({
    namespace: 'default',
    execution: { workflowId: runId, ...(temporalRunId ? { runId: temporalRunId } : {}) },
  });
  return response.history?.events ?? [];
}
const metadata = (payload: Payload | undefined, name: string) =>
  payload?.metadata?.[name] ? Buffer.from(payload.metadata[name]!).toString('utf8') : undefined;

/** Every string and every payload's bytes (as UTF-8) in `value`: what someone reading the store sees. */
function plaintextOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
  if (!value || typeof value !== 'object') return '';
  return Object.values(value).map(plaintextOf).join('\n');
}

let raw: TestTemporal;
beforeAll(async () => (raw = await connectTestTemporal()));
afterAll(() => raw?.close());

it('rotates a key under a parked run: the new key seals what comes next, the old one still opens what was', async () => {
  // Step 1: one key.
  const before = await deployment(converter([keyA], 'key-a'));
  const run = before.service.start(scripted.name, {
    prompt: text('sealed with a'),
    parent: { id: 'p' },
    agentOptions: { script: [{ reply: 'one' }, { reply: 'two: {input}' }] },
  });
  expect(await run.result).toEqual({ output: text('one'), stopReason: 'completed' });
  await before.stop();

  // Step 2: add the new key at the end and make it current; every process restarts with both.
  const after = await deployment(converter([keyA, keyB], 'key-b'));
  try {
    const parked = after.service.attach(run.id);
    await parked.result;
    const resumed = parked.resume!(text('sealed with b'));
    expect(await resumed.result).toEqual({ output: text('two: sealed with b'), stopReason: 'completed' });
    // Listed raw: the memo (the settle record) stays sealed, as the server holds it.
    const { executions } = await raw.connection.workflowService.listWorkflowExecutions({
      namespace: 'default',
      query: `WorkflowId = '${run.id}'`,
    });
    const runs = executions.map((execution) => execution.execution?.runId ?? '');
    expect(executions.map((execution) => metadata(execution.memo?.fields?.settled ?? undefined, 'encoding'))).toContain(
      'binary/encrypted',
    );
    const startKeys = await Promise.all(
      runs.map(async (temporalRunId) => {
        const [started] = await rawHistory(raw, run.id, temporalRunId);
        return metadata(started?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0], 'encryption-key-id');
      }),
    );
    expect(startKeys.sort()).toEqual(['key-a', 'key-b']);
    // The first segment, sealed with the old key, still reads.
    expect(await after.service.attach(run.id).result).toEqual({
      output: text('two: sealed with b'),
      stopReason: 'completed',
    });
    await resumed.dispose();
  } finally {
    await after.stop();
  }

  // Step 3: once nothing retained needs it, the old key goes; new runs work with the new one alone.
  const last = await deployment(converter([keyB], 'key-b'));
  try {
    const fresh = last.service.start(scripted.name, { prompt: text('b only'), parent: { id: 'p' } });
    expect((await fresh.result).stopReason).toBe('completed');
    await fresh.dispose();
  } finally {
    await last.stop();
  }
}, 120_000);

it('refuses a payload injected unencrypted, and takes it only with the migration setting', async () => {
  const sealed = await deployment(converter([keyA], 'key-a'));
  const run = sealed.service.start(scripted.name, {
    prompt: text('parked'),
    parent: { id: 'p' },
    agentOptions: { script: [{ reply: 'one' }, { reply: 'resumed: {input}' }] },
  });
  await run.result;
  // Someone who can write to the server, without the keys, signals a message in clear.
  await raw.client.workflow.getHandle(run.id).signal('sendMessage', { content: text('injected') });
  // The worker refuses to decode it: the workflow task fails, saying why, and nothing is delivered.
  const failure = await eventually(async () => {
    const events = await rawHistory(raw, run.id);
    return events.find((event) => event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED);
  });
  // The reason is sealed as every failure is; with the keys it reads.
  const reason = await decodeOptionalFailureToOptionalError(
    sealed.temporal.client.options.loadedDataConverter,
    failure.workflowTaskFailedEventAttributes?.failure,
  );
  expect(reason?.message).toContain('refused a payload that is not encrypted');

  // The migration setting lets it through: the run goes on, and takes the message at its resume.
  // The resume is sent while the old worker still fails the run's task, which makes the server
  // refuse updates; the client sends it again until the new worker is up and the run takes it.
  const migrating = await deployment(converter([keyA], 'key-a', true), { worker: false });
  try {
    const failing = await migrating.temporal.client.workflow
      .getHandle(run.id)
      .executeUpdate(wakeUpdate)
      .catch((err: unknown) => err);
    expect(isTaskFailing(failing)).toBe(true);
    const parked = migrating.service.attach(run.id);
    await parked.result;
    const resumed = parked.resume!(text('and this'));
    await sealed.stop();
    await migrating.startWorker();
    expect(await resumed.result).toEqual({ output: text('resumed: injected | and this'), stopReason: 'completed' });
    await resumed.dispose();
  } finally {
    await migrating.stop();
  }
}, 120_000);

it('seals failure messages: a failed turn’s message is not in history in clear, and callers still read it', async () => {
  const sealed = await deployment(converter([keyA], 'key-a'));
  try {
    const canary = `FAILURE-CANARY-${randomBytes(6).toString('hex')}`;
    const run = sealed.service.start(scripted.name, {
      prompt: text('fail'),
      parent: { id: 'p' },
      agentOptions: { script: [{ fail: canary }] },
    });
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain(canary);
    const events = await rawHistory(raw, run.id);
    const failed = events.find((event) => event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED);
    const failure = failed?.activityTaskFailedEventAttributes?.failure;
    expect(failure?.message).toBe('Encoded failure');
    expect(metadata(failure?.encodedAttributes ?? undefined, 'encoding')).toBe('binary/encrypted');
    expect(plaintextOf(events)).not.toContain(canary);
    await run.dispose();
  } finally {
    await sealed.stop();
  }
}, 60_000);
