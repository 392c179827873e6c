// Faults only a cluster has, with 100 runs through them: SIGKILL of a history host mid-turn and
// its restart, restarts of matching and of the frontend, a restart of PostgreSQL, and a history
// host lost for good while its shards move to the other. Every run's turn is held at a gate while
// its fault happens; then the gates open. Nothing is lost (every run answers every turn), nothing
// doubled (one recorded turn per turn), nothing stuck (each phase ends); each fault's recovery
// time, from the fault to the last run's answer, is measured and printed.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SubagentRun, auditDrafts, runStarted } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { type TemporalCluster, startCluster } from '../../src/testing/cluster';
import {
  type TestTemporal,
  connectTestTemporal,
  newService,
  startWorker,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

const RUNS = 100;
let cluster: TemporalCluster;
let temporal: TestTemporal;
let stopWorker: () => Promise<void>;
const started = new Map<number, Set<string>>();
const turnStarted: (() => void)[] = [];
const scripted = createScriptedProvider({
  name: uniqueName('clustered'),
  runSettings: { heartbeatTimeout: '5 seconds', retry: { initialInterval: '200 ms', maximumAttempts: 50 } },
  observer: (event) => {
    if (event.kind !== 'turn-start') return;
    (started.get(event.turn) ?? started.set(event.turn, new Set()).get(event.turn)!).add(event.runId);
    for (const notify of turnStarted) notify();
  },
});

/** Resolves once every run has begun turn `turn` (each is then held at its gate). */
function allAt(turn: number, runs: SubagentRun[]): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (runs.every((run) => started.get(turn)?.has(run.id))) resolve();
    };
    turnStarted.push(check);
    check();
  });
}

beforeAll(async () => {
  cluster = await startCluster({ dir: mkdtempSync(join(tmpdir(), 'subagent-cluster-faults-')), historyHosts: 2 });
  temporal = await connectTestTemporal('default', { address: cluster.address });
  stopWorker = await startWorker(temporal, [scripted], {
    heartbeatIntervalMs: 500,
    workerOptions: { maxConcurrentActivityTaskExecutions: RUNS + 10 },
  });
}, 600_000);

afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
  await cluster?.stop();
});

const restart =
  (instance: string, signal: NodeJS.Signals = 'SIGTERM') =>
  async () => {
    await cluster.service(instance).stop(signal);
    await cluster.service(instance).start();
  };

const FAULTS: [string, () => Promise<void>][] = [
  ['SIGKILL of a history host mid-turn, and its restart', restart('history-1', 'SIGKILL')],
  ['a restart of matching', restart('matching')],
  ['a restart of the frontend', restart('frontend')],
  [
    'a restart of PostgreSQL',
    async () => {
      await cluster.postgres.stop();
      await cluster.postgres.start();
    },
  ],
  ['a history host lost for good: its shards move to the other', () => cluster.service('history-2').stop('SIGKILL')],
];

it(`carries ${RUNS} runs through every fault: nothing lost, nothing doubled, nothing stuck`, async () => {
  const service = newService(temporal);
  service.registerProvider(scripted);
  const gates = turnGates();
  const script = FAULTS.map(() => ({ waitFor: gates.waitFor, reply: 'turn {turn}: {input}' }));
  let runs = Array.from({ length: RUNS }, (_, i) =>
    service.start(scripted.name, { prompt: text(`run ${i}`), parent: { id: 'p' }, agentOptions: { script } }),
  );
  await Promise.all(runs.map(runStarted));
  const ids = runs.map((run) => run.id);
  const recovery: { fault: string; seconds: number }[] = [];

  for (const [turn, [fault, inject]] of FAULTS.entries()) {
    await allAt(turn, runs);
    const faulted = Date.now();
    await inject();
    for (const run of runs) gates.open(run.id, turn);
    const results = await Promise.all(runs.map((run) => run.result));
    recovery.push({ fault, seconds: (Date.now() - faulted) / 1000 });
    const expected = (i: number) => (turn === 0 ? `run ${i}` : `message ${turn} to ${i}`);
    expect(results.map((result) => (result.output[0] as { text: string }).text)).toEqual(
      runs.map((_, i) => `turn ${turn}: ${expected(i)}`),
    );
    if (turn < FAULTS.length - 1) runs = runs.map((run, i) => run.resume!(text(`message ${turn + 1} to ${i}`)));
  }

  // One recorded turn per turn and run, however many attempts the faults caused.
  for (const id of ids) {
    let turns = 0;
    for await (const record of auditDrafts(temporal.client, id, false)) if (record.type === 'turn') turns++;
    expect({ id, turns }).toEqual({ id, turns: FAULTS.length });
  }
  await Promise.all(runs.map((run) => run.dispose()));
  await cluster.service('history-2').start();

  const table = recovery.map(({ fault, seconds }) => `  ${seconds.toFixed(1).padStart(6)} s  ${fault}`).join('\n');
  console.log(`recovery, from the fault to the last of ${RUNS} runs answering its held turn:\n${table}`);
  writeFileSync(join(cluster.dir, 'recovery.json'), JSON.stringify(recovery, null, 2));
}, 900_000);
