import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { TemporalSubagentService } from './src';
import { createScriptedProvider, resolveTemporalBinary } from './src/testing';
import { createSubagentWorker } from './src/worker';
async function main() {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: resolveTemporalBinary('test-server') } } });
  const scripted = createScriptedProvider({});
  const worker = await createSubagentWorker({ connection: env.nativeConnection, namespace: 'default', providers: [scripted] } as never);
  const running = worker.run();
  const service = new TemporalSubagentService({ client: env.client, searchAttributes: false });
  service.registerProvider(scripted);
  const run = service.start(scripted.name, { prompt: [{ type: 'text', text: 'hi' }], parent: { id: 'p' } });
  setTimeout(async () => {
    const h = await env.client.workflow.getHandle(run.id).fetchHistory();
    console.log((h.events ?? []).map((e) => e.eventType).join(','));
    const r = await env.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: run.id }, waitNewEvent: true });
    console.log('poll1', r.history?.events?.length, r.nextPageToken?.length);
    const t0 = Date.now();
    const r2 = await env.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: run.id }, waitNewEvent: true, nextPageToken: r.nextPageToken });
    console.log('poll2', r2.history?.events?.length, Date.now() - t0);
  }, 3000);
  console.log(await run.result);
  worker.shutdown(); await running; await env.teardown();
}
main().catch((e) => { console.error(e); process.exit(1); });
