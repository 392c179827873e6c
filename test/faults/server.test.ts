// Faults (b) and (c): the Temporal server itself stopped and restarted on its database file, with
// workers as child processes. Runs in flight complete; a run parked for resume survives a restart
// of both the server and its worker and resumes.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createScriptedProvider,
  DevServer,
  freePort,
  ReadyProcess,
  spawnWorkerProcess,
  startDevServer,
} from '../../src/testing';
import { connectTestTemporal, newService, TestTemporal, text, uniqueName } from '../helpers/temporal';

let server: DevServer;
let port: number;
let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
const dbFilename = join(mkdtempSync(join(tmpdir(), 'subagent-server-faults-')), 'temporal.db');
const name = uniqueName('server-faults');
const workers: ReadyProcess[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const startServer = () => startDevServer({ dbFilename, port });
const startWorker = async () => {
  const worker = await spawnWorkerProcess({
    PROVIDER_NAME: name,
    EVENTS_FILE: '/dev/null',
    TEMPORAL_TEST_ADDRESS: server.address,
  });
  workers.push(worker);
  return worker;
};

beforeAll(async () => {
  port = await freePort();
  server = await startServer();
  // One connection for the whole file: it outlives every restart of the server on its port.
  temporal = await connectTestTemporal('default', { address: server.address });
  service = newService(temporal);
  service.registerProvider(
    createScriptedProvider({
      name,
      runSettings: { heartbeatTimeout: '5 seconds', retry: { initialInterval: '200 ms' } },
    }),
  );
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await temporal?.close();
  await server?.stop();
});

it('completes every run in flight when the server is stopped and restarted on its database file', async () => {
  const worker = await startWorker();
  const script = Array.from({ length: 3 }, (_, turn) => ({ delayMs: 800, reply: `turn ${turn}: {input}` }));
  const runs = Array.from({ length: 5 }, (_, i) =>
    service.start(name, { prompt: text(`task ${i}`), parent: { id: 'p' }, agentOptions: { script } }),
  );
  await sleep(300);
  runs.forEach((run) => run.sendMessage!(text('sent before the outage')));
  await sleep(900); // the server goes down while the second turns run
  await server.stop();
  await sleep(12_000); // longer than the client's own retries of a call (about 10 s)
  server = await startServer();

  const results = await Promise.all(runs.map((run) => run.result));
  expect(results).toEqual(
    runs.map(() => ({ output: text('turn 1: sent before the outage'), stopReason: 'completed' })),
  );
  await Promise.all(runs.map((run) => run.dispose()));
  await worker.kill();
}, 120_000);

it('resumes a parked run after both the server and its worker restarted', async () => {
  const worker = await startWorker();
  const run = service.start(name, {
    prompt: text('remember me'),
    parent: { id: 'p' },
    agentOptions: { script: [{ reply: 'first: {input}' }, { reply: 'resumed after {conversation}' }] },
  });
  expect(await run.result).toEqual({ output: text('first: remember me'), stopReason: 'completed' });

  await worker.kill('SIGKILL');
  await server.stop();
  server = await startServer();
  await startWorker(); // killed with the others after the file

  const attached = service.attach(run.id);
  expect(await attached.result).toEqual({ output: text('first: remember me'), stopReason: 'completed' });
  const resumed = attached.resume!(text('again'));
  expect(await resumed.result).toEqual({ output: text('resumed after remember me'), stopReason: 'completed' });
  await resumed.dispose();
}, 120_000);
