// Floods of steering messages from a caller: past the server's limit on the signals one Temporal
// run takes, and queued behind one another while the server is away. Each runs on a dev server of
// its own: one with a limit of 20 signals, one that the test stops.
import { type SubagentMessageUndeliveredInfo, runStarted } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { statusQuery } from '../../workflows/definitions';
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
