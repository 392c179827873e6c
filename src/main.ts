// `npm start`: the main job. Starts the embedded Temporal server (or connects to TEMPORAL_ADDRESS)
// and a worker, then runs one durable delegation end to end: start, a steering message, the
// result, a resume and the resumed result. Prints each step and stops cleanly.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { connectTemporal } from './config';
import { createScriptedProvider } from './providers/scripted';
import { TemporalSubagentService } from './service';
import type { ContentBlock, SubagentResult } from './types';
import { createSubagentWorker } from './worker';

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
const show = (result: SubagentResult) =>
  `${result.stopReason}: ${result.output.map((block) => (block.type === 'text' ? block.text : `[${block.type}]`)).join('')}`;

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const started = Date.now();
  const step = (message: string) => console.log(`[${String(Date.now() - started).padStart(5)} ms] ${message}`);

  const temporal = await connectTemporal();
  step(
    temporal.devServer
      ? `embedded Temporal dev server on ${temporal.address} (SQLite ${temporal.devServer.dbFilename})`
      : `Temporal server at ${temporal.address}, namespace ${temporal.namespace}`,
  );
  step('no model endpoint is configured, so the child is the `scripted` provider: a test double that answers from a script');

  let firstTurnStarted = () => {};
  const firstTurn = new Promise<void>((resolve) => (firstTurnStarted = resolve));
  const provider = createScriptedProvider({
    observer: (event) => event.kind === 'turn-start' && event.turn === 0 && firstTurnStarted(),
    script: [
      { delayMs: 1000, reply: 'Read the task "{input}". The repository has src/, workflows/, activities/ and test/.' },
      { reply: 'Steered at the turn boundary by "{input}": the tests live in test/.' },
      { reply: 'Resumed with "{input}", remembering: {conversation}' },
    ],
  });
  const worker = await createSubagentWorker({ connection: temporal.connection, namespace: temporal.namespace, providers: [provider] });
  const service = new TemporalSubagentService({ client: temporal.client });
  service.registerProvider(provider);
  service.on('subagent/start', ({ id, segment }) => step(`subagent/start ${id} segment ${segment}`));
  service.on('subagent/end', ({ stopReason, segment }) => step(`subagent/end segment ${segment}: ${stopReason}`));

  try {
    await worker.runUntil(async () => {
      const run = service.start('scripted', {
        prompt: text('Describe the repository layout.'),
        parent: { id: 'main-agent' },
      });
      step(`started run ${run.id} (a workflow on task queue subagents.scripted)`);
      await firstTurn;
      run.sendMessage!(text('Also say where the tests are.'));
      step('sent a steering message while the first turn runs');
      step(`result: ${show(await run.result)}`);

      const resumed = run.resume!(text('How many top-level folders?'));
      step('resumed the settled run: same id, continued as new');
      step(`resumed result: ${show(await resumed.result)}`);
      await resumed.dispose();
      await run.dispose();
      step('disposed: the run workflow has closed');
    });
  } finally {
    await temporal.close();
  }
  step('stopped the worker and the server');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
