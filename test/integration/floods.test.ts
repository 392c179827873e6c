// Floods of steering messages from a caller: past the server's limit on the signals one Temporal
// run takes. On a dev server of its own, with a limit of 20 signals.
import type { SubagentMessageUndeliveredInfo } from '../../src';
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
