// A worker reads a run's conversation (`runContext`) and its waiting messages (`pendingMessages`)
// from the run's workflow with queries, which the server refuses past its blob limit (2 MiB): a run
// without a payload store whose conversation or queue of messages outgrew that had its turn retried
// until it ended `error`. Read a page at a time, they reach the child whole, each message of nearly
// a payload on a page of its own; one the server will not answer even alone fails the turn for good.
import { join } from 'node:path';
import type { SubagentRun, SubagentTurnProvider } from '../../src';
import { type ContentBlock, textOf } from '../../src/seam/content';
import type { TranscriptEntry } from '../../src/seam/request';
import { sendMessageSignal, statusQuery } from '../../workflows/definitions';
import { eventually, newService, startTestServer, startWorker, testRuns, text, uniqueName } from '../helpers/temporal';

/** A message of nearly a payload (the service's limit is 2 MiB less 64 KiB): over a page on its own. */
const BIG = 1_990_000;
const big = (name: string) => text(name.padEnd(BIG, '.'));
/** What a test shows of a message: its first word and its length. */
const summary = (content: ContentBlock[]) => `${textOf(content).split('.')[0]} ${textOf(content).length}`;
const entrySummary = (entry: TranscriptEntry) =>
  entry.kind === 'tool' ? 'tool' : `${entry.kind} ${summary(entry.content)}`;

/** Turns the test has seen start, by `<run>.<turn>`, and the releases of the turns it holds. */
const started = new Map<string, () => void>();
const startedPromises = new Map<string, Promise<void>>();
const releases = new Map<string, () => void>();
const releasePromises = new Map<string, Promise<void>>();
function deferred(map: Map<string, () => void>, promises: Map<string, Promise<void>>, key: string) {
  if (!promises.has(key)) promises.set(key, new Promise<void>((resolve) => map.set(key, resolve)));
  return { promise: promises.get(key)!, resolve: () => map.get(key)!() };
}
const turnStarted = (runId: string, turn: number) => deferred(started, startedPromises, `${runId}.${turn}`).promise;
/** Resolves once the run's turn `turn` starts; rejects if the run ends first (a turn that could not read what it needs). */
const turnOf = (run: SubagentRun, turn: number) =>
  Promise.race([
    turnStarted(run.id, turn),
    run.result.then(({ diagnostic }) => Promise.reject(new Error(`the run ended before turn ${turn}: ${diagnostic}`))),
  ]);
const release = (runId: string, turn: number) => deferred(releases, releasePromises, `${runId}.${turn}`).resolve();

/**
 * A TEST DOUBLE of a child: each turn says it started and waits for the test to release it, then
 * (with `agentOptions.take`) takes the messages waiting mid-turn twice, and answers with what it was
 * handed: the conversation before the turn, the turn's input and what it took, each summarised.
 */
function echoProvider(name: string): SubagentTurnProvider {
  return {
    name,
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false },
    inheritsParentContext: false,
    steering: true,
    resumable: false,
    // Two quick attempts: a turn that cannot read what it needs ends `error` within seconds.
    runSettings: { retry: { maximumAttempts: 2, initialInterval: 100, maximumInterval: 100 } },
    async runTurn(input, ctx) {
      deferred(started, startedPromises, `${ctx.runId}.${ctx.turn}`).resolve();
      await deferred(releases, releasePromises, `${ctx.runId}.${ctx.turn}`).promise;
      const take = (ctx.request.agentOptions as { take?: boolean } | undefined)?.take;
      const taken: string[][] = [];
      if (take) {
        for (let i = 0; i < 2; i++) {
          taken.push(
            await ctx.takeMessages().then(
              (messages) => messages.map(summary),
              (err: Error) => [`failed: ${err.message}`],
            ),
          );
        }
      }
      const answer = {
        turn: ctx.turn,
        transcript: (await ctx.transcript()).map(entrySummary),
        input: input.map(summary),
        ...(take ? { taken } : {}),
      };
      return { output: text(JSON.stringify(answer)), stopReason: 'completed' };
    },
  };
}

const echo = echoProvider(uniqueName('echo'));
// No context cache: every turn reads the conversation from the workflow, as a turn on another worker
// of a fleet (or after a restart) does.
const runs = testRuns([echo], { worker: { contextCacheSize: 0 } });

const pendingIs = (runId: string, count: number) =>
  eventually(async () => ((await runs.status(runId)).pendingMessages === count ? true : undefined), 30_000);

it('reads a conversation of 6 MB, each message of nearly a payload, from the workflow a page at a time: a turn on a worker without it in its cache was retried until the run ended error (the query answer past the 2 MiB limit)', async () => {
  const run = runs.service.start(echo.name, { prompt: text('go'), parent: { id: 'p' } });
  for (let n = 0; n < 3; n++) {
    await turnOf(run, n);
    run.sendMessage!(big(`m${n}`));
    await pendingIs(run.id, 1);
    release(run.id, n);
  }
  await turnOf(run, 3);
  release(run.id, 3);
  const result = await run.result;
  expect(result.stopReason).toBe('completed');
  expect(JSON.parse(textOf(result.output))).toEqual({
    turn: 3,
    transcript: [
      'user go 2',
      expect.stringMatching(/^assistant \{"turn":0/),
      `user m0 ${BIG}`,
      expect.stringMatching(/^assistant \{"turn":1/),
      `user m1 ${BIG}`,
      expect.stringMatching(/^assistant \{"turn":2/),
    ],
    input: [`m2 ${BIG}`],
  });
  await run.dispose();
}, 120_000);

it('hands a turn the messages waiting mid-turn, 6 MB of them, a page at a time, and only those it has not taken: takeMessages failed (the query answer past the 2 MiB limit)', async () => {
  const run = runs.service.start(echo.name, { prompt: text('go'), parent: { id: 'p' }, agentOptions: { take: true } });
  await turnOf(run, 0);
  for (const name of ['a', 'b', 'c']) run.sendMessage!(big(name));
  await pendingIs(run.id, 3);
  release(run.id, 0);
  const result = await run.result;
  expect(result.stopReason).toBe('completed');
  expect(JSON.parse(textOf(result.output))).toEqual({
    turn: 0,
    transcript: [],
    input: ['go 2'],
    taken: [[`a ${BIG}`, `b ${BIG}`, `c ${BIG}`], []],
  });
  await run.dispose();
}, 120_000);

it('fails a turn for good, PAYLOAD_TOO_LARGE, when one conversation entry is more than the server answers a query with even alone (a raw client’s message just under its limit): it was retried as if the next attempt could read it', async () => {
  // A message 90 bytes under the server's 2 MiB passes as a signal; with what an entry and a page
  // add around it, not as a query's answer. (A server of its own: the shared one's worker would
  // log the refusal in every test file's output.)
  const LIMIT = 2 * 1024 * 1024;
  const temporal = await startTestServer();
  const provider = echoProvider(uniqueName('echo-limit'));
  const stopWorker = await startWorker(temporal, [provider], { contextCacheSize: 0 });
  try {
    const service = newService(temporal);
    service.registerProvider(provider);
    const run = service.start(provider.name, { prompt: text('go'), parent: { id: 'p' } });
    await turnOf(run, 0);
    const handle = temporal.client.workflow.getHandle(run.id);
    await handle.signal(sendMessageSignal, { content: text('x'.repeat(LIMIT - 90)) });
    await eventually(async () => ((await handle.query(statusQuery)).pendingMessages === 1 ? true : undefined));
    release(run.id, 0);
    release(run.id, 1);
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('conversation entry 2 is too large for the server to answer a query with');
    // The turn that could not read it failed on its first attempt: no retry can shrink the entry.
    const events = (await handle.fetchHistory()).events ?? [];
    const attempts = events.flatMap((event) => event.activityTaskStartedEventAttributes?.attempt ?? []);
    expect(attempts).toEqual([1, 1]);
  } finally {
    await stopWorker();
    await temporal.close();
  }
}, 120_000);

it('takes the whole answer of a run whose workflow code is from before pages (a fleet in the middle of a deploy), its conversation and its waiting messages', async () => {
  // This build's activities beside the workflow code frozen before pages, whose handlers answer
  // the whole list whatever they are asked.
  const provider = echoProvider(uniqueName('echo-before-pages'));
  const stopWorker = await startWorker(runs.temporal, [provider], {
    contextCacheSize: 0,
    workflowBundle: { codePath: join(__dirname, '..', 'fixtures', 'builds', 'workflows-95c8865.js') },
  });
  try {
    const service = newService(runs.temporal);
    service.registerProvider(provider);
    // Turn 1 reads the conversation before it from the workflow: the worker keeps no cache.
    const reading = service.start(provider.name, { prompt: text('go'), parent: { id: 'p' } });
    await turnOf(reading, 0);
    reading.sendMessage!(text('a'));
    await pendingIs(reading.id, 1);
    release(reading.id, 0);
    await turnOf(reading, 1);
    release(reading.id, 1);
    expect(JSON.parse(textOf((await reading.result).output))).toEqual({
      turn: 1,
      transcript: ['user go 2', expect.stringMatching(/^assistant \{"turn":0/)],
      input: ['a 1'],
    });
    // Turn 0 takes the messages waiting mid-turn, then finds none it has not taken.
    const taking = service.start(provider.name, {
      prompt: text('go'),
      parent: { id: 'p' },
      agentOptions: { take: true },
    });
    await turnOf(taking, 0);
    for (const name of ['b', 'c']) taking.sendMessage!(text(name));
    await pendingIs(taking.id, 2);
    release(taking.id, 0);
    expect(JSON.parse(textOf((await taking.result).output))).toMatchObject({ taken: [['b 1', 'c 1'], []] });
    await Promise.all([reading.dispose(), taking.dispose()]);
  } finally {
    await stopWorker();
  }
}, 120_000);
