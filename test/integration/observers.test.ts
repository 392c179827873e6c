// Any number of observers on one run: a thousand waiters in five processes all receive its
// result, and its history is the same as a run's with one waiter. Waiters that began before a
// resume follow it to the segment they wait for. A caller reads a history by long polls alone once
// its server has shown that it pages one.
import { Client, Connection } from '@temporalio/client';
import { runStarted } from '../../src';
import { segmentOutcome } from '../../src/client/run-outcomes';
import { createScriptedProvider, spawnReadyProcess } from '../../src/testing';
import { fixture, newService, testRuns, text, turnGates, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('observed') });
const runs = testRuns([scripted]);
const gates = turnGates();
const held = (replies: string[]) => ({ script: replies.map((reply) => ({ waitFor: gates.waitFor, reply })) });
const start = (prompt: string, replies = ['answer to {input}']) =>
  runs.service.start(scripted.name, { prompt: text(prompt), parent: { id: 'p' }, agentOptions: held(replies) });
const eventTypes = async (runId: string) =>
  ((await runs.temporal.client.workflow.getHandle(runId).fetchHistory()).events ?? []).map((event) => event.eventType);

/**
 * `waiters` handles on `runId` in a process of its own; resolves once all are waiting, with what
 * each will have received.
 */
async function observe(runId: string, waiters: number): Promise<{ received: Promise<{ text?: string }[]> }> {
  let report: (line: string) => void;
  const reported = new Promise<string>((resolve) => (report = resolve));
  const process = await spawnReadyProcess(
    fixture('observer-process'),
    { TEMPORAL_TEST_ADDRESS: runs.temporal.address, RUN_ID: runId, WAITERS: String(waiters) },
    (line) => line.startsWith('[') && report(line),
  );
  return { received: reported.then((line) => JSON.parse(line)).finally(() => process.kill()) };
}

it('1,000 waiters in 5 processes all receive the result, and the history is as long as with one waiter', async () => {
  const alone = start('alone');
  const watched = start('watched');
  await Promise.all([runStarted(alone), runStarted(watched)]);
  // Every waiter has begun before either turn may finish.
  const observers = await Promise.all(Array.from({ length: 5 }, () => observe(watched.id, 200)));
  gates.open(alone.id, 0);
  gates.open(watched.id, 0);

  expect(await alone.result).toEqual({ output: text('answer to alone'), stopReason: 'completed' });
  expect(await watched.result).toEqual({ output: text('answer to watched'), stopReason: 'completed' });
  const received = (await Promise.all(observers.map((observer) => observer.received))).flat();
  expect(received).toHaveLength(1000);
  expect(received.filter((answer) => answer.text !== 'answer to watched')).toEqual([]);
  // Both runs are parked now: the same events, whoever watched.
  expect(await eventTypes(watched.id)).toEqual(await eventTypes(alone.id));
  await Promise.all([alone.dispose(), watched.dispose()]);
}, 120_000);

it('waiters that began before a resume follow it: each gets the segment it waits for', async () => {
  const run = start('first', ['one: {input}', 'two: {input}']);
  await runStarted(run);
  const early = runs.service.attach(run.id);
  gates.open(run.id, 0);
  expect(await run.result).toEqual({ output: text('one: first'), stopReason: 'completed' });

  const resumed = run.resume!(text('second'));
  await runStarted(resumed);
  // Attached after the resume was accepted, before its segment began or settled.
  const late = runs.service.attach(run.id);
  gates.open(run.id, 1);
  const second = { output: text('two: second'), stopReason: 'completed' };
  expect(await resumed.result).toEqual(second);
  expect(await late.result).toEqual(second);
  expect(await early.result).toEqual({ output: text('one: first'), stopReason: 'completed' });

  // A waiter that asks for the segment before only once the run moved on still gets it; one
  // for a segment the run never had is refused.
  const { client } = runs.temporal;
  expect((await segmentOutcome(client, run.id, 0, { reconnectWindowMs: 1000, ask: true })).result).toEqual({
    output: text('one: first'),
    stopReason: 'completed',
  });
  await expect(segmentOutcome(client, run.id, 5, { reconnectWindowMs: 1000, ask: true })).rejects.toMatchObject({
    code: 'UNKNOWN_RUN',
  });
  await resumed.dispose();
}, 60_000);

it('asks the run nothing while it waits for a result: no query from start to settle', async () => {
  // A caller whose every query its client's interceptor counts.
  const queries: string[] = [];
  const client = new Client({
    connection: runs.temporal.connection,
    interceptors: {
      workflow: [
        {
          async query(input, next) {
            queries.push(input.queryType);
            return next(input);
          },
        },
      ],
    },
  });
  const service = newService({ ...runs.temporal, client });
  service.registerProvider(scripted);
  for (let i = 0; i < 5; i++) {
    const run = service.start(scripted.name, { prompt: text(`quiet ${i}`), parent: { id: 'p' } });
    expect(await run.result).toEqual({ output: text(`scripted reply to: quiet ${i}`), stopReason: 'completed' });
    await run.dispose();
  }
  expect(queries).toEqual([]);
}, 60_000);

it("reads a parked run's history by long polls alone once its server has shown it pages", async () => {
  // A caller on a connection of its own, whose every read of a history is recorded (and made).
  const connection = await Connection.connect({ address: runs.temporal.address });
  const getHistory = jest.spyOn(connection.workflowService, 'getWorkflowExecutionHistory');
  const service = newService({ ...runs.temporal, client: new Client({ connection }) });
  service.registerProvider(scripted);
  for (let i = 0; i < 3; i++) {
    const run = service.start(scripted.name, { prompt: text(`paged ${i}`), parent: { id: 'p' } });
    expect(await run.result).toEqual({ output: text(`scripted reply to: paged ${i}`), stopReason: 'completed' });
    await run.dispose();
  }
  // The first run's start event alone, to learn that the server pages (the time-skipping test
  // server does not); every other read a long poll.
  const reads = getHistory.mock.calls.map(([read]) => ({
    longPoll: read.waitNewEvent ?? false,
    size: read.maximumPageSize,
  }));
  expect(reads.filter((read) => !read.longPoll)).toEqual([{ longPoll: false, size: 1 }]);
  expect(reads.length).toBeGreaterThan(3);
  await connection.close();
}, 60_000);
