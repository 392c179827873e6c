// `npm run bench`: what durability costs, measured side by side in one run against the limit
// here, a bare Temporal workflow with one activity on the same embedded server and worker
// settings. Plain Node, no test runner. `--quick` for fewer repetitions (under two minutes),
// `--observers` for section 8 alone, `--long-turn` for section 9 alone,
// `--json` to end the table with one JSON line of every figure.
import { randomUUID } from 'node:crypto';
import { readFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { Worker, DefaultLogger, NativeConnection, Runtime, bundleWorkflowCode } from '@temporalio/worker';
import { type SubagentTurnProvider, TemporalSubagentService, runStarted } from '../src';
import { segmentResultUpdate } from '../workflows/definitions';
import {
  ScriptedTurnEvent,
  createScriptedProvider,
  spawnWorkerProcess,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../src/testing';
import { bundleSubagentWorkflows, connectTemporal, createSpawnProvider, createSubagentWorker } from '../src/worker';

const quick = process.argv.includes('--quick');
const LONG_TURN_CALLS = 1000;
/** A directory for the LLM children's file tools, with a file of 200 KiB in lines of 64 characters. */
const benchFiles = mkdtempSync(join(tmpdir(), 'subagent-bench-files-'));
const BIG_FILE = 'big.txt';
writeFileSync(join(benchFiles, BIG_FILE), `${'z'.repeat(63)}\n`.repeat((200 * 1024) / 64));
const json = process.argv.includes('--json');
const log = (line = '') => console.log(line);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { id: 'bench' };

interface Stats {
  p50: number;
  p95: number;
}

function stats(samples: number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p95: at(0.95) };
}

const round = (value: number, digits = 1) => Number(value.toFixed(digits));
const noop = (name: string, resumable: boolean): SubagentTurnProvider => ({
  name,
  capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
  inheritsParentContext: false,
  steering: true,
  resumable,
  async runTurn() {
    return { output: [], stopReason: 'completed' };
  },
});

/** A scripted provider that timestamps every turn start and end, and lets the bench wait for them. */
function timed() {
  const seen = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  const key = (runId: string, kind: string, turn: number) => `${runId}|${kind}|${turn}`;
  const provider = createScriptedProvider({
    name: 'timed',
    observer: (event: ScriptedTurnEvent) => {
      const k = key(event.runId, event.kind, event.turn);
      seen.set(k, performance.now());
      waiters.get(k)?.();
    },
  });
  return {
    provider,
    /** When the turn's event happened (performance.now()), waiting for it if need be. */
    at: async (runId: string, kind: 'turn-start' | 'turn-end', turn: number) => {
      const k = key(runId, kind, turn);
      if (!seen.has(k)) await new Promise<void>((resolve) => waiters.set(k, resolve));
      return seen.get(k)!;
    },
  };
}

type Timing = ReturnType<typeof timed>;
type Waiting = 'history watch' | 'update per waiter' | 'shared update';
const WAYS: Waiting[] = ['history watch', 'update per waiter', 'shared update'];

/** CPU seconds a process has used (user + system), from /proc. */
const cpuSeconds = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};

/**
 * How 1,000 waiters on one run receive its result, by three ways to wait, side by side in
 * interleaved rounds: the history watch the service uses, an update held per waiter (the way of
 * earlier versions), and one update all waiters share by its id. Each round also runs a run with
 * a single waiter, for the history it makes and the single-waiter latency. Latency counts from the
 * end of the provider's turn to each waiter's receipt.
 */
async function observers(
  address: string,
  serverPid: number | undefined,
  service: TemporalSubagentService,
  timing: Timing,
  results: Record<string, unknown>,
): Promise<void> {
  const gates = mkdtempSync(join(tmpdir(), 'subagent-bench-gates-'));
  const connections = await Promise.all(Array.from({ length: 5 }, () => NativeConnection.connect({ address })));
  const observersOf = connections.map((connection) => {
    const client = new Client({ connection });
    return { client, service: new TemporalSubagentService({ client }) };
  });
  const wait = (way: Waiting, observer: (typeof observersOf)[number], runId: string): Promise<unknown> => {
    if (way === 'history watch') return observer.service.attach(runId).result;
    const handle = observer.client.workflow.getHandle(runId);
    const updateId = way === 'shared update' ? `result-${runId}` : undefined;
    return handle.executeUpdate(segmentResultUpdate, { args: [{ segment: 0 }], ...(updateId ? { updateId } : {}) });
  };
  /** One run held at its turn until `waiters` wait, spread over the connections, then let go. */
  const observe = async (way: Waiting, waiters: number) => {
    const run = service.start('timed', {
      prompt: text('observed'),
      parent,
      agentOptions: { script: [{ waitFor: join(gates, '{run}.{turn}'), reply: 'seen' }] },
    });
    await runStarted(run);
    const received: number[] = [];
    let failed = 0;
    const waiting = Array.from({ length: waiters }, (_, i) =>
      wait(way, observersOf[i % observersOf.length]!, run.id).then(
        () => received.push(performance.now()),
        () => failed++,
      ),
    );
    const cpuBefore = serverPid ? cpuSeconds(serverPid) : 0;
    writeFileSync(join(gates, `${run.id}.0`), '');
    const turnEnd = await timing.at(run.id, 'turn-end', 0);
    await Promise.all(waiting);
    const cpu = serverPid ? cpuSeconds(serverPid) - cpuBefore : 0;
    const info = (await observersOf[0]!.client.workflow.getHandle(run.id).describe()).raw.workflowExecutionInfo!;
    await run.dispose();
    return {
      latencies: received.map((at) => at - turnEnd),
      failed,
      events: Number(info.historyLength),
      bytes: Number(info.historySizeBytes),
      cpu,
    };
  };

  const rounds = quick ? 1 : 3;
  const singles = quick ? 5 : 15;
  const figures = new Map(
    WAYS.map((way) => [
      way,
      { many: [] as Awaited<ReturnType<typeof observe>>[], one: [] as number[][], oneEvents: 0, oneBytes: 0 },
    ]),
  );
  for (let round = 0; round < rounds; round++) {
    for (const way of WAYS) {
      const figure = figures.get(way)!;
      figure.many.push(await observe(way, 1000));
      const one: number[] = [];
      figure.one.push(one);
      for (let i = 0; i < singles; i++) {
        const sample = await observe(way, 1);
        one.push(...sample.latencies);
        figure.oneEvents = sample.events;
        figure.oneBytes = sample.bytes;
      }
    }
  }
  log(`8. Observers, 1,000 waiters on one run from 5 connections (${rounds} rounds), turn end -> receipt:`);
  const summary: Record<string, unknown> = {};
  for (const [way, figure] of figures) {
    const all = figure.many.flatMap((sample) => sample.latencies);
    const sorted = [...all].sort((a, b) => a - b);
    const p99 = sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? NaN;
    const p50 = stats(all.length ? all : [NaN]).p50;
    const failed = figure.many.reduce((sum, sample) => sum + sample.failed, 0);
    const perObserver = figure.many.map((sample) => (sample.events - figure.oneEvents) / 1000);
    const bytesPerObserver = figure.many.map((sample) => (sample.bytes - figure.oneBytes) / 1000);
    const cpu = figure.many.map((sample) => sample.cpu);
    const single = stats(figure.one.flat());
    summary[way] = {
      p50_ms: round(p50),
      p99_ms: round(p99),
      failed,
      history_events_per_observer: round(Math.max(...perObserver), 2),
      history_bytes_per_observer: Math.round(Math.max(...bytesPerObserver)),
      server_cpu_s: round(Math.max(...cpu), 2),
      single_p50_ms: round(single.p50),
    };
    log(
      `   ${way.padEnd(18)} p50 ${p50.toFixed(1)} ms   p99 ${p99.toFixed(1)} ms   failed ${failed}/${1000 * rounds}   ` +
        `history events per observer ${Math.min(...perObserver).toFixed(2)}-${Math.max(...perObserver).toFixed(2)}   ` +
        `bytes per observer ${Math.round(Math.max(...bytesPerObserver))}   server CPU ${Math.min(...cpu).toFixed(2)}-${Math.max(...cpu).toFixed(2)} s   ` +
        `one waiter p50 ${single.p50.toFixed(1)} ms (p95 ${single.p95.toFixed(1)})`,
    );
  }
  // The single-waiter ratio round by round: each round's two samples ran minutes apart at most.
  const ratios = figures
    .get('history watch')!
    .one.map((ours, i) => stats(ours).p50 / stats(figures.get('update per waiter')!.one[i]!).p50);
  const ratio = stats(ratios).p50;
  log(
    `   single waiter, history watch / update per waiter (p50): ${ratio.toFixed(3)} ` +
      `(rounds ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)})   goal <= 1.0 within the spread`,
  );
  summary.single_waiter_ratio = {
    median: round(ratio, 3),
    min: round(Math.min(...ratios), 3),
    max: round(Math.max(...ratios), 3),
  };
  results.observers = summary;
  await Promise.all(connections.map((connection) => connection.close()));
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const results: Record<string, unknown> = {};
  // The embedded default, payloads over 32 KiB offloaded to files (here, a directory of the run's own).
  const payloads = mkdtempSync(join(tmpdir(), 'subagent-bench-payloads-'));
  const temporal = await connectTemporal({
    env: { SUBAGENT_PAYLOAD_STORE: `file:${payloads}` },
    devServer: { dbFilename: undefined },
  });
  const { connection, client, dataConverter } = temporal;
  const fake = await startFakeOpenAI();
  const timing = timed();
  const spawn = createSpawnProvider({
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
    runSettings: { maxStepsPerTurn: 1000 },
  });
  // Tool outputs of 200 KiB: the model is sent the newest whole, within a budget.
  const bigOutputs = createSpawnProvider({
    name: 'spawn-big-outputs',
    endpoint: { baseURL: fake.baseURL, model: 'fake-model', maxContextChars: 1_000_000 },
    runSettings: { maxStepsPerTurn: LONG_TURN_CALLS + 10 },
  });
  const providers = [noop('noop', true), noop('noop-closing', false), timing.provider, spawn, bigOutputs];
  const subagentWorker = await createSubagentWorker({
    connection,
    providers,
    ...(dataConverter ? { dataConverter } : {}),
  });
  const baselineWorker = await Worker.create({
    connection,
    taskQueue: 'bench.baseline',
    workflowBundle: await bundleWorkflowCode({
      workflowsPath: require.resolve('./baseline-workflows'),
      logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
    }),
    activities: { async noop() {} },
    maxHeartbeatThrottleInterval: 1000,
    defaultHeartbeatThrottleInterval: 1000,
    stickyQueueScheduleToStartTimeout: 2000,
  });
  const service = new TemporalSubagentService({ client });
  for (const provider of providers) service.registerProvider(provider);

  const facadeOnce = async (provider = 'noop') => {
    const started = performance.now();
    const run = service.start(provider, { prompt: text('noop'), parent });
    await run.result;
    const elapsed = performance.now() - started;
    return { elapsed, run };
  };
  const baselineOnce = async (requestEagerStart = false) => {
    const started = performance.now();
    const handle = await client.workflow.start('bareRoundTrip', {
      taskQueue: 'bench.baseline',
      workflowId: `bare-${randomUUID()}`,
      requestEagerStart,
    });
    await handle.result();
    return performance.now() - started;
  };

  /** An LLM child whose one turn calls `tool` `calls` times, then answers; its history, in all its runs. */
  const toolLoop = async (provider: string, calls: number, tool: string, args: object) => {
    let made = 0;
    fake.setHandler(() => (++made < calls ? toolCallReply([{ name: tool, arguments: args }]) : textReply('done')));
    const started = performance.now();
    const run = service.start(provider, {
      prompt: text(`loop ${calls}`),
      parent: { id: 'bench', session: { header: { id: 's', cwd: benchFiles } } },
    });
    await run.result;
    const seconds = (performance.now() - started) / 1000;
    let bytes = 0;
    let runs = 0;
    for await (const execution of client.workflow.list({ query: `WorkflowId = '${run.id}'` })) {
      const { raw } = await client.workflow.getHandle(run.id, execution.runId).describe();
      bytes += Number(raw.workflowExecutionInfo?.historySizeBytes ?? 0);
      runs++;
    }
    await run.dispose();
    return { bytes, runs, seconds, bytesPerCall: Math.round(bytes / calls) };
  };

  const longTurn = async () => {
    const { bytes, runs, seconds, bytesPerCall } = await toolLoop(bigOutputs.name, LONG_TURN_CALLS, 'read_file', {
      path: BIG_FILE,
    });
    log(
      `9. One turn of ${LONG_TURN_CALLS} model calls, each tool output 200 KiB (offloaded; model budget 1,000,000 characters):`,
    );
    log(
      `   history ${(bytes / 1024 / 1024).toFixed(2)} MB over ${runs} runs (${bytesPerCall} bytes per call), ` +
        `${seconds.toFixed(1)} s   goal: under 10 MB`,
    );
    return {
      calls: LONG_TURN_CALLS,
      history_bytes: bytes,
      runs,
      seconds: round(seconds),
      bytes_per_call: bytesPerCall,
    };
  };

  // `--long-turn`: only section 9.
  if (process.argv.includes('--long-turn')) {
    await subagentWorker.runUntil(() => baselineWorker.runUntil(async () => (results.long_turn = await longTurn())));
    await Promise.all([temporal.close(), fake.close()]);
    if (json) console.log(JSON.stringify(results));
    return;
  }

  // `--observers`: only section 8.
  if (process.argv.includes('--observers')) {
    await subagentWorker.runUntil(() =>
      baselineWorker.runUntil(() => observers(temporal.address, temporal.devServer?.pid, service, timing, results)),
    );
    await Promise.all([temporal.close(), fake.close()]);
    if (json) console.log(JSON.stringify(results));
    return;
  }

  await subagentWorker.runUntil(() =>
    baselineWorker.runUntil(async () => {
      // 1. Delegation latency, interleaved so drift in the machine's load hits both sides alike.
      const warmup = quick ? 5 : 10;
      const rounds = quick ? 20 : 50;
      for (let i = 0; i < warmup; i++) {
        await (await facadeOnce()).run.dispose();
        await baselineOnce();
        await baselineOnce(true);
      }
      const facade: number[] = [];
      const baseline: number[] = [];
      const eagerBaseline: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const { elapsed, run } = await facadeOnce();
        facade.push(elapsed);
        await run.dispose();
        baseline.push(await baselineOnce());
        eagerBaseline.push(await baselineOnce(true));
      }
      const f = stats(facade);
      const b = stats(baseline);
      const e = stats(eagerBaseline);
      results.latency = { facade_p50_ms: round(f.p50), baseline_p50_ms: round(b.p50), ratio: round(f.p50 / b.p50, 3) };
      log(`1. Delegation latency, start -> result, ${rounds} runs each (after ${warmup} warm-up):`);
      log(`   facade (no-op provider, eager start)      p50 ${f.p50.toFixed(1)} ms   p95 ${f.p95.toFixed(1)} ms`);
      log(`   bare workflow + 1 activity                p50 ${b.p50.toFixed(1)} ms   p95 ${b.p95.toFixed(1)} ms`);
      log(`   bare workflow + 1 activity, eager start   p50 ${e.p50.toFixed(1)} ms   p95 ${e.p95.toFixed(1)} ms`);
      log(
        `   ratio (p50) to the bare workflow          ${(f.p50 / b.p50).toFixed(3)}   goal <= 1.15   (to the eager one: ${(f.p50 / e.p50).toFixed(3)})`,
      );

      // 2. Throughput: N delegations, 100 at a time, completions per second.
      const total = quick ? 300 : 1000;
      const concurrency = 100;
      const pool = async (one: () => Promise<void>) => {
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next++ < total) await one();
          }),
        );
        return total / ((performance.now() - started) / 1000);
      };
      const disposals: Promise<void>[] = [];
      const facadeRate = await pool(async () => {
        const { run } = await facadeOnce('noop-closing');
        disposals.push(run.dispose());
      });
      await Promise.all(disposals);
      const baselineRate = await pool(async () => {
        await baselineOnce();
      });
      results.throughput = {
        facade_per_s: round(facadeRate),
        baseline_per_s: round(baselineRate),
        ratio: round(facadeRate / baselineRate, 3),
      };
      log(`2. Throughput, ${total} delegations at concurrency ${concurrency}:`);
      log(
        `   facade ${facadeRate.toFixed(1)}/s   bare workflow ${baselineRate.toFixed(1)}/s   ratio ${(facadeRate / baselineRate).toFixed(3)}   goal >= 0.85`,
      );

      // 3. Steering: a message sent during a turn -> the provider's next turn starts with it,
      //    counted from when the turn ended (or from the send, if that came later).
      // 4. Resume: resume() -> the provider starts the new segment's turn.
      const samples = quick ? 10 : 30;
      const steering: number[] = [];
      const resume: number[] = [];
      for (let i = 0; i < samples; i++) {
        const script = [{ delayMs: 150, reply: 'a' }, { reply: 'b' }, { reply: 'c' }];
        const run = service.start('timed', { prompt: text('steer me'), parent, agentOptions: { script } });
        await timing.at(run.id, 'turn-start', 0);
        const sent = performance.now();
        run.sendMessage!(text('steering'));
        const seen = await timing.at(run.id, 'turn-start', 1);
        steering.push(seen - Math.max(sent, await timing.at(run.id, 'turn-end', 0)));
        await run.result;
        const resumedAt = performance.now();
        const resumed = run.resume!(text('again'));
        resume.push((await timing.at(run.id, 'turn-start', 2)) - resumedAt);
        await resumed.result;
        await resumed.dispose();
      }
      const s = stats(steering);
      const r = stats(resume);
      results.steering_p50_ms = round(s.p50);
      results.resume_p50_ms = round(r.p50);
      log(
        `3. Steering, turn boundary -> the provider's next turn with the message, ${samples} samples: p50 ${s.p50.toFixed(1)} ms   p95 ${s.p95.toFixed(1)} ms   goal p50 <= 100`,
      );
      log(
        `4. Resume, resume() -> the provider's new turn, ${samples} samples:       p50 ${r.p50.toFixed(1)} ms   p95 ${r.p95.toFixed(1)} ms   goal p50 <= 150`,
      );

      // 5. History bytes per model call of an LLM child that keeps calling a tool: small outputs
      // (a directory listing), and 200 KiB ones (a file read), offloaded to the payload store.
      const perTurn: Record<string, number> = {};
      const perTurnBig: Record<string, number> = {};
      for (const calls of [10, 50, 200]) {
        perTurn[String(calls)] = (await toolLoop(spawn.name, calls, 'list_directory', {})).bytesPerCall;
        perTurnBig[String(calls)] = (
          await toolLoop(bigOutputs.name, calls, 'read_file', { path: BIG_FILE })
        ).bytesPerCall;
      }
      results.history_bytes_per_turn = { ...perTurn, big_outputs_200_kib: perTurnBig };
      log(`5. History bytes per model call (model call + tool call per step, fake model server):`);
      log(`   10 calls ${perTurn['10']}   50 calls ${perTurn['50']}   200 calls ${perTurn['200']}   goal: flat`);
      log(
        `   200 KiB tool outputs, offloaded: 10 calls ${perTurnBig['10']}   50 calls ${perTurnBig['50']}   ` +
          `200 calls ${perTurnBig['200']}   goal: under 2,048`,
      );

      // 9. One turn of 1,000 model calls reading 200 KiB each (the full run only).
      if (!quick) results.long_turn = await longTurn();

      // 8. Observers: 1,000 waiters on one run from 5 connections, by each way of waiting.
      await observers(temporal.address, temporal.devServer?.pid, service, timing, results);
    }),
  );

  // 6 and 7 run workers as processes of their own, to measure and to kill them.
  const address = temporal.address;
  const bundlePath = join(mkdtempSync(join(tmpdir(), 'subagent-bench-')), 'bundle.js');
  writeFileSync(bundlePath, (await bundleSubagentWorkflows()).code);
  const workerEnv = (name: string, eventsFile: string, extra: Record<string, string> = {}) => ({
    TEMPORAL_TEST_ADDRESS: address,
    TEMPORAL_TEST_BUNDLE: bundlePath,
    PROVIDER_NAME: name,
    EVENTS_FILE: eventsFile,
    ...extra,
  });
  const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

  // 6. Worker memory with 1,000 parked runs, against none, with a bounded workflow cache.
  const parkedName = 'parked';
  service.registerProvider({
    ...noop(parkedName, true),
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
  });
  const memoryFile = join(mkdtempSync(join(tmpdir(), 'subagent-bench-')), 'memory.json');
  const parkedWorker = await spawnWorkerProcess(
    workerEnv(parkedName, '/dev/null', {
      WORKER_MAX_CACHED: '100',
      MEMORY_FILE: memoryFile,
      NODE_OPTIONS: '--expose-gc',
    }),
  );
  const heapMb = () => (JSON.parse(readFileSync(memoryFile, 'utf8')) as { heapUsed: number }).heapUsed / 2 ** 20;
  const warm = await Promise.all(
    Array.from({ length: 20 }, () => service.start(parkedName, { prompt: text('warm'), parent })),
  );
  await Promise.all(warm.map((run) => run.result));
  await Promise.all(warm.map((run) => run.dispose()));
  await sleep(2000);
  const rss: number[] = [rssMb(parkedWorker.child.pid!)];
  const heap: number[] = [heapMb()];
  for (let batch = 0; batch < 10; batch++) {
    const runs = Array.from({ length: 100 }, () => service.start(parkedName, { prompt: text('park'), parent }));
    await Promise.all(runs.map((run) => run.result));
    if (batch === 0 || batch === 9) {
      await sleep(2000);
      rss.push(rssMb(parkedWorker.child.pid!));
      heap.push(heapMb());
    }
  }
  const [rssIdle, rssCacheFull, rssParked] = rss as [number, number, number];
  const [heapIdle, heapCacheFull, heapParked] = heap as [number, number, number];
  results.worker_rss_mb = { parked_0: round(rssIdle), parked_1000: round(rssParked) };
  log(`6. Worker memory, workflow cache of 100 (none parked / 100 parked, cache full / 1,000 parked):`);
  log(`   resident set ${rssIdle.toFixed(1)} / ${rssCacheFull.toFixed(1)} / ${rssParked.toFixed(1)} MB`);
  log(
    `   heap after a full GC ${heapIdle.toFixed(1)} / ${heapCacheFull.toFixed(1)} / ${heapParked.toFixed(1)} MB   goal: the 900 evicted cost nothing`,
  );
  // The parked runs stay parked: the in-memory server goes away with the bench.
  await parkedWorker.kill();

  // 7. Recovery: a worker SIGKILLed mid-turn -> the run completes on another worker.
  const heartbeatTimeoutS = 5;
  const recoveryName = 'recovery';
  service.registerProvider({
    ...noop(recoveryName, false),
    runSettings: { heartbeatTimeout: `${heartbeatTimeoutS} seconds`, retry: { initialInterval: '100 ms' } },
  });
  const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-bench-')), 'events.jsonl');
  writeFileSync(eventsFile, '');
  const workers = [
    await spawnWorkerProcess(workerEnv(recoveryName, eventsFile)),
    await spawnWorkerProcess(workerEnv(recoveryName, eventsFile)),
  ];
  const recoveries: number[] = [];
  for (let sample = 0; sample < (quick ? 1 : 3); sample++) {
    const run = service.start(recoveryName, {
      prompt: text('survive'),
      parent,
      agentOptions: { script: [{ stallFirstAttemptMs: 60_000 }] },
    });
    let owner: number | undefined;
    while (owner === undefined) {
      await sleep(20);
      const line = readFileSync(eventsFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .find((e) => e.runId === run.id && e.kind === 'turn-start');
      owner = line?.pid;
    }
    const victim = workers.findIndex((worker) => worker.child.pid === owner);
    const killedAt = performance.now();
    await workers[victim]!.kill('SIGKILL');
    await run.result;
    recoveries.push((performance.now() - killedAt) / 1000);
    workers[victim] = await spawnWorkerProcess(workerEnv(recoveryName, eventsFile));
  }
  const recovery = stats(recoveries).p50;
  results.recovery_s = round(recovery, 2);
  results.heartbeat_timeout_s = heartbeatTimeoutS;
  log(
    `7. Recovery, worker SIGKILL -> the run completes on another worker: ${recovery.toFixed(2)} s (heartbeat timeout ${heartbeatTimeoutS} s)`,
  );
  await Promise.all(workers.map((worker) => worker.kill()));

  await temporal.close();
  await fake.close();
  if (json) console.log(JSON.stringify(results));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
