// Records the histories the replay test checks every workflow change against. Run it when a
// workflow version ships (`npx tsx scripts/record-histories.ts`), never to paper over a replay
// failure: a failing replay means the change needs `patched()`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { TemporalSubagentService } from '../src';
import { createScriptedProvider, startDevServer, startFakeOpenAI, textReply, toolCallReply } from '../src/testing';
import { connectTemporal, createSpawnProvider, createSubagentWorker } from '../src/worker';

const VERSION = process.argv[2] ?? 'v1';
const text = (value: string) => [{ type: 'text' as const, text: value }];

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const server = await startDevServer();
  const temporal = await connectTemporal({ env: { TEMPORAL_ADDRESS: server.address } });
  const provider = createScriptedProvider({ name: 'scripted' });
  const fake = await startFakeOpenAI();
  const spawn = createSpawnProvider({ endpoint: { baseURL: fake.baseURL, model: 'fake-model' } });
  const worker = await createSubagentWorker({ connection: temporal.connection, providers: [provider, spawn] });
  const service = new TemporalSubagentService({ client: temporal.client });
  service.registerProvider(provider);
  service.registerProvider(spawn);
  await worker.runUntil(async () => {
    // A run touching every handler: steering, a failing-then-retried turn, resume, dispose.
    const run = service.start('scripted', {
      prompt: text('record me'),
      parent: { id: 'recorder', options: { subagentDepth: 1 } },
      maxDepth: 3,
      agentOptions: {
        script: [
          { delayMs: 500, reply: 'first: {input}' },
          { failAttempts: 1, reply: 'second: {input}' },
          { reply: 'resumed: {conversation}' },
        ],
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    run.sendMessage!(text('steer'));
    await run.result;
    const resumed = run.resume!(text('again'));
    await resumed.result;
    await resumed.dispose();
    // A structured run: a prose finish, the nudge, an invalid then a valid capture.
    const structured = service.start('scripted', {
      prompt: text('structured'),
      parent: { id: 'recorder' },
      outputSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
      agentOptions: {
        script: [
          { reply: 'prose first' },
          {
            calls: [
              { name: 'structured_output', arguments: { answer: 1 } },
              { name: 'structured_output', arguments: { answer: 'one' } },
            ],
          },
        ],
      },
    });
    await structured.result;
    await structured.dispose();

    // An agent-loop run: a tool call, a steering message before the next model call, an answer.
    fake.enqueue(toolCallReply([{ name: 'list_directory', arguments: {} }], { delayMs: 300 }), textReply('listed'));
    const agent = service.start('spawn', {
      prompt: text('list'),
      parent: { id: 'recorder', session: { header: { id: 's', cwd: __dirname } } },
    });
    await fake.waitForRequests(1);
    agent.sendMessage!(text('briefly'));
    await agent.result;
    await agent.dispose();

    const handle = temporal.client.workflow.getHandle(run.id);
    const firstRunId = (await handle.describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
    const recordings = [
      ['start', run.id, firstRunId],
      ['resumed', run.id, undefined],
      ['structured', structured.id, undefined],
      ['agent-loop', agent.id, undefined],
    ] as const;
    for (const [label, workflowId, runId] of recordings) {
      const history = await temporal.client.workflow.getHandle(workflowId, runId).fetchHistory();
      const file = join(__dirname, '..', 'test', 'histories', `subagent-run-${VERSION}-${label}.json`);
      writeFileSync(file, historyToJSON(history) + '\n');
      console.log(`wrote ${file} (${history.events?.length} events)`);
    }
  });
  await temporal.close();
  await server.stop();
  await fake.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
