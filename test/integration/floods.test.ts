// Floods from a caller: steering messages past the server's limit on the signals one Temporal run
// takes, and queued behind one another while the server is away; nested runs past its limit on the
// cancels one run has out. Each runs on a dev server of its own: one with a limit of 20 signals,
// one that the test stops, one with a limit of a batch of cancels.
import { randomUUID } from 'node:crypto';
import { type SubagentMessageUndeliveredInfo, runStarted } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { type SubagentRunOutcome, childStartedSignal, statusQuery } from '../../workflows/definitions';
import { NESTED_CANCEL_BATCH } from '../../workflows/patches';
import { eventually, newService, startTestServer, startWorker, text, turnGates, uniqueName } from '../helpers/temporal';

const SIGNALS_PER_RUN = 20;
const scripted = createScriptedProvider({ name: uniqueName('floods') });

it("reports the messages past the server's limit on signals to one Temporal run undelivered, RESOURCE_EXHAUSTED (they were UNAVAILABLE, as if the server were away), and the turn after takes the rest", async () => {
  const temporal = await startTestServer({
    dynamicConfig: { 'history.maximumSignalsPerExecution': SIGNALS_PER_RUN },
  });
  const stopWorker = await startWorker(temporal, [scripted]);
  try {
    const service = newService(temporal);
    service.registerProvider(scripted);
    const undelivered: SubagentMessageUndeliveredInfo[] = [];
    service.on('subagent/message-undelivered', (info) => undelivered.push(info));
    const gates = turnGates();
    const run = service.start(scripted.name, {
      prompt: text('go'),
      parent: { id: 'p' },
      agentOptions: { script: [{ reply: 'held', waitFor: gates.waitFor }, { reply: 'took {input}' }] },
    });
    const handle = temporal.client.workflow.getHandle(run.id);
    await eventually(
      async () => ((await handle.query(statusQuery).catch(() => undefined))?.turns === 1 ? true : undefined),
      30_000,
    );
    const sent = Array.from({ length: SIGNALS_PER_RUN + 5 }, (_, i) => `m${i + 1}`);
    for (const message of sent) run.sendMessage!(text(message));
    await eventually(() => (undelivered.length === 5 ? true : undefined), 60_000);
    expect(undelivered.map((info) => info.content)).toEqual(sent.slice(SIGNALS_PER_RUN).map(text));
    for (const { error } of undelivered) {
      expect(error.code).toBe('RESOURCE_EXHAUSTED');
      expect(error.message).toContain('exceeded workflow execution limit for signal events');
    }
    gates.open(run.id, 0);
    expect(await run.result).toEqual({
      output: text(`took ${sent.slice(0, SIGNALS_PER_RUN).join(' | ')}`),
      stopReason: 'completed',
    });
    await run.dispose();
  } finally {
    await stopWorker();
    await temporal.close();
  }
}, 120_000);

it('gives up on messages queued behind one given up on within the one reconnect window, not a window each', async () => {
  const WINDOW_MS = 2000;
  const temporal = await startTestServer();
  try {
    // No worker: a signal needs only the server.
    const service = newService(temporal, { reconnectWindowMs: WINDOW_MS });
    service.registerProvider(scripted);
    const undelivered: { at: number; info: SubagentMessageUndeliveredInfo }[] = [];
    service.on('subagent/message-undelivered', (info) => undelivered.push({ at: Date.now(), info }));
    const run = service.start(scripted.name, { prompt: text('go'), parent: { id: 'p' } });
    run.result.catch(() => undefined);
    await runStarted(run);
    await temporal.server.stop();
    const sent = ['a', 'b', 'c', 'd'];
    for (const message of sent) run.sendMessage!(text(message));
    await eventually(() => (undelivered.length === sent.length ? true : undefined), 60_000);
    expect(undelivered.map(({ info }) => info.content)).toEqual(sent.map(text));
    expect(undelivered.every(({ info }) => info.error.code === 'UNAVAILABLE')).toBe(true);
    // The first waited out the window, the others were given up on with it (before, a window each).
    expect(undelivered.at(-1)!.at - undelivered[0]!.at).toBeLessThan(WINDOW_MS);
  } finally {
    await temporal.close();
  }
}, 120_000);

it("cancels nested runs past the server's limit on the cancels one run has out, a batch at a time, and closes (its workflow task failed at every attempt, and dispose never returned)", async () => {
  const temporal = await startTestServer({
    dynamicConfig: { 'limit.numPendingCancelRequests.error': NESTED_CANCEL_BATCH },
  });
  const stopWorker = await startWorker(temporal, [scripted]);
  try {
    const service = newService(temporal);
    service.registerProvider(scripted);
    const parent = service.start(scripted.name, { prompt: text('go'), parent: { id: 'p' } });
    await parent.result;
    // A batch of nested runs that have closed since (a raw client's signals, naming runs the
    // server does not have: their cancels fail, as a closed run's do), then one that is parked.
    const handle = temporal.client.workflow.getHandle(parent.id);
    for (let i = 0; i < NESTED_CANCEL_BATCH; i++) {
      await handle.signal(childStartedSignal, { runId: `subagent-${scripted.name}:${randomUUID()}` });
    }
    const nested = service.start(scripted.name, {
      prompt: text('go'),
      parent: { id: 'p', runId: parent.id, rootRunId: parent.id },
    });
    await nested.result;
    await eventually(
      async () => ((await handle.query(statusQuery)).children.length === NESTED_CANCEL_BATCH + 1 ? true : undefined),
      30_000,
    );
    await parent.dispose();
    expect(await handle.result()).toMatchObject<Partial<SubagentRunOutcome>>({ closedBy: 'disposed' });
    const outcome = await temporal.client.workflow.getHandle(nested.id).result();
    expect(outcome).toMatchObject<Partial<SubagentRunOutcome>>({ closedBy: 'cancelled' });
  } finally {
    await stopWorker();
    await temporal.close();
  }
}, 60_000);
