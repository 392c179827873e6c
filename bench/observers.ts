// Figure 8: how 1,000 observers of one run receive its result, by three ways to wait.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { TemporalSubagentService, runStarted } from '../src';
import { type ScriptedTurnEvent, createScriptedProvider } from '../src/testing';
import { segmentResultUpdate } from '../workflows/definitions';
import { percentiles, round } from './stats';

const log = (line = '') => console.log(line);
const text = (value: string) => [{ type: 'text' as const, text: value }];
const parent = { id: 'bench' };

/** A scripted provider that timestamps every turn start and end, and lets the bench wait for them. */
export function timed() {
  const seen = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  const key = (runId: string, kind: string, turn: number) => `${runId}|${kind}|${turn}`;
  type Kind = ScriptedTurnEvent['kind'];
  const record = (runId: string, kind: Kind, turn: number) => {
    const k = key(runId, kind, turn);
    seen.set(k, performance.now());
    waiters.get(k)?.();
  };
  const provider = createScriptedProvider({
    name: 'timed',
    observer: (event: ScriptedTurnEvent) => record(event.runId, event.kind, event.turn),
  });
  return {
    provider,
    /** Records a turn's event now, for turns that are not the provider's (the bare parked workflow's). */
    record,
    /** When the turn's event happened (performance.now()), waiting for it if need be. */
    at: async (runId: string, kind: Kind, turn: number) => {
      const k = key(runId, kind, turn);
      if (!seen.has(k)) await new Promise<void>((resolve) => waiters.set(k, resolve));
      return seen.get(k)!;
    },
  };
}

export type Timing = ReturnType<typeof timed>;
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
export async function observers(
  address: string,
  serverPid: number | undefined,
  service: TemporalSubagentService,
  timing: Timing,
  results: Record<string, unknown>,
  quick: boolean,
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
    const p50 = percentiles(all.length ? all : [NaN]).p50;
    const failed = figure.many.reduce((sum, sample) => sum + sample.failed, 0);
    const perObserver = figure.many.map((sample) => (sample.events - figure.oneEvents) / 1000);
    const bytesPerObserver = figure.many.map((sample) => (sample.bytes - figure.oneBytes) / 1000);
    const cpu = figure.many.map((sample) => sample.cpu);
    const single = percentiles(figure.one.flat());
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
    .one.map((ours, i) => percentiles(ours).p50 / percentiles(figures.get('update per waiter')!.one[i]!).p50);
  const ratio = percentiles(ratios).p50;
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
