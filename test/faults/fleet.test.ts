// A fleet: three worker hosts, each a network namespace of its own (plain processes where
// namespaces cannot be made), reaching one Temporal server (on loopback) through a relay on a
// private bridge. Two hosts form
// the `alpha` pool, one serves `beta`. Runs go to their provider's pool, and killing a worker of
// the alpha pool moves its runs to the survivor.
import { mkdtempSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScriptedProvider, ReadyProcess, ScriptedTurnEvent, spawnWorkerProcess } from '../../src/testing';
import { createVirtualHosts, relay, VirtualHosts } from '../helpers/hosts';
import { eventually, newService, startTestServer, TestServer, text, turnGates, uniqueName } from '../helpers/temporal';

type HostEvent = ScriptedTurnEvent & { host: string; pid: number };

let virtual: VirtualHosts | undefined;
let temporal: TestServer;
let bridge: Awaited<ReturnType<typeof relay>> | undefined;
let service: ReturnType<typeof newService>;
const workers: (ReadyProcess & { host: string })[] = [];
const alpha = uniqueName('alpha');
const beta = uniqueName('beta');
const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-fleet-')), 'events.jsonl');

beforeAll(async () => {
  writeFileSync(eventsFile, '');
  virtual = createVirtualHosts(3);
  temporal = await startTestServer();
  bridge = virtual ? await relay(virtual.bridgeIp, temporal.address) : undefined;
  service = newService(temporal);
  for (const name of [alpha, beta]) {
    service.registerProvider(
      createScriptedProvider({
        name,
        resumable: false,
        runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } },
      }),
    );
  }
  const plan: [string, string][] = [
    ['host-1', alpha],
    ['host-2', alpha],
    ['host-3', beta],
  ];
  for (const [index, [host, provider]] of plan.entries()) {
    const address = bridge?.address ?? temporal.address;
    const env = { PROVIDER_NAME: provider, EVENTS_FILE: eventsFile, HOST_NAME: host, TEMPORAL_TEST_ADDRESS: address };
    const worker = await spawnWorkerProcess(env, undefined, { wrap: virtual?.hosts[index]!.exec ?? [] });
    workers.push({ ...worker, host });
  }
}, 90_000);

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await bridge?.close();
  await temporal?.close();
  virtual?.remove();
});

const events = () =>
  readFileSync(eventsFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as HostEvent);

it('runs each provider on its own pool of hosts and moves a killed host’s runs to the survivor', async () => {
  if (virtual) {
    // Each worker lives in a network namespace of its own, not the test's.
    const namespaceOf = (pid: number | string) => readlinkSync(`/proc/${pid}/ns/net`);
    const namespaces = new Set(workers.map((worker) => namespaceOf(worker.child.pid!)));
    expect(namespaces.size).toBe(3);
    expect(namespaces.has(namespaceOf('self'))).toBe(false);
  }
  // Every first turn waits at its gate, so the kill below lands on turns in progress.
  const gates = turnGates();
  const script = [{ waitFor: gates.waitFor, reply: 'first {input}' }, { reply: 'second {input}' }];
  const start = (provider: string, i: number) =>
    service.start(provider, { prompt: text(`${provider} ${i}`), parent: { id: 'p' }, agentOptions: { script } });
  const alphaRuns = Array.from({ length: 6 }, (_, i) => start(alpha, i));
  const betaRuns = Array.from({ length: 3 }, (_, i) => start(beta, i));
  const allRuns = [...alphaRuns, ...betaRuns];
  for (const run of allRuns) run.sendMessage!(text('then this'));
  const firstTurns = () => events().filter((e) => e.kind === 'turn-start' && e.turn === 0);
  await eventually(
    () => (new Set(firstTurns().map((e) => e.runId)).size === allRuns.length ? true : undefined),
    20_000,
  );

  // The victim: an alpha host with first turns in progress.
  const victim = firstTurns().find((e) => e.host !== 'host-3')!.host;
  const victimWorker = workers.find((worker) => worker.host === victim)!;
  await victimWorker.kill('SIGKILL');
  const survivor = victim === 'host-1' ? 'host-2' : 'host-1';
  for (const run of allRuns) gates.open(run.id, 0);

  const results = await Promise.all(allRuns.map((run) => run.result));
  expect(results.every((result) => result.stopReason === 'completed')).toBe(true);

  const log = events();
  const hostsOf = (runs: typeof alphaRuns) =>
    new Set(log.filter((e) => runs.some((run) => run.id === e.runId)).map((e) => e.host));
  expect([...hostsOf(betaRuns)]).toEqual(['host-3']);
  expect(hostsOf(alphaRuns).has('host-3')).toBe(false);
  // Every alpha turn that started on the victim and never ended there ended on the survivor.
  const interrupted = log.filter(
    (e) =>
      e.kind === 'turn-start' &&
      e.host === victim &&
      !log.some(
        (end) => end.kind === 'turn-end' && end.runId === e.runId && end.turn === e.turn && end.host === victim,
      ),
  );
  expect(interrupted.length).toBeGreaterThan(0);
  for (const turn of interrupted) {
    expect(
      log.some((e) => e.kind === 'turn-end' && e.runId === turn.runId && e.turn === turn.turn && e.host === survivor),
    ).toBe(true);
  }
  await Promise.all([...alphaRuns, ...betaRuns].map((run) => run.dispose()));
}, 120_000);
