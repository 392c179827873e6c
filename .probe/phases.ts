import { DefaultLogger, Runtime } from '@temporalio/worker';
import { connectTemporal } from '../src/config';
import { TemporalSubagentService } from '../src/service';
import { createSubagentWorker } from '../src/worker';
const marks: Record<string, number> = {};
const now = () => performance.now();
async function main() {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const t = await connectTemporal({ env: {}, devServer: { dbFilename: undefined } });
  const provider = { name: 'noop', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false }, inheritsParentContext: false, steering: true, resumable: true,
    async runTurn() { marks.turnStart = now(); return { output: [], stopReason: 'completed' as const }; } };
  const worker = await createSubagentWorker({ connection: t.connection, providers: [provider] });
  const service = new TemporalSubagentService({ client: t.client });
  service.registerProvider(provider);
  await worker.runUntil(async () => {
    const rows: number[][] = [];
    for (let i = 0; i < 30; i++) {
      const t0 = now();
      const run = service.start('noop', { prompt: [{ type: 'text', text: 'x' }], parent: { id: 'p' } });
      await run.result;
      const t2 = now();
      rows.push([marks.turnStart - t0, t2 - marks.turnStart, t2 - t0]);
      await run.dispose();
    }
    rows.sort((a, b) => a[2] - b[2]);
    console.log('median: start->turn, turn->result, total', rows[15].map((x) => x.toFixed(1)));
  });
  await t.close();
}
main();
