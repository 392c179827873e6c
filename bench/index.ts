// `npm run bench`: what durability costs, measured side by side in one run against the limit
// here, a bare Temporal workflow with one activity on the same embedded server and worker
// settings. Plain Node, no test runner. `--quick` for fewer repetitions, `--json` for a JSON line.
import { randomUUID } from 'node:crypto';
import { Worker, DefaultLogger, Runtime, bundleWorkflowCode } from '@temporalio/worker';
import type { SubagentTurnProvider } from '../activities/provider';
import { connectTemporal } from '../src/config';
import { createSpawnProvider } from '../src/providers/llm';
import { startFakeOpenAI, textReply, toolCallReply } from '../test/helpers/fake-openai';
import { TemporalSubagentService } from '../src/service';
import { createSubagentWorker } from '../src/worker';

const quick = process.argv.includes('--quick');
const json = process.argv.includes('--json');
const log = (line: string) => {
  if (!json) console.log(line);
};

const noopProvider: SubagentTurnProvider = {
  name: 'noop',
  capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  steering: true,
  resumable: true,
  async runTurn() {
    return { output: [], stopReason: 'completed' };
  },
};

interface Stats {
  p50: number;
  p95: number;
}

function stats(samples: number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p95: at(0.95) };
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const temporal = await connectTemporal({ env: {}, devServer: { dbFilename: undefined } });
  const { connection, client } = temporal;
  const baselineBundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('./baseline-workflows'),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
  const fake = await startFakeOpenAI();
  const spawn = createSpawnProvider({ endpoint: { baseURL: fake.baseURL, model: 'fake-model' }, runSettings: { maxStepsPerTurn: 1000 } });
  const subagentWorker = await createSubagentWorker({ connection, providers: [noopProvider, spawn] });
  const baselineWorker = await Worker.create({
    connection,
    taskQueue: 'bench.baseline',
    workflowBundle: baselineBundle,
    activities: { async noop() {} },
    maxHeartbeatThrottleInterval: 1000,
    defaultHeartbeatThrottleInterval: 1000,
  });
  const service = new TemporalSubagentService({ client });
  service.registerProvider(noopProvider);
  service.registerProvider(spawn);
  const prompt = [{ type: 'text' as const, text: 'noop' }];

  const facadeOnce = async () => {
    const started = performance.now();
    const run = service.start('noop', { prompt, parent: { id: 'bench' } });
    await run.result;
    const elapsed = performance.now() - started;
    await run.dispose();
    return elapsed;
  };
  const baselineOnce = async () => {
    const started = performance.now();
    const handle = await client.workflow.start('bareRoundTrip', { taskQueue: 'bench.baseline', workflowId: `bare-${randomUUID()}` });
    await handle.result();
    return performance.now() - started;
  };

  const results: Record<string, unknown> = {};
  await Promise.all([
    subagentWorker.runUntil(async () => {
      await baselineWorker.runUntil(async () => {
        const warmup = quick ? 5 : 10;
        const rounds = quick ? 20 : 50;
        for (let i = 0; i < warmup; i++) {
          await facadeOnce();
          await baselineOnce();
        }
        // Interleaved, so drift in the machine's load hits both sides alike.
        const facade: number[] = [];
        const baseline: number[] = [];
        for (let i = 0; i < rounds; i++) {
          facade.push(await facadeOnce());
          baseline.push(await baselineOnce());
        }
        const f = stats(facade);
        const b = stats(baseline);
        results.latency = { facade_p50_ms: round(f.p50), baseline_p50_ms: round(b.p50), ratio: round(f.p50 / b.p50, 3) };
        log(`Delegation latency, start -> result, ${rounds} runs each (after ${warmup} warm-up):`);
        log(`  facade (no-op provider)     p50 ${f.p50.toFixed(1)} ms   p95 ${f.p95.toFixed(1)} ms`);
        log(`  bare workflow + 1 activity  p50 ${b.p50.toFixed(1)} ms   p95 ${b.p95.toFixed(1)} ms`);
        log(`  ratio (p50)                 ${(f.p50 / b.p50).toFixed(3)}`);

        // History per model call of an LLM child that keeps calling a tool (one model call and
        // one tool call per step), against the fake model server.
        const perTurn: Record<string, number> = {};
        for (const calls of [10, 50, 200]) {
          let made = 0;
          fake.setHandler(() => (++made < calls ? toolCallReply([{ name: 'list_directory', arguments: {} }]) : textReply('done')));
          const run = service.start('spawn', { prompt: [{ type: 'text', text: `loop ${calls}` }], parent: { id: 'bench', session: { header: { id: 's', cwd: __dirname } } } });
          await run.result;
          const info = (await client.workflow.getHandle(run.id).describe()).raw.workflowExecutionInfo!;
          await run.dispose();
          perTurn[String(calls)] = Math.round(Number(info.historySizeBytes) / calls);
        }
        results.history_bytes_per_turn = perTurn;
        log(`History bytes per model call of an LLM child (model call + tool call per step):`);
        log(`  10 calls: ${perTurn['10']}   50 calls: ${perTurn['50']}   200 calls: ${perTurn['200']}`);
      });
    }),
  ]);
  await temporal.close();
  await fake.close();
  if (json) console.log(JSON.stringify(results));
}

function round(value: number, digits = 1): number {
  return Number(value.toFixed(digits));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
