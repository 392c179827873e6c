// `npm start`: the main job. Starts the embedded Temporal server (or connects to TEMPORAL_ADDRESS)
// and a worker, then runs one durable delegation to the `spawn` LLM child end to end: start, a
// steering message, the result, a resume and the resumed result. With OPENAI_BASE_URL set it
// talks to that endpoint (model: SUBAGENT_MODEL); otherwise to a local fake model server, a test
// double, and says so. Prints each step and stops cleanly.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { type SubagentResult, TemporalSubagentService, textContent } from './index';
import { FakeOpenAI, startFakeOpenAI, textReply, toolCallReply } from './testing';
import { connectTemporal, createSpawnProvider, createSubagentWorker, endpointFromEnv } from './worker';

/** The result in one line: stop reason and output, then the diagnostic of one that did not complete. */
const show = (result: SubagentResult) => {
  const output = result.output.map((block) => (block.type === 'text' ? block.text : `[${block.type}]`)).join('');
  const diagnostic =
    result.stopReason !== 'completed' && result.diagnostic ? ` (diagnostic: ${result.diagnostic})` : '';
  return `${result.stopReason}: ${output}${diagnostic}`;
};

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
  let fake: FakeOpenAI | undefined;
  let endpoint = endpointFromEnv();
  if (endpoint.baseURL) {
    step(`model endpoint ${endpoint.baseURL}, model ${endpoint.model ?? '(set SUBAGENT_MODEL)'}`);
  } else {
    fake = await startFakeOpenAI({ handler: fakeModel });
    endpoint = { baseURL: fake.baseURL, model: 'fake-model' };
    step(`OPENAI_BASE_URL is not set, so the model is a local fake server (a test double) at ${fake.baseURL}`);
  }

  const spawn = createSpawnProvider({ endpoint });
  const worker = await createSubagentWorker({
    connection: temporal.connection,
    namespace: temporal.namespace,
    providers: [spawn],
    ...(temporal.dataConverter ? { dataConverter: temporal.dataConverter } : {}),
  });
  const service = new TemporalSubagentService({ client: temporal.client });
  service.registerProvider(spawn);
  service.on('subagent/start', ({ id, segment }) => step(`subagent/start ${id} segment ${segment}`));
  service.on('subagent/end', ({ stopReason, segment, usage }) =>
    step(
      `subagent/end segment ${segment}: ${stopReason}, ${usage?.promptTokens ?? 0} prompt + ${usage?.completionTokens ?? 0} completion tokens so far`,
    ),
  );

  try {
    await worker.runUntil(async () => {
      const run = service.start('spawn', {
        prompt: textContent('Describe the layout of this repository.'),
        parent: { id: 'main-agent', session: { header: { id: 'main-session', cwd: process.cwd() } } },
      });
      step(
        `started run ${run.id}: a workflow on task queue subagents.spawn; each model call is an activity, its file tools run within it`,
      );
      if (fake) await fake.waitForRequests(1);
      run.sendMessage!(textContent('Keep it to one sentence.'));
      step('sent a steering message: the child gets it before its next model call');
      step(`result: ${show(await run.result)}`);

      const resumed = run.resume!(textContent('Which folder holds the tests?'));
      step('resumed the settled run: same id, continued as new with the conversation');
      step(`resumed result: ${show(await resumed.result)}`);
      await resumed.dispose();
      await run.dispose();
      step('disposed: the run workflow has closed');
    });
  } finally {
    await temporal.close();
    await fake?.close();
  }
  step('stopped the worker, the server and the fake model');
}

/** The fake model: lists the working directory with the real tool, then answers from what it saw. */
function fakeModel(request: { body: { messages: { role: string; content: string | null }[] } }) {
  const messages = request.body.messages;
  const listing = messages.filter((message) => message.role === 'tool').at(-1)?.content ?? '';
  const folders = listing.split('\n').filter((line) => line.endsWith('/') && !line.startsWith('.'));
  const last = messages.at(-1)!;
  if (last.role === 'user' && messages.at(-2)?.role !== 'tool') {
    if (last.content?.includes('tests')) {
      return textReply(`The tests are in ${folders.find((folder) => folder.startsWith('test')) ?? 'no folder I saw'}.`);
    }
    return toolCallReply([{ name: 'list_directory', arguments: { path: '.' } }]);
  }
  const steer = last.role === 'user' ? ` (as asked: "${last.content}")` : '';
  return textReply(`The repository has ${folders.length} folders: ${folders.join(', ')}${steer}.`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
