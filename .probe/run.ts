import { Worker, NativeConnection } from '@temporalio/worker';
import { Client, WorkflowUpdateFailedError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { startDevServer } from '../src/dev-server';
import { probe, resultUpdate, closeSignal } from './wf';
async function main() {
  let t = Date.now();
  const server = await startDevServer({});
  console.log('server up in', Date.now() - t, server.address);
  const connection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection });
  const calls: string[] = [];
  const worker = await Worker.create({ connection, taskQueue: 'q', workflowsPath: require.resolve('./wf'), activities: {
    async slow(ms: number) { calls.push('slow'+ms); const ctx = Context.current(); const end = Date.now()+ms; while (Date.now() < end) { ctx.heartbeat(); await Promise.race([new Promise(r=>setTimeout(r,100)), ctx.cancelled]); } return 'ok'+ms; } } });
  await worker.runUntil(async () => {
    // 1. cancel immediately after start
    let h = await client.workflow.start(probe, { workflowId: 'p1', taskQueue: 'q', args: ['slow'] });
    await h.cancel();
    console.log('1 cancel-at-start', await h.result(), calls);
    // 2. update on a closed workflow
    try { await h.executeUpdate(resultUpdate, { args: [0] }); } catch (e: any) { console.log('2 closed update err', e.constructor.name, e.message, e.cause?.constructor?.name, e.cause?.code); }
    // 3. update in flight while cancel mid-activity
    h = await client.workflow.start(probe, { workflowId: 'p3', taskQueue: 'q', args: ['slow'] });
    const u = h.executeUpdate(resultUpdate, { args: [0] });
    await new Promise(r => setTimeout(r, 800));
    t = Date.now(); await h.cancel();
    console.log('3 update after cancel', await u, 'ms', Date.now()-t, await h.result());
    // 4. update-with-start
    t = Date.now();
    const { WithStartWorkflowOperation } = await import('@temporalio/client');
    const op = new WithStartWorkflowOperation(probe, { workflowId: 'p4', taskQueue: 'q', args: ['fast'], workflowIdConflictPolicy: 'FAIL' });
    const r4 = await client.workflow.executeUpdateWithStart(resultUpdate, { args: [0], startWorkflowOperation: op });
    console.log('4 uws', r4, Date.now() - t, 'ms');
    // 5. park + cancel
    h = await client.workflow.start(probe, { workflowId: 'p5', taskQueue: 'q', args: ['park'] });
    console.log('5a', await h.executeUpdate(resultUpdate, { args: [0] }));
    await h.cancel(); console.log('5 park cancel', await h.result(), (await h.describe()).status.name);
    // 6. unknown id
    try { await client.workflow.getHandle('nope').executeUpdate(resultUpdate, { args: [0] }); } catch (e: any) { console.log('6 unknown', e.constructor.name, e.message); }
    // 7. latency: start+result bare for fast
    for (let i = 0; i < 5; i++) { t = Date.now(); const hh = await client.workflow.start(probe, { workflowId: 'p7-'+i, taskQueue: 'q', args: ['fast'] }); await hh.result(); console.log('7 bare', Date.now()-t); }
    for (let i = 0; i < 5; i++) { t = Date.now(); const op = new WithStartWorkflowOperation(probe, { workflowId: 'p8-'+i, taskQueue: 'q', args: ['fast'], workflowIdConflictPolicy: 'FAIL' }); await client.workflow.executeUpdateWithStart(resultUpdate, { args: [0], startWorkflowOperation: op }); console.log('8 uws', Date.now()-t); }
  });
  await connection.close();
  await server.stop();
  console.log('stopped');
}
main().catch((e) => { console.error(e); process.exit(1); });
