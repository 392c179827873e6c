// Faults (b) and (c): the Temporal server itself stopped and restarted on its database file, with
// workers as child processes. Runs in flight complete; a run parked for resume survives a restart
// of both the server and its worker and resumes; a steering message sent while the server is down
// reaches the child once it is back, or, past the reconnect window, is reported and not lost; a
// follower of a run's events and audit records reads on across the outage.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SubagentMessageUndeliveredInfo, SubagentRun, SubagentRunEvent } from '../../src';
import { type AuditDraft, auditDrafts } from '../../src/audit';
import {
  createScriptedProvider,
  DevServer,
  ReadyProcess,
  ScriptedTurnEvent,
  spawnWorkerProcess,
  startDevServer,
} from '../../src/testing';
import {
  connectTestTemporal,
  eventually,
  newService,
  recordingLogger,
  TestTemporal,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';
import { freePortBelowEphemeral } from '../../src/temporal/dev-server';
import { statusQuery } from '../../workflows/definitions';

let server: DevServer;
let port: number;
let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
const dbFilename = join(mkdtempSync(join(tmpdir(), 'subagent-server-faults-')), 'temporal.db');
const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-server-faults-events-')), 'events.jsonl');
const name = uniqueName('server-faults');
const runSettings = { heartbeatTimeout: '5 seconds', retry: { initialInterval: '200 ms' } };
const workers: ReadyProcess[] = [];
/** How long the server stays down: past the Temporal client's own retries of one call (about 10 s). */
const OUTAGE_MS = 12_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const startServer = () => startDevServer({ dbFilename, port });
const startWorker = async () => {
  const worker = await spawnWorkerProcess({
    PROVIDER_NAME: name,
    EVENTS_FILE: eventsFile,
    TEMPORAL_TEST_ADDRESS: server.address,
  });
  workers.push(worker);
  return worker;
};
const statusOf = (run: SubagentRun) => temporal.client.workflow.getHandle(run.id).query(statusQuery);
/** The turn events the worker processes logged, of the runs given. */
const turnsStarted = (runIds: string[], turn: number) =>
  readFileSync(eventsFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ScriptedTurnEvent)
    .filter((event) => event.kind === 'turn-start' && event.turn === turn && runIds.includes(event.runId));

beforeAll(async () => {
  writeFileSync(eventsFile, '');
  // Out of the range the client's own reconnects take their ports from, while the server is down.
  port = await freePortBelowEphemeral();
  server = await startServer();
  // One connection for the whole file: it outlives every restart of the server on its port.
  temporal = await connectTestTemporal('default', { address: server.address });
  service = newService(temporal);
  service.registerProvider(createScriptedProvider({ name, runSettings }));
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await temporal?.close();
  await server?.stop();
});

it('completes every run in flight when the server is stopped and restarted on its database file', async () => {
  const worker = await startWorker();
  const gates = turnGates();
  const script = [0, 1].map((turn) => ({ waitFor: gates.waitFor, reply: `turn ${turn}: {input}` }));
  const runs = Array.from({ length: 5 }, (_, i) =>
    service.start(name, { prompt: text(`task ${i}`), parent: { id: 'p' }, agentOptions: { script } }),
  );
  const ids = runs.map((run) => run.id);
  await eventually(() => (turnsStarted(ids, 0).length === runs.length ? true : undefined));
  runs.forEach((run) => run.sendMessage!(text('sent before the outage')));
  for (const run of runs) {
    await eventually(async () => ((await statusOf(run)).pendingMessages === 1 ? true : undefined));
    gates.open(run.id, 0);
  }
  // The second turns are in flight when the server goes down, and finish while it is down.
  await eventually(() => (turnsStarted(ids, 1).length === runs.length ? true : undefined));
  await server.stop();
  for (const run of runs) gates.open(run.id, 1);
  await sleep(OUTAGE_MS);
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

it('follows a run’s events and its audit records across a server restart, missing none and repeating none', async () => {
  const worker = await startWorker();
  const gates = turnGates();
  const run = service.start(name, {
    prompt: text('watched through the outage'),
    parent: { id: 'p' },
    agentOptions: { script: [{ waitFor: gates.waitFor, reply: 'after the outage' }] },
  });
  const events: SubagentRunEvent[] = [];
  const records: AuditDraft[] = [];
  const following = (async () => {
    for await (const event of run.events!()) events.push(event);
  })();
  await eventually(() => (events.some((event) => event.type === 'turn-start') ? true : undefined));
  const logging = (async () => {
    for await (const record of auditDrafts(temporal.client, run.id, true)) records.push(record);
  })();
  await eventually(() => (records.some((record) => record.type === 'start') ? true : undefined));
  // Both followers are in a long poll when the server goes away, for longer than the client retries.
  await server.stop();
  await sleep(OUTAGE_MS);
  server = await startServer();
  gates.open(run.id, 0);
  expect(await run.result).toEqual({ output: text('after the outage'), stopReason: 'completed' });
  await run.dispose();
  await Promise.all([following, logging]);

  // What they followed is what the history holds, read after the fact.
  const read: SubagentRunEvent[] = [];
  for await (const event of run.events!({ follow: false })) read.push(event);
  expect(events).toEqual(read);
  expect(events.at(-1)).toMatchObject({ type: 'closed', closedBy: 'disposed' });
  const audit: AuditDraft[] = [];
  for await (const record of auditDrafts(temporal.client, run.id, false)) audit.push(record);
  expect(records).toEqual(audit);
  expect(records.at(-1)?.type).toBe('close');
  await worker.kill();
}, 120_000);

it('delivers a message sent while the server is down once it is back, past the client’s own retries', async () => {
  const worker = await startWorker();
  const gates = turnGates();
  const undelivered: SubagentMessageUndeliveredInfo[] = [];
  service.on('subagent/message-undelivered', (info) => undelivered.push(info));
  const run = service.start(name, {
    prompt: text('work through the outage'),
    parent: { id: 'p' },
    agentOptions: { script: [{ waitFor: gates.waitFor, reply: 'first' }, { reply: 'then: {input}' }] },
  });
  await eventually(() => (turnsStarted([run.id], 0).length === 1 ? true : undefined));
  await server.stop();
  run.sendMessage!(text('sent during the outage'));
  await sleep(OUTAGE_MS);
  server = await startServer();
  // Turn 0 goes on once the message is in: it is then the input of turn 1.
  await eventually(async () => ((await statusOf(run)).pendingMessages === 1 ? true : undefined), 30_000);
  gates.open(run.id, 0);
  expect(await run.result).toEqual({ output: text('then: sent during the outage'), stopReason: 'completed' });
  expect(undelivered).toEqual([]);
  await run.dispose();
  await worker.kill();
}, 120_000);

it('reports a message given up on after the reconnect window through subagent/message-undelivered, content and all', async () => {
  const worker = await startWorker();
  const logger = recordingLogger();
  const impatient = newService(temporal, { reconnectWindowMs: 1000, logger });
  impatient.registerProvider(createScriptedProvider({ name, runSettings }));
  const undelivered: SubagentMessageUndeliveredInfo[] = [];
  impatient.on('subagent/message-undelivered', (info) => undelivered.push(info));
  const run = impatient.start(name, {
    prompt: text('x'),
    parent: { id: 'p' },
    agentOptions: { script: [{ hang: true }] },
  });
  await eventually(() => (turnsStarted([run.id], 0).length === 1 ? true : undefined));
  await server.stop();
  run.sendMessage!(text('lost unless reported'));
  try {
    const [info] = await eventually(() => (undelivered.length > 0 ? undelivered : undefined), 60_000);
    expect(info).toMatchObject({ provider: name, id: run.id, segment: 0, content: text('lost unless reported') });
    expect(info!.error.code).toBe('UNAVAILABLE');
    // A dispose given up on is logged as well as thrown: the delegation tool drops what it throws.
    await expect(run.dispose()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(logger.warnings).toContainEqual(expect.stringContaining(`dispose on run ${run.id} failed`));
  } finally {
    server = await startServer();
  }
  // A dispose that failed may be called again.
  await run.dispose();
  expect((await temporal.client.workflow.getHandle(run.id).describe()).status.name).toBe('COMPLETED');
  await worker.kill();
}, 120_000);
