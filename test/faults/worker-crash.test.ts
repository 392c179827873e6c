// A worker process SIGKILLed mid-turn: the run completes on a restarted worker with the right
// result, the interrupted turn is redone with the same input, and no message reaches two turns.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SubagentRunEvent, TranscriptEntry } from '../../src';
import {
  createScriptedProvider,
  type FakeOpenAI,
  hangReply,
  ReadyProcess,
  ScriptedTurnEvent,
  spawnWorkerProcess,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import { EventType } from '../../src/temporal/run-history';
import { runContextQuery, statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  newService,
  TestTemporal,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

type LoggedEvent = ScriptedTurnEvent & { pid: number };

let temporal: TestTemporal;
const workers: ReadyProcess[] = [];

beforeAll(async () => {
  temporal = await connectTestTemporal();
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await temporal?.close();
});

/** A provider name of its own, its descriptor registered, and the crash fixture's event log. */
function crashSetup(runSettings = {}) {
  const name = uniqueName('crash');
  const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-crash-')), 'events.jsonl');
  writeFileSync(eventsFile, '');
  const env = { PROVIDER_NAME: name, EVENTS_FILE: eventsFile };
  const events = () =>
    readFileSync(eventsFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as LoggedEvent);
  const service = newService(temporal);
  service.registerProvider(
    createScriptedProvider({
      name,
      runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' }, ...runSettings },
    }),
  );
  const spawnWorker = async () => {
    const worker = await spawnWorkerProcess(env);
    workers.push(worker);
    return worker;
  };
  return { name, events, service, spawnWorker };
}

/** A spawn provider of its own against `fake`, registered, and its worker processes (SIGKILL-able). */
function spawnCrashSetup(fake: FakeOpenAI, prefix: string) {
  const name = uniqueName(prefix);
  const service = newService(temporal);
  service.registerProvider(
    createSpawnProvider({ name, runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } } }),
  );
  const env = {
    PROVIDER_NAME: name,
    PROVIDER_KIND: 'spawn',
    OPENAI_BASE_URL: fake.baseURL,
    SUBAGENT_MODEL: 'fake-model',
  };
  const spawnWorker = async () => {
    const worker = await spawnWorkerProcess(env);
    workers.push(worker);
    return worker;
  };
  return { name, service, spawnWorker };
}

it('completes on a restarted worker after a SIGKILL mid-turn, delivering each message to exactly one turn', async () => {
  const { name, events, service, spawnWorker } = crashSetup();
  const started = (turn: number, attempt = 1) =>
    eventually(() => events().find((e) => e.kind === 'turn-start' && e.turn === turn && e.attempt === attempt), 30_000);

  const firstWorker = await spawnWorker();
  const gates = turnGates();
  const run = service.start(name, {
    prompt: text('go'),
    parent: { id: 'parent' },
    agentOptions: {
      script: [
        // Held until both messages are queued; then turn 1 stalls until its worker is killed.
        { waitFor: gates.waitFor, reply: 'read {input}' },
        { stallFirstAttemptMs: 60_000, reply: 'steered by {input}' },
        { reply: 'final after {conversation}, then {input}' },
      ],
    },
  });
  await started(0);
  run.sendMessage!(text('m1'));
  run.sendMessage!(text('m2'));
  const handle = temporal.client.workflow.getHandle(run.id);
  await eventually(async () => ((await handle.query(statusQuery)).pendingMessages === 2 ? true : undefined));
  gates.open(run.id, 0);

  const victim = await started(1);
  await firstWorker.kill('SIGKILL');
  run.sendMessage!(text('m3')); // arrives while no worker is alive
  await spawnWorker();

  expect(await run.result).toEqual({
    output: text('final after go | m1 | m2, then m3'),
    stopReason: 'completed',
  });

  const log = events();
  const retried = log.filter((e) => e.kind === 'turn-start' && e.turn === 1);
  expect(retried.map((e) => e.attempt)).toEqual([1, 2]);
  expect(retried.map((e) => e.input)).toEqual([
    ['m1', 'm2'],
    ['m1', 'm2'],
  ]);
  expect(retried[1]!.pid).not.toBe(victim.pid);
  expect(log.some((e) => e.kind === 'turn-end' && e.turn === 1 && e.attempt === 1)).toBe(false);

  // Each message went to exactly one turn (retries of a turn repeat that turn, never another).
  const turnsOf = new Map<string, Set<number>>();
  for (const event of log.filter((e) => e.kind === 'turn-start')) {
    for (const message of event.input) turnsOf.set(message, (turnsOf.get(message) ?? new Set()).add(event.turn));
  }
  expect(Object.fromEntries([...turnsOf].map(([message, turns]) => [message, [...turns]]))).toEqual({
    go: [0],
    m1: [1],
    m2: [1],
    m3: [2],
  });

  // The durable conversation holds every message once and one answer per turn.
  const { entries } = await temporal.client.workflow.getHandle(run.id).query(runContextQuery);
  const flat = entries.map((entry: TranscriptEntry) =>
    entry.kind === 'tool'
      ? 'tool'
      : `${entry.kind}:${entry.content.map((b) => (b.type === 'text' ? b.text : '')).join('')}`,
  );
  expect(flat).toEqual([
    'user:go',
    'assistant:read go',
    'user:m1',
    'user:m2',
    'assistant:steered by m1 | m2',
    'user:m3',
    'assistant:final after go | m1 | m2, then m3',
  ]);
  await run.dispose();
}, 90_000);

it("hands the run to the surviving worker at once when its worker is SIGKILLed mid-turn, not after the dead one's sticky queue", async () => {
  const { name, events, service, spawnWorker } = crashSetup();
  const workers = [await spawnWorker(), await spawnWorker()];
  const run = service.start(name, {
    prompt: text('go'),
    parent: { id: 'parent' },
    agentOptions: { script: [{ stallFirstAttemptMs: 60_000, reply: 'survived' }] },
  });
  // The turn runs on the worker that ran the run's workflow task (eager dispatch), which keeps the
  // workflow's next tasks on its sticky queue.
  const victim = await eventually(() => events().find((e) => e.kind === 'turn-start' && e.attempt === 1), 30_000);
  await workers.find((worker) => worker.child.pid === victim.pid)!.kill('SIGKILL');

  expect(await run.result).toEqual({ output: text('survived'), stopReason: 'completed' });
  const retried = events().filter((e) => e.kind === 'turn-start' && e.attempt === 2);
  expect(retried.map((e) => e.pid)).toEqual([workers.find((worker) => worker.child.pid !== victim.pid)!.child.pid]);
  // The retried turn released the run: the task after it went to the task queue, where the
  // survivor took it, instead of timing out on the dead worker's sticky queue first.
  const history = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  const types = history.events!.map((e) => e.eventType);
  expect(types).toContain(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED);
  expect(types).not.toContain(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT);
  await run.dispose();
}, 90_000);

it('yields structured exactly once when the worker is SIGKILLed right after the capture', async () => {
  const { name, events, service, spawnWorker } = crashSetup();
  const firstWorker = await spawnWorker();
  const run = service.start(name, {
    prompt: text('capture then die'),
    parent: { id: 'parent' },
    outputSchema: { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] },
    agentOptions: {
      // The first attempt holds after its capture until its worker is killed.
      script: [{ calls: [{ name: 'structured_output', arguments: { verdict: 'ship it' } }], holdFirstAttempt: true }],
    },
  });
  await eventually(() => events().find((e) => e.kind === 'tool-result' && e.attempt === 1), 30_000);
  await firstWorker.kill('SIGKILL');
  await spawnWorker();

  const result = await run.result;
  expect(result.structured).toEqual({ verdict: 'ship it' });
  expect(result.stopReason).toBe('completed');
  const captures = events().filter((e) => e.kind === 'tool-result' && e.tool?.result === 'Structured output recorded.');
  expect(captures.map((e) => e.attempt)).toEqual([1, 2]);
  const history = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  const completions = history.events!.filter((e) => e.activityTaskCompletedEventAttributes);
  expect(completions).toHaveLength(1);
  await run.dispose();
}, 90_000);

it('repeats no completed model call when the worker is SIGKILLed between two model calls, and charges the cut-off call once', async () => {
  const fake = await startFakeOpenAI();
  try {
    const { name, service, spawnWorker } = spawnCrashSetup(fake, 'crash-spawn');
    const first = await spawnWorker();
    fake.enqueue(
      toolCallReply([{ id: 'call-ls', name: 'list_directory', arguments: {} }]),
      hangReply(),
      textReply('survived'),
    );
    const cwd = mkdtempSync(join(tmpdir(), 'subagent-crash-cwd-'));
    const run = service.start(name, {
      prompt: text('list, then answer'),
      parent: { id: 'p', session: { header: { id: 's', cwd } } },
    });

    await fake.waitForRequests(2, 30_000);
    await first.kill('SIGKILL');
    await spawnWorker();

    expect(await run.result).toEqual({ output: text('survived'), stopReason: 'completed' });
    const conversations = fake.requests.map((request) =>
      (request.body.messages as { role: string }[]).map((m) => m.role).join(','),
    );
    expect(conversations).toEqual(['system,user', 'system,user,assistant,tool', 'system,user,assistant,tool']);
    expect(fake.requests[1]!.aborted).toBe(true);
    const history = await temporal.client.workflow.getHandle(run.id).fetchHistory();
    const scheduled = history.events!.flatMap((e) =>
      e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType!.name] : [],
    );
    // list_directory is inline: the first model call ran it.
    expect(scheduled).toEqual(['subagentModelCall', 'subagentModelCall']);
    // The call the kill cut off is charged once, by the attempt that answered: two calls of 15 tokens.
    const { spend } = await temporal.client.workflow.getHandle(run.id).query(statusQuery);
    expect(spend).toEqual({ turns: 1, modelCalls: 2, tokens: 30, costUsd: 0 });
    await run.dispose();
  } finally {
    await fake.close();
  }
}, 90_000);

it('loses no streamed text its run published when the worker is SIGKILLed mid-stream; the retry streams again', async () => {
  const fake = await startFakeOpenAI();
  try {
    const { name, service, spawnWorker } = spawnCrashSetup(fake, 'crash-stream');
    const first = await spawnWorker();
    const words = Array.from({ length: 40 }, (_, index) => `w${index}`).join(' ');
    // The first attempt streams 40 words 100 ms apart and dies with its worker part way; the retry streams fast.
    fake.enqueue(textReply(words, { tokenDelayMs: 100 }), textReply(words, { tokenDelayMs: 20 }));
    const run = service.start(name, { prompt: text('talk'), parent: { id: 'p' } });

    const beforeKill: SubagentRunEvent[] = [];
    for await (const event of run.events!()) {
      beforeKill.push(event);
      if (beforeKill.filter((e) => e.type === 'text-delta').length === 2) break;
    }
    await first.kill('SIGKILL');
    await spawnWorker();
    expect(await run.result).toEqual({ output: text(words), stopReason: 'completed' });

    const all: SubagentRunEvent[] = [];
    for await (const event of run.events!({ follow: false })) all.push(event);
    // Everything read before the kill is still there, at the same offsets.
    expect(all.slice(0, beforeKill.length)).toEqual(beforeKill);
    const deltas = all.flatMap((event) => (event.type === 'text-delta' ? [event] : []));
    const attempt = (n: number) =>
      deltas
        .filter((event) => event.attempt === n)
        .map((event) => event.text)
        .join('');
    expect(attempt(1).length).toBeGreaterThan(0);
    expect(words.startsWith(attempt(1))).toBe(true);
    expect(words.startsWith(attempt(2))).toBe(true);
    expect(all.find((event) => event.type === 'text')).toMatchObject({ text: words });
    await run.dispose();
  } finally {
    await fake.close();
  }
}, 90_000);

it('keeps an approval request across a SIGKILL of the worker whose turn asked it; the retry joins it, answered once', async () => {
  const { name, events, service, spawnWorker } = crashSetup();
  const first = await spawnWorker();
  const run = service.start(name, {
    prompt: text('ship'),
    parent: { id: 'parent' },
    agentOptions: {
      script: [{ askApproval: { tool: 'deploy', arguments: { env: 'prod' } }, reply: 'deploy: {approval}' }],
    },
  });
  const seen: SubagentRunEvent[] = [];
  for await (const event of run.events!()) {
    seen.push(event);
    if (event.type === 'approval-requested') break;
  }
  const { requestId } = seen.at(-1) as SubagentRunEvent & { requestId: string };
  await first.kill('SIGKILL');
  await spawnWorker();
  // The retried turn asks the same again: it joins the request that waits, and asks nothing new.
  await eventually(() => events().find((e) => e.kind === 'turn-start' && e.attempt === 2), 30_000);
  const handle = temporal.client.workflow.getHandle(run.id);
  await eventually(async () => {
    const { pendingApprovals } = await handle.query(statusQuery);
    return pendingApprovals?.length === 1 && pendingApprovals[0]!.requestId === requestId ? true : undefined;
  });
  await run.approve!(requestId, 'allow');
  expect(await run.result).toEqual({ output: text('deploy: allow'), stopReason: 'completed' });

  const all: SubagentRunEvent[] = [];
  for await (const event of run.events!({ follow: false })) all.push(event);
  expect(all.filter((event) => event.type.startsWith('approval'))).toEqual([
    expect.objectContaining({ type: 'approval-requested', requestId }),
    expect.objectContaining({ type: 'approval-decided', requestId, decision: 'allow', by: 'caller' }),
  ]);
  await run.dispose();
}, 90_000);
