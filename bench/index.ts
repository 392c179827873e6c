// `npm run bench`: what durability costs, measured side by side in one run against the fastest bare
// Temporal equivalent (a workflow with one activity, eagerly started, on the same server with the
// same worker settings and activity options) and against the peer users would pick instead
// (Temporal's AI SDK integration, bench/peer); figures 1 and 4 also against the floor a resumable
// run has in bare Temporal (the bare parked workflow), and beside the floor of the shape it could
// take (the bare workflow that continues as new as it settles). Plain Node, no test runner.
//
// Every ratio is measured once per round, the rounds interleaved so drift in the machine's load
// hits both sides alike, and reported as its median with the spread (min-max) over the rounds.
// `--quick` runs 5 rounds (7 in the full run) with fewer samples in each; `--json` ends with one
// JSON line of every figure; `--cluster` runs against the multi-service cluster (`npm run cluster
// -- start`); `--latency`, `--observers`, `--long-turn`, `--memory`, `--stream`, `--recovery` and
// `--requests` run figure 1, 8, 9, 6, 11, 7 or 12 alone.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import { type Client, WithStartWorkflowOperation } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { Worker, DefaultLogger, Runtime, bundleWorkflowCode } from '@temporalio/worker';
import { type SubagentTurnProvider, TemporalSubagentService } from '../src';
import {
  type FakeChatRequest,
  type ReadyProcess,
  spawnReadyProcess,
  spawnWorkerProcess,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../src/testing';
import {
  type TemporalEnvironment,
  bundleSubagentWorkflows,
  connectTemporal,
  createSpawnProvider,
  createSubagentWorker,
  freePort,
} from '../src/worker';
import { resolveRunSettings } from '../src/client/run-settings';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../src/seam/constants';
import { turnActivityOptions } from '../workflows/definitions';
import { type Timing, observers, timed } from './observers';
import { type LoopProcess, startOurs, startPeer } from './loop-process';
import { type Percentiles, type Spread, describeSpread, percentiles, round, spread } from './stats';
import {
  bareContinuedAtSettle,
  bareEarlyReturn,
  bareParked,
  resumeParkedUpdate,
  settledUpdate,
  wakeParkedUpdate,
} from './baseline-workflows';
import { jemalloc } from './jemalloc';
import { toolLoop } from './tool-loop';
import { type RequestsPerDelegation, markedReading, perDelegation } from './rpcs';
import type { HistoryEvent } from '../src/temporal/run-history';
import { type CallerTimes, STEPS, type Step, epochNow, medianSteps, stepsOf } from './steps';

const flag = (name: string) => process.argv.includes(`--${name}`);
const quick = flag('quick');
const json = flag('json');
/** Rounds of every interleaved figure; quick mode shortens each round, not their number. */
const ROUNDS = quick ? 5 : 7;
/** Figure 1: samples of each kind per round. */
const LATENCY_SAMPLES = quick ? 10 : 30;
/** Figure 2: delegations of each side per block, and of the unmeasured block before a round's four. */
const THROUGHPUT_RUNS = quick ? 200 : 500;
const LEAD_IN_RUNS = 100;
const LONG_TURN_CALLS = 1000;
const STEP_COUNTS = [5, 20, 50];
/** Figure 11: tokens per streamed answer, and the fake model's pace. */
const STREAM_TOKENS = 200;
const STREAM_TOKEN_MS = 10;
/** Figure 12: delegations of each kind and side, 10 at a time, between two readings of the server's counters. */
const REQUEST_BLOCK = 200;
const HEARTBEAT_TIMEOUT_S = 5;
/** Figure 6: a batch of runs that has not parked by then has stalled. */
const PARK_DEADLINE_MS = 180_000;
/**
 * Figure 6 reads the resident set 2 s and 12 s after a batch has parked. Under the settings that
 * rest (REST_WINDOW_MS), it goes on reading it every REST_SAMPLE_MS for two minutes after none and
 * after 1,000 runs parked, and keeps the lowest: the worker at rest. The workflow thread's V8 heap
 * keeps what a burst of runs grew it to (its young generation at 32 MB, garbage in its old space)
 * for up to a minute and a half after the burst, then gives it back at once.
 */
const EARLY_READING_MS = 2000;
const SETTLED_READING_MS = 12_000;
const REST_WINDOW_MS = 120_000;
const REST_SAMPLE_MS = 2000;
/** A directory for the LLM children's file tools, with a file of 200 KiB in lines of 64 characters. */
const benchFiles = mkdtempSync(join(tmpdir(), 'subagent-bench-files-'));
const BIG_FILE = 'big.txt';
writeFileSync(join(benchFiles, BIG_FILE), `${'z'.repeat(63)}\n`.repeat((200 * 1024) / 64));
const log = (line = '') => console.log(line);
const sleep = (ms: number) => new Promise((resolveSleep) => setTimeout(resolveSleep, ms));
const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { id: 'bench' };
const BASELINE_QUEUE = 'bench.baseline';
/** The bare workflows' activity options: those of a run with the default settings, as the no-op providers have. */
const BASELINE_ACTIVITY_OPTIONS = turnActivityOptions(resolveRunSettings(DEFAULT_MAX_PAYLOAD_BYTES));
/** The bundle of the bare workflows (bench/baseline-workflows.ts), made once. */
let baselineBundling: ReturnType<typeof bundleWorkflowCode> | undefined;
const baselineBundle = () =>
  (baselineBundling ??= bundleWorkflowCode({
    workflowsPath: require.resolve('./baseline-workflows'),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  }));
/** The event of a memo change: where the bare parked workflow's settle point is in history. */
const MEMO_CHANGED = proto.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED;
/** A workflow task's completion: a run that continued as new is parked once its first has completed. */
const TASK_COMPLETED = proto.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED;
/** A long poll that answers with a run's close alone, as the SDK's `result()` waits. */
const CLOSE_EVENT = proto.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT;
const results: Record<string, unknown> = {};

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

/**
 * The fake model's one task, read from the conversation so that any number of runs (ours and the
 * peer's) can share it: the first user message says `steps=N` (and optionally `tool=NAME
 * args=JSON`); while fewer than N-1 tool results are in the conversation the model calls the
 * tool, then it answers. A run makes exactly N model calls. `stream=N id=ID` instead answers with
 * N words (`IDw0 IDw1 ...`), STREAM_TOKEN_MS apart when streamed.
 */
function toolTask(request: FakeChatRequest) {
  const messages = (request.body?.messages ?? []) as { role: string; content: unknown }[];
  const first = messages.find((message) => message.role === 'user');
  const said =
    typeof first?.content === 'string'
      ? first.content
      : ((first?.content ?? []) as { text?: string }[]).map((part) => part.text ?? '').join('');
  const streamed = /stream=(\d+) id=(\w+)/.exec(said);
  if (streamed) {
    const words = Array.from({ length: Number(streamed[1]) }, (_, index) => `${streamed[2]}w${index}`);
    return textReply(words.join(' '), { tokenDelayMs: STREAM_TOKEN_MS });
  }
  const steps = Number(/steps=(\d+)/.exec(said)?.[1] ?? 1);
  const tool = /tool=(\w+)/.exec(said)?.[1] ?? 'list_directory';
  const args = JSON.parse(/args=(\{.*\})/.exec(said)?.[1] ?? '{}') as object;
  const toolResults = messages.filter((message) => message.role === 'tool').length;
  return toolResults < steps - 1 ? toolCallReply([{ name: tool, arguments: args }]) : textReply('done');
}

/**
 * A seeded pseudo-random sequence in [0, 1) (mulberry32): the bench shuffles its samples in the
 * same orders in every run.
 */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Runs `samples` one after the other, in an order shuffled by `random`. A sample leaves the server
 * work that runs into the next one's time (a run's close, or the end of one terminated): in a fixed
 * order, ours came after the same bare sample every time, and paid for it.
 */
async function inShuffledOrder(random: () => number, samples: (() => Promise<unknown>)[]): Promise<void> {
  const order = [...samples];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  for (const sample of order) await sample();
}

/** Measures ours and theirs one after the other, ours first or second; the results as [ours, theirs]. */
async function inTurn<T>(oursFirst: boolean, ours: () => Promise<T>, theirs: () => Promise<T>): Promise<[T, T]> {
  if (oursFirst) {
    const first = await ours();
    return [first, await theirs()];
  }
  const first = await theirs();
  return [await ours(), first];
}

/**
 * The server to measure on: the embedded default in memory, serving its metrics (figure 12), or
 * with `--cluster` the running cluster.
 */
async function connect(payloads: string): Promise<{ temporal: TemporalEnvironment; metricsUrl?: string }> {
  const env: Record<string, string> = { SUBAGENT_PAYLOAD_STORE: `file:${payloads}` };
  if (!flag('cluster')) {
    const metricsPort = await freePort();
    return {
      temporal: await connectTemporal({ env, devServer: { dbFilename: undefined, metricsPort } }),
      metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    };
  }
  const state = resolve(__dirname, '..', '.data', 'cluster', 'cluster.json');
  if (!existsSync(state)) throw new Error('--cluster: no cluster here; start one with `npm run cluster -- start`');
  const { address } = JSON.parse(readFileSync(state, 'utf8')) as { address: string };
  return { temporal: await connectTemporal({ env: { ...env, TEMPORAL_ADDRESS: address } }) };
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  // Payloads over 32 KiB are offloaded to files, as with the embedded default (a directory of the
  // run's own, which figure 10's process names too: every worker of a namespace names one store).
  const payloads = mkdtempSync(join(tmpdir(), 'subagent-bench-payloads-'));
  const { temporal, metricsUrl } = await connect(payloads);
  // Stopped by a signal sent to the bench alone (not its process group), it stops its server,
  // then kills the worker and loop processes it spawned, which would otherwise outlive it. A signal
  // that comes meanwhile (tsx relays the one its wrapper got) waits for that too.
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      void temporal.close().finally(() => {
        spawnSync('pkill', ['-KILL', '-P', String(process.pid)]);
        process.exit(128 + constants.signals[signal]);
      });
    });
  }
  const { connection, client, dataConverter } = temporal;
  const serverPid = temporal.devServer?.pid;
  log(
    `Benchmark ${quick ? '--quick' : '(full)'}, ${ROUNDS} interleaved rounds, against ` +
      `${flag('cluster') ? `the cluster at ${temporal.address}` : 'the embedded dev server (in memory)'}`,
  );
  // When the fake model wrote each streamed word (figure 11).
  const emitted = new Map<string, number>();
  const fake = await startFakeOpenAI({
    handler: toolTask,
    onStreamText: (word) => emitted.set(word.trim(), performance.now()),
  });
  const timing = timed();
  const spawnProvider = createSpawnProvider({
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
    runSettings: { maxStepsPerTurn: 1000 },
  });
  // Tool outputs of 200 KiB: the model is sent the newest whole, within a budget.
  const bigOutputs = createSpawnProvider({
    name: 'spawn-big-outputs',
    endpoint: { baseURL: fake.baseURL, model: 'fake-model', maxContextChars: 1_000_000 },
    runSettings: { maxStepsPerTurn: LONG_TURN_CALLS + 10 },
  });
  // The same child without streaming: what streaming adds to history (figure 11).
  const unstreamed = createSpawnProvider({
    name: 'spawn-unstreamed',
    endpoint: { baseURL: fake.baseURL, model: 'fake-model', stream: false },
  });
  const providers = [
    noop('noop', true),
    noop('noop-closing', false),
    timing.provider,
    spawnProvider,
    bigOutputs,
    unstreamed,
  ];
  // The in-process workers, created for the figures that run on them (not for figure 6 alone).
  const both = async <T>(fn: () => Promise<T>): Promise<T> => {
    const subagentWorker = await createSubagentWorker({
      connection,
      providers,
      ...(dataConverter ? { dataConverter } : {}),
    });
    // The baseline: the same worker settings as createSubagentWorker's (heartbeat throttle, sticky
    // timeout, the data converter).
    const baselineWorker = await Worker.create({
      connection,
      namespace: temporal.namespace,
      ...(dataConverter ? { dataConverter } : {}),
      taskQueue: BASELINE_QUEUE,
      workflowBundle: await baselineBundle(),
      activities: {
        async noop() {},
        async parkedTurn() {
          const workflowId = Context.current().info.workflowExecution?.workflowId;
          if (workflowId) timing.record(workflowId, 'turn-start', 1);
        },
      },
      maxHeartbeatThrottleInterval: 1000,
      defaultHeartbeatThrottleInterval: 1000,
      stickyQueueScheduleToStartTimeout: 1000,
    });
    return subagentWorker.runUntil(() => baselineWorker.runUntil(fn));
  };
  const service = new TemporalSubagentService({ client });
  for (const provider of providers) service.registerProvider(provider);
  const bench = new Bench(service, client, temporal.namespace, timing, emitted);

  if (flag('long-turn')) await both(async () => (results.long_turn = await bench.longTurn(bigOutputs.name)));
  else if (flag('observers')) await both(() => observers(temporal.address, serverPid, service, timing, results, quick));
  else if (flag('memory')) await memory(temporal.address, service, bench);
  else if (flag('recovery')) await recovery(temporal.address, service);
  else if (flag('requests')) await both(async () => (results.requests = await bench.requests(metricsUrl)));
  else if (flag('latency')) await both(async () => (results.latency = await bench.latency()));
  else if (flag('stream')) {
    await both(async () => (results.stream = await bench.stream(spawnProvider.name, unstreamed.name)));
  } else {
    // Figure 10's two sides, each a process with its worker and its client.
    const task = {
      address: temporal.address,
      namespace: temporal.namespace,
      baseURL: fake.baseURL,
      model: 'fake-model',
      dir: benchFiles,
    };
    const peer = await startPeer(task);
    const ours = await startOurs({ ...task, payloadDir: payloads });
    try {
      await both(async () => {
        await bench.rounds({ ours, peer });
        results.requests = await bench.requests(metricsUrl);
        results.stream = await bench.stream(spawnProvider.name, unstreamed.name);
        await bench.historyPerCall(spawnProvider.name, bigOutputs.name);
        // 9. One turn of 1,000 model calls reading 200 KiB each (the full run only).
        if (!quick) results.long_turn = await bench.longTurn(bigOutputs.name);
        await observers(temporal.address, serverPid, service, timing, results, quick);
      });
    } finally {
      await Promise.all([ours.close(), peer.close()]);
    }
    await memory(temporal.address, service, bench);
    await recovery(temporal.address, service);
  }
  await temporal.close();
  await fake.close();
  if (json) console.log(JSON.stringify(results));
}

/** Figure 10 at one step count: wall time per step of ours, the peer's and the bare loop's, and history per step. */
interface LoopFigure {
  ours_per_step_ms: { p50: number; p90: number };
  peer_per_step_ms: { p50: number; p90: number };
  bare_per_step_ms: { p50: number; p90: number };
  per_step_ratio: Spread;
  ours_history_bytes_per_step: number;
  peer_history_bytes_per_step: number;
  history_bytes_ratio: Spread;
}

/** A figure-1 sample: its latency, the caller's times, and the run whose history holds its steps. */
interface Sample {
  ms: number;
  workflowId: string;
  /** The first run of the workflow (undefined: its only one). */
  runId: string | undefined;
  caller: CallerTimes;
}

const sample = (workflowId: string, runId: string | undefined, calledAt: number, hadAt: number): Sample => ({
  ms: hadAt - calledAt,
  workflowId,
  runId,
  caller: { calledAt, hadAt },
});

/**
 * Figure 1's kinds, in the order their samples are shuffled from: ours (a parked delegation), a
 * delegation of a provider that closes as it settles, the eager bare round trip (the reference),
 * the bare round trip without eager start, the bare parked workflow (the floor), the bare
 * workflow that continues as new as it settles, and the bare parked workflow whose caller has its
 * settle point from an update sent with its start (early return).
 */
const LATENCY_KINDS = ['facade', 'closing', 'eager', 'lazy', 'parked', 'continued', 'early'] as const;
type LatencyKind = (typeof LATENCY_KINDS)[number];
const LATENCY_LABELS: Record<LatencyKind, string> = {
  facade: 'facade (parked)',
  closing: 'facade (closing)',
  eager: 'bare, eager start',
  lazy: 'bare, no eager',
  parked: 'bare parked',
  continued: 'bare continued',
  early: 'bare early return',
};

/**
 * Figure 1, round by round: one sample of each kind at a time, in shuffled orders; each round's
 * p50s as ratios, and every sample's steps by its history, read once the round's samples are done.
 */
class LatencyFigure {
  private readonly latencies = new Map(LATENCY_KINDS.map((kind) => [kind, [] as number[]]));
  private readonly steps = new Map(LATENCY_KINDS.map((kind) => [kind, [] as Record<Step, number>[]]));
  private readonly ratios = {
    facade: [] as number[],
    toLazy: [] as number[],
    closing: [] as number[],
    floor: [] as number[],
    toFloor: [] as number[],
    continued: [] as number[],
    early: [] as number[],
  };

  constructor(
    private readonly bench: Bench,
    private readonly samples: number,
  ) {}

  once(kind: LatencyKind): Promise<Sample> {
    const { bench } = this;
    switch (kind) {
      case 'facade':
        return bench.facadeOnce();
      case 'closing':
        return bench.facadeOnce('noop-closing');
      case 'eager':
        return bench.baselineOnce();
      case 'lazy':
        return bench.baselineOnce(false);
      case 'parked':
        return bench.parkedLatencyOnce();
      case 'continued':
        return bench.continuedLatencyOnce();
      case 'early':
        return bench.earlyReturnOnce();
    }
  }

  /** One round; what the round's line tells of it. */
  async round(random: () => number): Promise<string> {
    const taken = new Map(LATENCY_KINDS.map((kind) => [kind, [] as Sample[]]));
    for (let i = 0; i < this.samples; i++) {
      await inShuffledOrder(
        random,
        LATENCY_KINDS.map((kind) => async () => taken.get(kind)!.push(await this.once(kind))),
      );
    }
    const p50 = (kind: LatencyKind) => percentiles(taken.get(kind)!.map(({ ms }) => ms)).p50;
    const { ratios } = this;
    ratios.facade.push(p50('facade') / p50('eager'));
    ratios.toLazy.push(p50('facade') / p50('lazy'));
    ratios.closing.push(p50('closing') / p50('eager'));
    ratios.floor.push(p50('parked') / p50('eager'));
    ratios.toFloor.push(p50('facade') / p50('parked'));
    ratios.continued.push(p50('continued') / p50('eager'));
    ratios.early.push(p50('early') / p50('eager'));
    for (const [kind, samples] of taken) {
      this.latencies.get(kind)!.push(...samples.map(({ ms }) => ms));
      for (const { workflowId, runId, caller } of samples) {
        const steps = stepsOf(await this.bench.history(workflowId, runId), caller);
        if (steps) this.steps.get(kind)!.push(steps);
      }
    }
    return (
      `${ratios.facade.at(-1)!.toFixed(3)} (closing ${ratios.closing.at(-1)!.toFixed(3)}, ` +
      `parked floor ${ratios.floor.at(-1)!.toFixed(3)})`
    );
  }

  /** Logs the figure; its JSON. */
  report() {
    const { ratios } = this;
    const byKind = (kind: LatencyKind) => [kind, percentiles(this.latencies.get(kind)!)] as const;
    const {
      facade: f,
      closing: cl,
      eager: e,
      lazy: l,
      parked: pl,
      continued: cn,
      early: er,
    } = Object.fromEntries(LATENCY_KINDS.map(byKind)) as Record<LatencyKind, Percentiles>;
    const latencyRatio = spread(ratios.facade, { atMost: 1.1 });
    const closingRatio = spread(ratios.closing, { atMost: 1.1 });
    const steps = Object.fromEntries(LATENCY_KINDS.map((kind) => [kind, medianSteps(this.steps.get(kind)!)]));
    log(`1. Delegation latency, start -> result, ${this.samples} runs of each per round:`);
    log(`   facade (no-op provider, eager start)      p50 ${f.p50.toFixed(1)} ms   p95 ${f.p95.toFixed(1)} ms`);
    log(`   bare workflow + 1 activity, eager start   p50 ${e.p50.toFixed(1)} ms   p95 ${e.p95.toFixed(1)} ms`);
    log(`   bare workflow + 1 activity, no eager      p50 ${l.p50.toFixed(1)} ms   p95 ${l.p95.toFixed(1)} ms`);
    log(`   ratio to the eager one (p50)              ${describeSpread(latencyRatio)}`);
    log(`   ratio to the one without eager start      ${describeSpread(spread(ratios.toLazy))}`);
    log(`   bare parked workflow, to its settle point p50 ${pl.p50.toFixed(1)} ms   p95 ${pl.p95.toFixed(1)} ms`);
    log(`     its ratio to the eager one (the floor)  ${describeSpread(spread(ratios.floor))}`);
    log(`     ours to it                              ${describeSpread(spread(ratios.toFloor))}`);
    log(`   facade, a provider that closes as it settles p50 ${cl.p50.toFixed(1)} ms   p95 ${cl.p95.toFixed(1)} ms`);
    log(`     its ratio to the eager one              ${describeSpread(closingRatio)}`);
    log(`   bare workflow that continues as new as it settles, to its close p50 ${cn.p50.toFixed(1)} ms`);
    log(`     its ratio to the eager one              ${describeSpread(spread(ratios.continued))}`);
    log(`   bare parked workflow started with an update, to the update's answer p50 ${er.p50.toFixed(1)} ms`);
    log(`     its ratio to the eager one              ${describeSpread(spread(ratios.early))}`);
    log(`   step by step, p50 of each step in ms, by the server's event times (bench/steps.ts):`);
    log(`     ${''.padEnd(18)}${STEPS.map((step) => step.padStart(15)).join('')}`);
    for (const kind of LATENCY_KINDS) {
      const row = STEPS.map((step) => steps[kind]![step].toFixed(2).padStart(15)).join('');
      log(`     ${LATENCY_LABELS[kind].padEnd(18)}${row}`);
    }
    return {
      facade_p50_ms: round(f.p50),
      eager_baseline_p50_ms: round(e.p50),
      baseline_p50_ms: round(l.p50),
      ratio: latencyRatio,
      ratio_to_lazy_baseline: spread(ratios.toLazy),
      parked_baseline_p50_ms: round(pl.p50),
      parked_baseline_ratio: spread(ratios.floor),
      ratio_to_parked_baseline: spread(ratios.toFloor),
      closing_p50_ms: round(cl.p50),
      closing_ratio: closingRatio,
      continued_baseline_p50_ms: round(cn.p50),
      continued_baseline_ratio: spread(ratios.continued),
      early_return_baseline_p50_ms: round(er.p50),
      early_return_baseline_ratio: spread(ratios.early),
      steps_ms: steps,
    };
  }
}

/** The figures measured against the bare workflow and the peer, on the in-process workers. */
class Bench {
  constructor(
    private readonly service: TemporalSubagentService,
    private readonly client: Client,
    private readonly namespace: string,
    private readonly timing: Timing,
    /** When the fake model wrote each streamed word. */
    private readonly emitted: ReadonlyMap<string, number>,
  ) {}

  /** start -> result of a no-op delegation. */
  async facadeOnce(provider = 'noop'): Promise<Sample> {
    const calledAt = epochNow();
    const run = this.service.start(provider, { prompt: text('noop'), parent });
    await run.result;
    const hadAt = epochNow();
    await run.dispose();
    return sample(run.id, undefined, calledAt, hadAt);
  }

  /** start -> result of the bare workflow with one activity. */
  async baselineOnce(requestEagerStart = true): Promise<Sample> {
    const calledAt = epochNow();
    const handle = await this.client.workflow.start('bareRoundTrip', {
      args: [BASELINE_ACTIVITY_OPTIONS],
      taskQueue: BASELINE_QUEUE,
      workflowId: `bare-${randomUUID()}`,
      requestEagerStart,
    });
    await handle.result();
    return sample(handle.workflowId, handle.firstExecutionRunId, calledAt, epochNow());
  }

  /**
   * The bare parked workflow (the contract's shape with nothing in it): start -> its settle point,
   * read from history as our caller reads it (a long poll per new batch of events). It is left
   * parked.
   */
  private async parkedStart(taskQueue = BASELINE_QUEUE) {
    const workflowId = `bare-parked-${randomUUID()}`;
    const calledAt = epochNow();
    const handle = await this.client.workflow.start(bareParked, {
      args: [BASELINE_ACTIVITY_OPTIONS],
      taskQueue,
      workflowId,
      // Eager only where this process has the queue's worker.
      requestEagerStart: taskQueue === BASELINE_QUEUE,
    });
    await this.parkedSettle(workflowId, handle.firstExecutionRunId);
    return { workflowId, handle, latency: sample(workflowId, handle.firstExecutionRunId, calledAt, epochNow()) };
  }

  /** A bare parked workflow on `taskQueue` (figure 6's reference worker), once it has settled. */
  async parkBare(taskQueue: string) {
    return (await this.parkedStart(taskQueue)).handle;
  }

  /** The bare parked workflow's start -> its settle point; then it is ended. */
  async parkedLatencyOnce(): Promise<Sample> {
    const { handle, latency } = await this.parkedStart();
    await handle.terminate();
    return latency;
  }

  /**
   * A parked bare workflow's `resume` update (and a `wake`, as ours sends) -> the continued run's
   * activity starts.
   */
  async parkedResumeOnce(): Promise<number> {
    const { workflowId, handle } = await this.parkedStart();
    const resumedAt = performance.now();
    await handle.executeUpdate(resumeParkedUpdate);
    handle.executeUpdate(wakeParkedUpdate).catch(() => undefined);
    const resume = (await this.timing.at(workflowId, 'turn-start', 1)) - resumedAt;
    // Once its activity has completed (no completion for a closed run), the continued run is ended.
    await this.parkedSettle(workflowId);
    await handle.terminate();
    return resume;
  }

  /**
   * The bare workflow that continues as new as it settles: start -> its close (the continue-as-new),
   * read by a long poll of the close alone. Resolves with the run it continued as, left parked.
   */
  private async continuedStart() {
    const workflowId = `bare-continued-${randomUUID()}`;
    const calledAt = epochNow();
    const handle = await this.client.workflow.start(bareContinuedAtSettle, {
      args: [BASELINE_ACTIVITY_OPTIONS],
      taskQueue: BASELINE_QUEUE,
      workflowId,
      requestEagerStart: true,
    });
    const parkedRunId = await this.closeOf(workflowId, handle.firstExecutionRunId);
    const latency = sample(workflowId, handle.firstExecutionRunId, calledAt, epochNow());
    if (parkedRunId === undefined) throw new Error(`${workflowId} closed without continuing as new`);
    return { workflowId, parkedRunId, latency };
  }

  /** The bare parked workflow started with an update: start -> the update's answer; then it is ended. */
  async earlyReturnOnce(): Promise<Sample> {
    const workflowId = `bare-early-${randomUUID()}`;
    const calledAt = epochNow();
    const start = new WithStartWorkflowOperation(bareEarlyReturn, {
      args: [BASELINE_ACTIVITY_OPTIONS],
      taskQueue: BASELINE_QUEUE,
      workflowId,
      workflowIdConflictPolicy: 'FAIL',
    });
    await this.client.workflow.executeUpdateWithStart(settledUpdate, { startWorkflowOperation: start });
    const hadAt = epochNow();
    await (await start.workflowHandle()).terminate();
    return sample(workflowId, undefined, calledAt, hadAt);
  }

  /** Its start -> its settle point; then it is ended, once parked. */
  async continuedLatencyOnce(): Promise<Sample> {
    const { workflowId, parkedRunId, latency } = await this.continuedStart();
    await this.endParked(workflowId, parkedRunId);
    return latency;
  }

  /** Its parked run's `resume` update -> that run's activity starts (no continue-as-new before it). */
  async continuedResumeOnce(): Promise<number> {
    const { workflowId, parkedRunId } = await this.continuedStart();
    const handle = this.client.workflow.getHandle(workflowId, parkedRunId);
    const resumedAt = performance.now();
    await handle.executeUpdate(resumeParkedUpdate);
    const resume = (await this.timing.at(workflowId, 'turn-start', 1)) - resumedAt;
    // Once the resumed run has settled (no completion for a closed run) and the run it continued
    // as is parked, the chain is ended.
    const next = await this.closeOf(workflowId, parkedRunId);
    if (next === undefined) throw new Error(`${workflowId} closed without continuing as new`);
    await this.endParked(workflowId, next);
    return resume;
  }

  /** Until run `runId` of `workflowId` closes; the run it continued as, if it did. */
  private async closeOf(workflowId: string, runId: string): Promise<string | undefined> {
    for (;;) {
      const page = await this.client.workflowService.getWorkflowExecutionHistory({
        namespace: this.namespace,
        execution: { workflowId, runId },
        waitNewEvent: true,
        historyEventFilterType: CLOSE_EVENT,
      });
      const close = page.history?.events?.at(-1);
      if (close) return close.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    }
  }

  /** Until the bare parked workflow's run (by default its current one) records its settle point. */
  private parkedSettle(workflowId: string, runId?: string): Promise<void> {
    return this.untilEvent(workflowId, runId, MEMO_CHANGED);
  }

  /**
   * Ends a run that continued as new once it is parked: ended before its first workflow task has
   * completed, that task would still run on the worker in the next sample's time.
   */
  private async endParked(workflowId: string, runId: string): Promise<void> {
    await this.untilEvent(workflowId, runId, TASK_COMPLETED);
    await this.client.workflow.getHandle(workflowId, runId).terminate();
  }

  /** Until run `runId` of `workflowId` (by default its current one) records an event of type `eventType`. */
  private async untilEvent(workflowId: string, runId: string | undefined, eventType: number): Promise<void> {
    let nextPageToken: Uint8Array | undefined;
    for (;;) {
      const page = await this.client.workflowService.getWorkflowExecutionHistory({
        namespace: this.namespace,
        execution: { workflowId, ...(runId ? { runId } : {}) },
        waitNewEvent: true,
        ...(nextPageToken ? { nextPageToken } : {}),
      });
      if (page.history?.events?.some((event) => event.eventType === eventType)) return;
      if (page.nextPageToken?.length) nextPageToken = page.nextPageToken;
    }
  }

  /** Run `runId` of `workflowId` (by default its current one): its history as it is now. */
  async history(workflowId: string, runId: string | undefined): Promise<HistoryEvent[]> {
    return (await this.client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
  }

  /** start -> result of the agent loop's shape with nothing in it: two activities per step. */
  async bareLoopOnce(steps: number): Promise<number> {
    const started = performance.now();
    const handle = await this.client.workflow.start('bareToolLoop', {
      args: [BASELINE_ACTIVITY_OPTIONS, steps],
      taskQueue: BASELINE_QUEUE,
      workflowId: `bare-loop-${randomUUID()}`,
      requestEagerStart: true,
    });
    await handle.result();
    return performance.now() - started;
  }

  /** Completions per second of `total` calls of `one`, `concurrency` at a time. */
  async throughput(total: number, one: () => Promise<unknown>, concurrency = 100): Promise<number> {
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < total) await one();
      }),
    );
    return total / ((performance.now() - started) / 1000);
  }

  /**
   * Steering: a message sent during a turn -> the provider's next turn starts with it, counted from
   * when the turn ended (or from the send, if that came later). Resume: resume() -> the provider
   * starts the new segment's turn.
   */
  async steerAndResume(): Promise<{ steering: number; resume: number }> {
    const { service, timing } = this;
    const script = [{ delayMs: 150, reply: 'a' }, { reply: 'b' }, { reply: 'c' }];
    const run = service.start('timed', { prompt: text('steer me'), parent, agentOptions: { script } });
    await timing.at(run.id, 'turn-start', 0);
    const sent = performance.now();
    run.sendMessage!(text('steering'));
    const seen = await timing.at(run.id, 'turn-start', 1);
    const steering = seen - Math.max(sent, await timing.at(run.id, 'turn-end', 0));
    await run.result;
    const resumedAt = performance.now();
    const resumed = run.resume!(text('again'));
    const resume = (await timing.at(run.id, 'turn-start', 2)) - resumedAt;
    await resumed.result;
    await resumed.dispose();
    return { steering, resume };
  }

  /**
   * 12. The requests a delegation costs the server, against the bare workflow's: a closing
   * delegation (figure 2's) and a parked one (figure 1's, disposed; the bare parked workflow is
   * terminated), each side in a block of its own. Undefined on a server whose metrics the bench
   * cannot read (the cluster).
   */
  async requests(metricsUrl: string | undefined) {
    if (metricsUrl === undefined) return undefined;
    const reading = () =>
      markedReading(metricsUrl, this.namespace, () =>
        this.client.workflowService.describeNamespace({ namespace: this.namespace }),
      );
    const block = async (one: () => Promise<unknown>): Promise<RequestsPerDelegation> => {
      const before = await reading();
      await this.throughput(REQUEST_BLOCK, one, 10);
      return perDelegation(before, await reading(), REQUEST_BLOCK);
    };
    const figure = {
      closing: {
        ours: await block(() => this.facadeOnce('noop-closing')),
        bare: await block(() => this.baselineOnce()),
      },
      parked: { ours: await block(() => this.facadeOnce()), bare: await block(() => this.parkedLatencyOnce()) },
    };
    log(`12. Requests per delegation, by the server's counters, ${REQUEST_BLOCK} of each, 10 at a time:`);
    for (const [kind, { ours, bare }] of Object.entries(figure)) {
      log(
        `   ${kind.padEnd(7)} frontend: ours ${ours.frontend}, bare ${bare.frontend}   ` +
          `all services: ours ${ours.all_services}, bare ${bare.all_services}`,
      );
      const operations = new Set([...Object.keys(ours.by_operation), ...Object.keys(bare.by_operation)]);
      for (const operation of [...operations].filter((key) => key.startsWith('frontend/'))) {
        const [a = 0, b = 0] = [ours.by_operation[operation], bare.by_operation[operation]];
        log(`     ${operation.slice('frontend/'.length).padEnd(40)} ${String(a).padStart(5)} ${String(b).padStart(5)}`);
      }
    }
    return figure;
  }

  /** An LLM child whose one turn makes `calls` model calls (all but the last asking for `tool`); its history in all its runs. */
  toolLoop(provider: string, calls: number, tool = 'list_directory', args: object = {}) {
    return toolLoop(this.service, this.client, { provider, calls, cwd: benchFiles, tool, args });
  }

  /** Figure 1 alone: ROUNDS rounds after a warm-up of each of its kinds. */
  async latency() {
    const figure = new LatencyFigure(this, LATENCY_SAMPLES);
    for (let i = 0; i < 10; i++) for (const kind of LATENCY_KINDS) await figure.once(kind);
    const random = seeded(18);
    for (let r = 0; r < ROUNDS; r++) log(`   round ${r + 1}/${ROUNDS}: latency ${await figure.round(random)}`);
    return figure.report();
  }

  /**
   * Figures 1-4 and 10, in ROUNDS interleaved rounds. Each round measures the facade and the bare
   * workflow sample by sample, in shuffled orders (figure 2 in blocks, ABBA), and ours and the
   * peer's agent loop (each in its own process), and yields one ratio of each.
   */
  async rounds({ ours: oursLoop, peer }: { ours: LoopProcess; peer: LoopProcess }): Promise<void> {
    const steerSamples = quick ? 8 : 15;
    const loopSamples = 3;
    // Warm-up: every path once, JIT and connections and caches.
    for (let i = 0; i < 10; i++) {
      await this.facadeOnce();
      await this.baselineOnce();
      await this.baselineOnce(false);
      await this.parkedLatencyOnce();
      await this.parkedResumeOnce();
      await this.continuedLatencyOnce();
      await this.continuedResumeOnce();
      await this.earlyReturnOnce();
    }
    await this.throughput(100, () => this.facadeOnce('noop-closing'));
    await this.throughput(100, () => this.baselineOnce());
    await oursLoop.run(5);
    await peer.run(5);

    const latency = new LatencyFigure(this, LATENCY_SAMPLES);
    // Figure 4's references: the bare parked workflow (the contract's shape with nothing in it), and
    // the bare workflow that continues as new as it settles (the floor of the shape ours could take).
    const resumes = {
      parked: [] as number[],
      floor: [] as number[],
      toFloor: [] as number[],
      continued: [] as number[],
      continuedFloor: [] as number[],
    };
    const rates = { facade: [] as number[], baseline: [] as number[], ratio: [] as number[] };
    const steer = { steering: [] as number[], resume: [] as number[] };
    const steeringRatio: number[] = [];
    const resumeRatio: number[] = [];
    const loops = new Map(
      STEP_COUNTS.map((steps) => [
        steps,
        {
          ours: [] as number[],
          peer: [] as number[],
          bare: [] as number[],
          ratio: [] as number[],
          oursBytes: 0,
          peerBytes: 0,
        },
      ]),
    );
    const random = seeded(18);
    for (let r = 0; r < ROUNDS; r++) {
      const oursFirst = r % 2 === 0;
      const latencyRound = await latency.round(random);

      // Two blocks of each side in the order ABBA, so that a drift in the machine's speed within
      // the round hits both alike; a side's rate is over its two blocks (their harmonic mean).
      const oursRate = (runs = THROUGHPUT_RUNS) => this.throughput(runs, () => this.facadeOnce('noop-closing'));
      const bareRate = (runs = THROUGHPUT_RUNS) => this.throughput(runs, () => this.baselineOnce());
      // An unmeasured block of the side that goes first comes before them, so that each side has one
      // block after a block of its own and one after the other's. Without it the first block followed
      // figure 1's samples, and took in what their runs' ends left the server to do.
      await (oursFirst ? oursRate : bareRate)(LEAD_IN_RUNS);
      const [ours1, bare1] = await inTurn(oursFirst, oursRate, bareRate);
      const [ours2, bare2] = await inTurn(!oursFirst, oursRate, bareRate);
      const overBoth = (a: number, b: number) => 2 / (1 / a + 1 / b);
      const facadeRate = overBoth(ours1, ours2);
      const baselineRate = overBoth(bare1, bare2);
      const throughputRatio = facadeRate / baselineRate;
      rates.facade.push(facadeRate);
      rates.baseline.push(baselineRate);
      rates.ratio.push(throughputRatio);

      // Their references are measured alongside them, sample by sample, in shuffled orders: two
      // bare round trips and the resumes of the bare parked workflow and of the one that continues
      // as new as it settles.
      const steering: number[] = [];
      const resume: number[] = [];
      const roundTrip: number[] = [];
      const parkedResume: number[] = [];
      const continuedResume: number[] = [];
      for (let i = 0; i < steerSamples; i++) {
        await inShuffledOrder(random, [
          async () => {
            const sample = await this.steerAndResume();
            steering.push(sample.steering);
            resume.push(sample.resume);
          },
          async () => roundTrip.push((await this.baselineOnce()).ms),
          async () => roundTrip.push((await this.baselineOnce()).ms),
          async () => parkedResume.push(await this.parkedResumeOnce()),
          async () => continuedResume.push(await this.continuedResumeOnce()),
        ]);
      }
      const roundTripP50 = percentiles(roundTrip).p50;
      steer.steering.push(...steering);
      steer.resume.push(...resume);
      resumes.parked.push(...parkedResume);
      steeringRatio.push(percentiles(steering).p50 / roundTripP50);
      resumeRatio.push(percentiles(resume).p50 / roundTripP50);
      resumes.floor.push(percentiles(parkedResume).p50 / roundTripP50);
      resumes.toFloor.push(percentiles(resume).p50 / percentiles(parkedResume).p50);
      resumes.continued.push(...continuedResume);
      resumes.continuedFloor.push(percentiles(continuedResume).p50 / roundTripP50);

      for (const [steps, loop] of loops) {
        const oursPerStep: number[] = [];
        const theirs: number[] = [];
        for (let i = 0; i < loopSamples; i++) {
          const oursOnce = async () => {
            const run = await oursLoop.run(steps);
            oursPerStep.push(run.wall_ms / steps);
            loop.oursBytes = run.history_bytes;
          };
          const peerOnce = async () => {
            const run = await peer.run(steps);
            theirs.push(run.wall_ms / steps);
            loop.peerBytes = run.history_bytes;
          };
          await inTurn((r + i) % 2 === 0, oursOnce, peerOnce);
          loop.bare.push((await this.bareLoopOnce(steps)) / steps);
        }
        loop.ours.push(...oursPerStep);
        loop.peer.push(...theirs);
        loop.ratio.push(percentiles(oursPerStep).p50 / percentiles(theirs).p50);
      }
      log(
        `   round ${r + 1}/${ROUNDS}: latency ${latencyRound}   throughput ${throughputRatio.toFixed(3)}   ` +
          `steering ${steeringRatio.at(-1)!.toFixed(3)}   resume ${resumeRatio.at(-1)!.toFixed(3)} ` +
          `(parked floor ${resumes.floor.at(-1)!.toFixed(3)})   agent loop ${[...loops.values()].map((loop) => loop.ratio.at(-1)!.toFixed(3)).join(' / ')}`,
      );
    }

    results.latency = latency.report();

    const throughputRatio = spread(rates.ratio, { atLeast: 0.9 });
    results.throughput = {
      facade_per_s: round(percentiles(rates.facade).p50),
      baseline_per_s: round(percentiles(rates.baseline).p50),
      ratio: throughputRatio,
    };
    log(`2. Throughput, two blocks of ${THROUGHPUT_RUNS} delegations of each per round (ABBA) at concurrency 100:`);
    log(
      `   facade p50 ${percentiles(rates.facade).p50.toFixed(1)}/s   bare workflow, eager start ` +
        `${percentiles(rates.baseline).p50.toFixed(1)}/s   ratio ${describeSpread(throughputRatio)}`,
    );

    const s = percentiles(steer.steering);
    const rs = percentiles(steer.resume);
    const steeringSpread = spread(steeringRatio, { atMost: 1.0 });
    const resumeSpread = spread(resumeRatio, { atMost: 1.5 });
    results.steering = { p50_ms: round(s.p50), p95_ms: round(s.p95), ratio_to_round_trip: steeringSpread };
    const pr = percentiles(resumes.parked);
    results.resume = {
      p50_ms: round(rs.p50),
      p95_ms: round(rs.p95),
      ratio_to_round_trip: resumeSpread,
      parked_baseline_p50_ms: round(pr.p50),
      parked_baseline_ratio: spread(resumes.floor),
      ratio_to_parked_baseline: spread(resumes.toFloor),
      continued_baseline_p50_ms: round(percentiles(resumes.continued).p50),
      continued_baseline_ratio: spread(resumes.continuedFloor),
    };
    log(
      `3. Steering, turn boundary -> the provider's next turn with the message, ${steerSamples} per round, ` +
        `beside two bare round trips each:`,
    );
    log(
      `   p50 ${s.p50.toFixed(1)} ms   p95 ${s.p95.toFixed(1)} ms   to the bare round trip ${describeSpread(steeringSpread)}`,
    );
    log(`4. Resume, resume() -> the provider's new turn, same samples:`);
    log(
      `   p50 ${rs.p50.toFixed(1)} ms   p95 ${rs.p95.toFixed(1)} ms   to the bare round trip ${describeSpread(resumeSpread)}`,
    );
    log(
      `   bare parked workflow, resume -> its activity p50 ${pr.p50.toFixed(1)} ms   to the bare round trip ` +
        `(the floor) ${describeSpread(spread(resumes.floor))}   ours to it ${describeSpread(spread(resumes.toFloor))}`,
    );
    log(
      `   bare workflow that continues as new as it settles, resume -> its activity p50 ` +
        `${percentiles(resumes.continued).p50.toFixed(1)} ms   to the bare round trip ${describeSpread(spread(resumes.continuedFloor))}`,
    );

    log(
      `10. Agent loop against a zero-latency fake model, wall time per step (model call + tool call), ` +
        `${loopSamples} runs per round, ours against @temporalio/ai-sdk 1.23.0 on the same server:`,
    );
    const agentLoop: Record<string, LoopFigure> = {};
    for (const [steps, loop] of loops) {
      const ours = percentiles(loop.ours);
      const theirs = percentiles(loop.peer);
      const bare = percentiles(loop.bare);
      const ratio = spread(loop.ratio, { atMost: 0.8 });
      const bytesRatio = spread([loop.oursBytes / loop.peerBytes], { atMost: 0.5 });
      agentLoop[steps] = {
        ours_per_step_ms: { p50: round(ours.p50), p90: round(ours.p90) },
        peer_per_step_ms: { p50: round(theirs.p50), p90: round(theirs.p90) },
        bare_per_step_ms: { p50: round(bare.p50), p90: round(bare.p90) },
        per_step_ratio: ratio,
        ours_history_bytes_per_step: Math.round(loop.oursBytes / steps),
        peer_history_bytes_per_step: Math.round(loop.peerBytes / steps),
        history_bytes_ratio: bytesRatio,
      };
      log(
        `   ${String(steps).padStart(2)} steps: ours p50 ${ours.p50.toFixed(1)} ms (p90 ${ours.p90.toFixed(1)})   ` +
          `peer p50 ${theirs.p50.toFixed(1)} ms (p90 ${theirs.p90.toFixed(1)})   ` +
          `bare p50 ${bare.p50.toFixed(1)} ms (p90 ${bare.p90.toFixed(1)})   ours/peer ${describeSpread(ratio)}`,
      );
      log(
        `            history bytes per step: ours ${Math.round(loop.oursBytes / steps)}   peer ${Math.round(loop.peerBytes / steps)}   ` +
          `ratio ${bytesRatio.median.toFixed(3)}   goal <= 0.5: ${bytesRatio.verdict}`,
      );
    }
    results.agent_loop = agentLoop;
    const each = (pick: (figure: LoopFigure) => Spread) =>
      Object.fromEntries(Object.entries(agentLoop).map(([steps, figure]) => [steps, pick(figure)]));
    results.peer = {
      package: '@temporalio/ai-sdk',
      version: '1.23.0',
      per_step_ratio: each((figure) => figure.per_step_ratio),
      history_bytes_ratio: each((figure) => figure.history_bytes_ratio),
    };
  }

  /**
   * 11. Streaming: from the fake model writing a word to the caller's `run.events()` yielding the
   * batch that holds it (p50, p99), and the history bytes streaming adds per 1,000 tokens (the
   * same answer with streaming off, subtracted).
   */
  async stream(streamed: string, unstreamed: string) {
    const samples = quick ? 2 : 4;
    const latencies: number[] = [];
    let added = 0;
    for (let sample = 0; sample < samples; sample++) {
      const id = `s${sample}${randomUUID().slice(0, 6)}`;
      const prompt = text(`stream=${STREAM_TOKENS} id=${id}`);
      const run = this.service.start(streamed, { prompt, parent });
      for await (const event of run.events!()) {
        if (event.type === 'text-delta') {
          const now = performance.now();
          for (const word of event.text.split(/\s+/).filter(Boolean)) latencies.push(now - this.emitted.get(word)!);
        }
        if (event.type === 'settled') break;
      }
      const plain = this.service.start(unstreamed, { prompt: text(`stream=${STREAM_TOKENS} id=${id}x`), parent });
      await plain.result;
      added += (await this.historyBytes(run.id)) - (await this.historyBytes(plain.id));
      await Promise.all([run.dispose(), plain.dispose()]);
    }
    const { p50, p99 } = percentiles(latencies);
    const perThousand = Math.round((added / samples / STREAM_TOKENS) * 1000);
    log(
      `11. Streaming, ${samples} answers of ${STREAM_TOKENS} tokens ${STREAM_TOKEN_MS} ms apart, the fake model writing a ` +
        `token -> run.events() yielding it:`,
    );
    log(
      `   p50 ${p50.toFixed(1)} ms   p99 ${p99.toFixed(1)} ms   history bytes added per 1,000 tokens ${perThousand} ` +
        `(${latencies.length} tokens seen streamed)`,
    );
    return { p50_ms: round(p50), p99_ms: round(p99), history_bytes_per_1000_tokens: perThousand };
  }

  private async historyBytes(runId: string): Promise<number> {
    const { raw } = await this.client.workflow.getHandle(runId).describe();
    return Number(raw.workflowExecutionInfo?.historySizeBytes ?? 0);
  }

  /**
   * 5. History bytes per model call of an LLM child that keeps calling a tool: small outputs (a
   * directory listing), and 200 KiB ones (a file read), offloaded to the payload store.
   */
  async historyPerCall(small: string, big: string): Promise<void> {
    const perCall: Record<string, number> = {};
    const perCallBig: Record<string, number> = {};
    for (const calls of [10, 50, 200]) {
      perCall[calls] = (await this.toolLoop(small, calls)).bytesPerCall;
      perCallBig[calls] = (await this.toolLoop(big, calls, 'read_file', { path: BIG_FILE })).bytesPerCall;
    }
    results.history_bytes_per_call = { ...perCall, big_outputs_200_kib: perCallBig };
    log(`5. History bytes per model call (model call + tool call per step, fake model server):`);
    log(`   10 calls ${perCall[10]}   50 calls ${perCall[50]}   200 calls ${perCall[200]}   goal: flat`);
    log(
      `   200 KiB tool outputs, offloaded: 10 calls ${perCallBig[10]}   50 calls ${perCallBig[50]}   ` +
        `200 calls ${perCallBig[200]}   goal: under 2,048`,
    );
  }

  /** 9. One turn of 1,000 model calls, each tool output 200 KiB. */
  async longTurn(provider: string) {
    const { bytes, runs, ms, bytesPerCall } = await this.toolLoop(provider, LONG_TURN_CALLS, 'read_file', {
      path: BIG_FILE,
    });
    log(
      `9. One turn of ${LONG_TURN_CALLS} model calls, each tool output 200 KiB (offloaded; model budget 1,000,000 characters):`,
    );
    log(
      `   history ${(bytes / 1024 / 1024).toFixed(2)} MB over ${runs} runs (${bytesPerCall} bytes per call), ` +
        `${(ms / 1000).toFixed(1)} s   goal: under 10 MB`,
    );
    return {
      calls: LONG_TURN_CALLS,
      history_bytes: bytes,
      runs,
      seconds: round(ms / 1000),
      bytes_per_call: bytesPerCall,
    };
  }
}

/**
 * Figures 6 and 7 run workers as processes of their own, to measure and to kill them: ours, and
 * figure 6's reference, the bare workflows' (bench/bare-worker.ts).
 */
async function workerProcesses(address: string) {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-bench-'));
  const bundlePath = join(dir, 'bundle.js');
  writeFileSync(bundlePath, (await bundleSubagentWorkflows()).code);
  const bareBundlePath = join(dir, 'bare-bundle.js');
  writeFileSync(bareBundlePath, (await baselineBundle()).code);
  return {
    subagent: (name: string, eventsFile: string, extra: Record<string, string> = {}, nodeArgs?: string[]) =>
      spawnWorkerProcess(
        {
          TEMPORAL_TEST_ADDRESS: address,
          TEMPORAL_TEST_BUNDLE: bundlePath,
          PROVIDER_NAME: name,
          EVENTS_FILE: eventsFile,
          ...extra,
        },
        undefined,
        { nodeArgs },
      ),
    bare: (taskQueue: string, extra: Record<string, string> = {}, nodeArgs?: string[]) =>
      spawnReadyProcess(
        join(__dirname, 'bare-worker.ts'),
        { TEMPORAL_TEST_ADDRESS: address, TEMPORAL_TEST_BUNDLE: bareBundlePath, TASK_QUEUE: taskQueue, ...extra },
        undefined,
        { nodeArgs },
      ),
  };
}

/** A process's CPU time so far, user and system, in ms (from /proc, in clock ticks of 10 ms). */
const cpuMs = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/**
 * The worker settings figure 6 compares: the workflow cache, glibc's malloc arenas (the Docker
 * image's setting before jemalloc), jemalloc in glibc's place (the image's allocator; where the
 * machine has it or Debian's package can be fetched: bench/jemalloc.ts) and V8's
 * `--optimize-for-size` (a Node option, which NODE_OPTIONS refuses). All but the last two are also
 * read at rest.
 */
function memorySettings(): { label: string; env: Record<string, string>; nodeArgs?: string[]; rests?: true }[] {
  const allocator = jemalloc();
  if ('missing' in allocator) log(`   (no jemalloc setting: ${allocator.missing})`);
  return [
    { label: 'cache 100', env: { SUBAGENT_WORKER_CACHED_RUNS: '100' }, rests: true },
    {
      label: 'cache 100, MALLOC_ARENA_MAX=2',
      env: { SUBAGENT_WORKER_CACHED_RUNS: '100', MALLOC_ARENA_MAX: '2' },
      rests: true,
    },
    ...('path' in allocator
      ? [
          {
            label: 'cache 100, jemalloc',
            env: { SUBAGENT_WORKER_CACHED_RUNS: '100', LD_PRELOAD: allocator.path },
            rests: true as const,
          },
        ]
      : []),
    {
      label: 'cache 20, MALLOC_ARENA_MAX=2',
      env: { SUBAGENT_WORKER_CACHED_RUNS: '20', MALLOC_ARENA_MAX: '2' },
      rests: true,
    },
    ...[100, 20].map((cached) => ({
      label: `cache ${cached}, MALLOC_ARENA_MAX=2, --optimize-for-size`,
      env: { SUBAGENT_WORKER_CACHED_RUNS: String(cached), MALLOC_ARENA_MAX: '2' },
      nodeArgs: ['--optimize-for-size'],
    })),
  ];
}

/** A worker process figure 6 reads: ours or the bare reference's, and its readings. */
interface MemorySide {
  worker: ReadyProcess;
  /** Parks `count` runs on it at once; the function returned ends them. */
  park(count: number): Promise<() => Promise<unknown>>;
  /** Its main thread's heap after a full GC, MB. */
  heapMb(): number;
  /** Resident set 2 s and 12 s (settled) after each reading's batch parked, and the heap then. */
  rss: number[];
  settledRss: number[];
  heap: number[];
  /** With none and with 1,000 parked: the lowest resident set in REST_WINDOW_MS, and when it was first read. */
  rested: { mb: number; afterS: number }[];
  /** Its CPU time while it parked the 1,000 runs. */
  parkingCpuMs: number;
}

/** Until every promise settles, or rejects once `PARK_DEADLINE_MS` have passed. */
async function withinParkDeadline(count: number, parked: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${count} runs did not all park within ${PARK_DEADLINE_MS} ms`)),
      PARK_DEADLINE_MS,
    );
  });
  try {
    await Promise.race([parked, stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/** A side's readings for the JSON line: none / 100 / 1,000 parked, and their growth, settled and at rest. */
function memoryFigures(side: MemorySide) {
  const readings = (mb: number[]) => ({
    parked_0: round(mb[0]!),
    parked_100: round(mb[1]!),
    parked_1000: round(mb[2]!),
  });
  const [restNone, restParked] = side.rested;
  return {
    rss: readings(side.rss),
    rss_growth: round(side.rss[2]! - side.rss[0]!),
    rss_settled: readings(side.settledRss),
    rss_settled_growth: round(side.settledRss[2]! - side.settledRss[0]!),
    ...(restNone &&
      restParked && {
        at_rest: {
          rss: { parked_0: round(restNone.mb), parked_1000: round(restParked.mb) },
          rss_growth: round(restParked.mb - restNone.mb),
          lowest_after_s: { parked_0: restNone.afterS, parked_1000: restParked.afterS },
        },
      }),
    heap_after_gc: readings(side.heap),
    cpu_ms_per_run: round(side.parkingCpuMs / 1000),
  };
}

/**
 * 6. Worker memory: the resident set of a worker process with none, 100 and 1,000 runs parked
 * (each batch of 100 started at once), 2 s after and settled (SETTLED_READING_MS), under each of
 * memorySettings(), and at rest under those that rest; the goal is on the growth, settled and at
 * rest. Beside it, under the same settings and read at the same moments, the reference: a worker
 * process of the bare parked workflow, parking as many of it at the same time (what a worker's
 * cached runs cost in Temporal itself). Also each worker's CPU time per run while it parked them
 * (with the heap read after a full GC twice a second).
 */
async function memory(address: string, service: TemporalSubagentService, bench: Bench): Promise<void> {
  const spawnWorker = await workerProcesses(address);
  log(`6. Worker memory, resident set with none / 100 / 1,000 runs parked, and the heap after a full GC:`);
  const figures: Record<string, unknown> = {};
  for (const [i, { label, env, nodeArgs, rests }] of memorySettings().entries()) {
    const name = `parked-${i}`;
    service.registerProvider(noop(name, true));
    const side = async (spawn: (env: Record<string, string>) => Promise<ReadyProcess>) => {
      const memoryFile = join(mkdtempSync(join(tmpdir(), 'subagent-bench-')), 'memory.json');
      const worker = await spawn({
        ...env,
        MEMORY_FILE: memoryFile,
        NODE_OPTIONS: `--expose-gc ${env.NODE_OPTIONS ?? ''}`.trim(),
      });
      return {
        worker,
        heapMb: () => (JSON.parse(readFileSync(memoryFile, 'utf8')) as { heapUsed: number }).heapUsed / 2 ** 20,
        rss: [],
        settledRss: [],
        heap: [],
        rested: [],
        parkingCpuMs: 0,
      };
    };
    const sides: MemorySide[] = [];
    try {
      sides.push({
        ...(await side((extra) => spawnWorker.subagent(name, '/dev/null', extra, nodeArgs))),
        async park(count) {
          const runs = Array.from({ length: count }, () => service.start(name, { prompt: text('park'), parent }));
          await withinParkDeadline(count, Promise.all(runs.map((run) => run.result)));
          return () => Promise.all(runs.map((run) => run.dispose()));
        },
      });
      const bareQueue = `${BASELINE_QUEUE}.memory-${i}`;
      sides.push({
        ...(await side((extra) => spawnWorker.bare(bareQueue, extra, nodeArgs))),
        async park(count) {
          const parking = Promise.all(Array.from({ length: count }, () => bench.parkBare(bareQueue)));
          await withinParkDeadline(count, parking);
          const handles = await parking;
          return () => Promise.all(handles.map((handle) => handle.terminate()));
        },
      });
      const read = async (rest: boolean) => {
        const parkedAt = Date.now();
        await sleep(EARLY_READING_MS);
        for (const { worker, rss } of sides) rss.push(rssMb(worker.child.pid!));
        await sleep(SETTLED_READING_MS - EARLY_READING_MS);
        for (const { worker, settledRss, heap, heapMb } of sides) {
          settledRss.push(rssMb(worker.child.pid!));
          heap.push(heapMb());
        }
        if (!rest) return;
        const lowest = sides.map(({ settledRss }) => ({ mb: settledRss.at(-1)!, afterS: SETTLED_READING_MS / 1000 }));
        while (Date.now() - parkedAt < REST_WINDOW_MS) {
          await sleep(REST_SAMPLE_MS);
          sides.forEach(({ worker }, at) => {
            const mb = rssMb(worker.child.pid!);
            if (mb < lowest[at]!.mb) lowest[at] = { mb, afterS: Math.round((Date.now() - parkedAt) / 1000) };
          });
        }
        sides.forEach(({ rested }, at) => rested.push(lowest[at]!));
      };
      // Warm: each worker has run (and forgotten) some runs before the first reading.
      const warm = await Promise.all(sides.map((s) => s.park(20)));
      await Promise.all(warm.map((end) => end()));
      await read(rests === true);
      for (let batch = 0; batch < 10; batch++) {
        const cpuBefore = sides.map(({ worker }) => cpuMs(worker.child.pid!));
        await Promise.all(sides.map((s) => s.park(100)));
        sides.forEach((s, at) => (s.parkingCpuMs += cpuMs(s.worker.child.pid!) - cpuBefore[at]!));
        if (batch === 0 || batch === 9) await read(rests === true && batch === 9);
      }
    } catch (err) {
      // A setting that cannot park its runs is a finding, not the end of the bench.
      figures[label] = { stalled: (err as Error).message };
      log(`   ${label.padEnd(55)} did not finish: ${(err as Error).message}`);
      continue;
    } finally {
      // The parked runs stay parked: the in-memory server goes away with the bench.
      await Promise.all(sides.map(({ worker }) => worker.kill()));
    }
    const [ours, bare] = sides.map(memoryFigures) as [
      ReturnType<typeof memoryFigures>,
      ReturnType<typeof memoryFigures>,
    ];
    figures[label] = {
      ...ours,
      goal: '<= 20 (settled)',
      met: ours.rss_settled_growth <= 20,
      ...(ours.at_rest && { at_rest: { ...ours.at_rest, goal: '<= 20', met: ours.at_rest.rss_growth <= 20 } }),
      bare_parked: bare,
      // Our growth less the bare worker's: what our runs add to what Temporal's own cost.
      added_settled: round(ours.rss_settled_growth - bare.rss_settled_growth),
      ...(ours.at_rest && bare.at_rest && { added_at_rest: round(ours.at_rest.rss_growth - bare.at_rest.rss_growth) }),
    };
    const mb = (values: number[]) => values.map((value) => value.toFixed(1)).join(' / ');
    const verdict = (value: number) => `(goal <= 20: ${value <= 20 ? 'met' : 'NOT met'})`;
    for (const [{ rss, settledRss, heap, parkingCpuMs }, figure, title] of [
      [sides[0]!, ours, label],
      [sides[1]!, bare, '  the bare parked workflow, alongside'],
    ] as const) {
      log(
        `   ${title.padEnd(55)} settled ${mb(settledRss)} MB, growth ${figure.rss_settled_growth.toFixed(1)} MB ` +
          `${figure === ours ? `${verdict(figure.rss_settled_growth)}   ` : ''}after 2 s ${mb(rss)} MB, ` +
          `growth ${figure.rss_growth.toFixed(1)} MB   heap ${mb(heap)} MB   CPU ${(parkingCpuMs / 1000).toFixed(1)} ms a run`,
      );
      if (figure.at_rest) {
        const { rss: rested, rss_growth: growth, lowest_after_s: after } = figure.at_rest;
        log(
          `   ${''.padEnd(55)} at rest ${mb([rested.parked_0, rested.parked_1000])} MB (the lowest within ` +
            `${REST_WINDOW_MS / 1000} s, read ${after.parked_0} s / ${after.parked_1000} s after), ` +
            `growth ${growth.toFixed(1)} MB${figure === ours ? ` ${verdict(growth)}` : ''}`,
        );
      }
    }
    const added = figures[label] as { added_settled: number; added_at_rest?: number };
    const signed = (value: number) => `${value > 0 ? '+' : ''}${value.toFixed(1)}`;
    log(
      `   ${''.padEnd(55)} ours less the bare: ${signed(added.added_settled)} MB settled` +
        `${added.added_at_rest === undefined ? '' : `, ${signed(added.added_at_rest)} MB at rest`}`,
    );
  }
  results.worker_memory_mb = figures;
}

/** 7. Recovery: a worker SIGKILLed mid-turn -> the run completes on another worker, every round. */
async function recovery(address: string, service: TemporalSubagentService): Promise<void> {
  const spawnWorker = (await workerProcesses(address)).subagent;
  const name = 'recovery';
  service.registerProvider({
    ...noop(name, false),
    runSettings: { heartbeatTimeout: `${HEARTBEAT_TIMEOUT_S} seconds`, retry: { initialInterval: '100 ms' } },
  });
  const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-bench-')), 'events.jsonl');
  writeFileSync(eventsFile, '');
  const workers = [await spawnWorker(name, eventsFile), await spawnWorker(name, eventsFile)];
  const seconds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const run = service.start(name, {
      prompt: text('survive'),
      parent,
      agentOptions: { script: [{ stallFirstAttemptMs: 60_000 }] },
    });
    let owner: number | undefined;
    while (owner === undefined) {
      await sleep(20);
      const started = readFileSync(eventsFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { runId: string; kind: string; pid: number })
        .find((event) => event.runId === run.id && event.kind === 'turn-start');
      owner = started?.pid;
    }
    const victim = workers.findIndex((worker) => worker.child.pid === owner);
    const killedAt = performance.now();
    await workers[victim]!.kill('SIGKILL');
    await run.result;
    seconds.push((performance.now() - killedAt) / 1000);
    workers[victim] = await spawnWorker(name, eventsFile);
  }
  const figure = spread(seconds, { atMost: HEARTBEAT_TIMEOUT_S + 2 }, 2);
  results.recovery_s = figure;
  results.heartbeat_timeout_s = HEARTBEAT_TIMEOUT_S;
  log(
    `7. Recovery, worker SIGKILL mid-turn -> the run completes on another worker (heartbeat timeout ${HEARTBEAT_TIMEOUT_S} s):`,
  );
  log(`   ${describeSpread(figure)} s`);
  await Promise.all(workers.map((worker) => worker.kill()));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
