// The `subagents` command against the real server, as a user runs it: a separate process per
// invocation, human and --json output, exit codes, the audit trail's tamper check, and `logs`
// following an LLM child as it streams and waits for an approval.
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { temporal as proto } from '@temporalio/proto';
import { type SubagentRunSettings, type SubagentTool, canonicalJson, runStarted, toolResult } from '../../src';
import {
  createScriptedProvider,
  errorReply,
  type FakeOpenAI,
  freePort,
  hangReply,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { createDelegationTool, createSpawnProvider } from '../../src/worker';
import { statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  FRESH_PROCESS_WITHIN_MS,
  newService,
  startWorker,
  TestTemporal,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

const CLI = resolve(__dirname, '..', '..', 'src', 'cli', 'index.ts');
/**
 * Each invocation is a fresh Node process that compiles the CLI as it loads it: about 4 s on an
 * idle machine, over 10 s beside CI's fault suites. A test runs several, one after another.
 */
jest.setTimeout(120_000);
const scripted = createScriptedProvider({ name: uniqueName('cli'), runSettings: { resumeWindow: '1 hour' } });
/** A tool every call of which waits for a person. */
const deploy: SubagentTool = {
  name: 'deploy',
  description: 'Deploys the release.',
  parameters: { type: 'object', properties: { env: { type: 'string' } }, required: ['env'] },
  needsApproval: true,
  execute: async () => toolResult('deployed'),
};
let temporal: TestTemporal;
/** The model endpoint of the LLM children; a request nothing was queued for hangs until cancelled. */
let fake: FakeOpenAI;
/** An LLM child on the fake endpoint, which streams its answers. */
let llm: ReturnType<typeof createSpawnProvider>;
let stopWorker: () => Promise<void>;

beforeAll(async () => {
  temporal = await connectTestTemporal();
  fake = await startFakeOpenAI();
  fake.setHandler(() => hangReply());
  llm = createSpawnProvider({
    name: uniqueName('cli-spawn'),
    tools: [deploy],
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
  });
  stopWorker = await startWorker(temporal, [scripted, llm], { heartbeatIntervalMs: 200 });
});
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
  await fake?.close();
});

/** USD per million tokens of the fake endpoint's model, as the LLM children's workers price it. */
const modelPrices = { 'fake-model': { inputPerMillionTokens: 1000, outputPerMillionTokens: 2000 } };
const parent = { id: 'cli-test', session: { header: { id: 's' } } };

/** A `spawn` child on the fake endpoint, hosted by a worker of its own until the returned `stop`. */
async function llmChild(options: Omit<Parameters<typeof createSpawnProvider>[0], 'endpoint'>) {
  const provider = createSpawnProvider({ ...options, endpoint: { baseURL: fake.baseURL, model: 'fake-model' } });
  const stop = await startWorker(temporal, [provider], { heartbeatIntervalMs: 200, modelPrices });
  const service = newService(temporal);
  service.registerProvider(provider);
  return { provider, service, stop };
}

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', CLI, ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: temporal.address, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}
/** The CLI running on until it exits by itself: what it has printed so far, line by line. */
function cliRunning(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    env: { ...process.env, TEMPORAL_ADDRESS: temporal.address },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const lines: string[] = [];
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => child.once('close', (code) => done(code)));
  return {
    lines,
    exited,
    /** Whether it is still running. */
    running: () => child.exitCode === null && child.signalCode === null,
    /** The first line `matches`, once printed; fails with what it printed if none comes, or it exits first. */
    async line(matches: (line: string) => boolean): Promise<string> {
      try {
        return await eventually(() => {
          const found = lines.find(matches);
          if (found !== undefined || child.exitCode === null) return found;
          throw new Error(`the CLI exited ${child.exitCode}`);
        }, FRESH_PROCESS_WITHIN_MS);
      } catch (err) {
        throw new Error(`${(err as Error).message} without the line; it printed:\n${lines.join('\n')}\n${stderr}`, {
          cause: err,
        });
      }
    },
  };
}
/** CLI processes still to stop after the test (a failed one leaves them running). */
const running = new Set<ReturnType<typeof spawn>>();
afterEach(() => {
  for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
  running.clear();
  // A failed test's unused replies would answer the next test's model calls (one held for good).
  fake.discardQueued();
});

const json = (outcome: Outcome) => JSON.parse(outcome.stdout.trim().split('\n').at(-1)!) as Record<string, any>;

it('starts a run and waits for it, with progress on stderr and the result on stdout', async () => {
  const slow = JSON.stringify({ script: [{ delayMs: 1500, reply: 'counted: {input}' }] });
  const outcome = await cli(['start', scripted.name, 'count the files', '--agent-options', slow, '--wait']);
  expect(outcome.code).toBe(0);
  expect(outcome.stdout.trim()).toBe('completed: counted: count the files');
  expect(outcome.stderr).toContain('started subagent-');
  expect(outcome.stderr).toMatch(/turn 0 completed/);
});

it('prints the diagnostic of a result that did not complete, and exits 1', async () => {
  const failing = JSON.stringify({ script: [{ fail: 'the disk is full' }] });
  const outcome = await cli(['start', scripted.name, 'write the report', '--agent-options', failing, '--wait']);
  expect(outcome.code).toBe(1);
  expect(outcome.stdout.trim()).toBe('error: \ndiagnostic: Activity task failed: the disk is full');
});

it('starts, lists, shows, messages, resumes and logs a run in --json', async () => {
  const started = await cli(['start', scripted.name, 'first task', '--json']);
  expect(started.code).toBe(0);
  const id = json(started).id as string;

  const shown = await eventually(async () => {
    const outcome = json(await cli(['show', id, '--json']));
    return outcome.status === 'parked' ? outcome : undefined;
  }, 20_000);
  expect(shown).toMatchObject({
    id,
    provider: scripted.name,
    depth: 1,
    stopReason: 'completed',
    turns: 1,
    lastResult: { stopReason: 'completed' },
  });

  const listed = await eventually(async () => {
    const rows = json(await cli(['list', '--provider', scripted.name, '--status', 'parked', '--json'])) as unknown as {
      id: string;
    }[];
    return rows.some((row) => row.id === id) ? rows : undefined;
  }, 20_000);
  expect(listed.find((row) => row.id === id)).toMatchObject({
    provider: scripted.name,
    status: 'parked',
    stopReason: 'completed',
  });

  const resumed = await cli(['resume', id, 'second task', '--wait', '--json']);
  expect(resumed.code).toBe(0);
  expect(json(resumed)).toMatchObject({
    id,
    stopReason: 'completed',
    output: [{ type: 'text', text: 'scripted reply to: second task' }],
  });

  const logs = await cli(['logs', id, '--no-follow']);
  expect(logs.stdout).toContain(`started on ${scripted.name}: first task`);
  expect(logs.stdout).toContain('resume: second task');
  expect(logs.stdout).toContain('turn 1 completed: scripted reply to: second task');
});

it('sends a message to a running run, and cancels another', async () => {
  const gates = turnGates();
  const script = JSON.stringify({
    script: [{ waitFor: gates.waitFor, reply: 'first' }, { reply: 'then got: {input}' }],
  });
  const steered = json(await cli(['start', scripted.name, 'slow task', '--agent-options', script, '--json']));
  const sent = await cli(['send', steered.id, 'also this']);
  expect(sent.code).toBe(0);
  expect(sent.stdout).toContain(`sent to ${steered.id}`);
  // The first turn is held until the message is in, so the message starts the second.
  const handle = temporal.client.workflow.getHandle(steered.id as string);
  await eventually(async () => ((await handle.query(statusQuery)).pendingMessages === 1 ? true : undefined));
  gates.open(steered.id as string, 0);
  const done = await eventually(async () => {
    const outcome = json(await cli(['show', steered.id, '--json']));
    return outcome.status === 'parked' ? outcome : undefined;
  }, 20_000);
  expect(done.lastResult.output).toEqual([{ type: 'text', text: 'then got: also this' }]);

  const hanging = json(
    await cli([
      'start',
      scripted.name,
      'never ends',
      '--agent-options',
      JSON.stringify({ script: [{ hang: true }] }),
      '--json',
    ]),
  );
  const cancelled = await cli(['cancel', hanging.id]);
  expect(cancelled.code).toBe(0);
  const shown = await eventually(async () => {
    const outcome = json(await cli(['show', hanging.id, '--json']));
    return outcome.temporalStatus === 'COMPLETED' ? outcome : undefined;
  }, 20_000);
  expect(shown).toMatchObject({ status: 'closed', stopReason: 'aborted' });

  // Once it has closed: a message is refused saying so, and a cancel has nothing to do.
  const late = await cli(['send', hanging.id, 'too late']);
  expect(late.code).toBe(6);
  expect(late.stderr).toContain(`run ${hanging.id} has closed (completed): it takes no more messages`);
  const again = await cli(['cancel', hanging.id, '--json']);
  expect(again.code).toBe(0);
  expect(json(again)).toEqual({ id: hanging.id, cancelRequested: false });
});

it('shows a held tool call in show and logs, lets approve answer it, and exits 1 for an answer that came too late', async () => {
  const asking = JSON.stringify({
    script: [{ askApproval: { tool: 'deploy', arguments: { env: 'prod' } }, reply: 'deploy: {approval}' }],
  });
  const id = json(await cli(['start', scripted.name, 'ship it', '--agent-options', asking, '--json'])).id as string;
  const shown = await eventually(async () => {
    const outcome = json(await cli(['show', id, '--json']));
    return outcome.pendingApprovals?.length === 1 ? outcome : undefined;
  }, 20_000);
  expect(shown.status).toBe('awaiting-approval');
  const requestId = shown.pendingApprovals[0].requestId as string;
  expect((await cli(['show', id])).stdout).toContain(`awaiting approval ${requestId}: deploy({"env":"prod"})`);
  expect((await cli(['logs', id, '--no-follow'])).stdout).toContain(`awaiting approval ${requestId}`);

  const approved = await cli(['approve', id, requestId, '--reason', 'release window']);
  expect(approved).toMatchObject({ code: 0, stdout: `approved ${requestId}\n` });
  const denied = await cli(['deny', id, requestId, '--json']);
  expect(denied.code).toBe(1);
  expect(json(denied)).toMatchObject({ decision: 'allow', by: 'caller', reason: 'release window' });
  expect((await cli(['deny', id, `${id}/t7.nothing`])).code).toBe(3);
  await eventually(async () =>
    (await cli(['logs', id, '--no-follow'])).stdout.includes('approval allow') ? true : undefined,
  );
});

it('follows an LLM child with logs --follow: a held call as pending, its text as it streams, then the close', async () => {
  let releaseRest = () => {};
  const rest = new Promise<void>((resolve) => (releaseRest = resolve));
  const answer = 'the release is out in production now';
  fake.enqueue(
    toolCallReply([{ name: 'deploy', arguments: { env: 'prod' } }]),
    textReply(answer, { tokenDelayMs: 20, hold: { afterWords: 4, until: rest } }),
  );
  const service = newService(temporal);
  service.registerProvider(llm);
  const run = service.start(llm.name, { prompt: text('ship it'), parent: { id: 'cli-parent' } });
  await runStarted(run);
  const logs = cliRunning(['logs', run.id, '--follow']);
  /** The records printed so far, without their times. */
  const records = () => logs.lines.map((line) => line.replace(/^\S+ {2}/, ''));

  const requestId = `${run.id}/t0.s0.c0`;
  const pending = `awaiting approval ${requestId}: deploy({"env":"prod"}) (subagents approve|deny ${run.id} ${requestId})`;
  await logs.line((line) => line.includes('awaiting approval'));
  expect(records()).toContain(pending);
  expect(await run.approve!(requestId, 'allow')).toMatchObject({ decision: 'allow' });
  // The model holds the rest of its answer: what it streamed so far is printed already.
  const streamed = () =>
    records()
      .flatMap((record) => (record.startsWith('… ') ? [record.slice(2)] : []))
      .join('');
  await logs.line((line) => line.includes('… ') && line.endsWith('out '));
  expect(streamed()).toBe('the release is out ');
  expect(records().filter((record) => record.includes(answer))).toEqual([]);
  releaseRest();
  await logs.line((line) => line.endsWith('result of segment 0: completed'));
  // A settled run stays open for a resume, and so does the stream: it ends with the close.
  expect(logs.running()).toBe(true);
  await run.dispose();
  expect(await logs.exited).toBe(0);
  expect(records().filter((record) => !record.startsWith('… '))).toEqual([
    `started on ${llm.name}: ship it`,
    'model call (turn 0) completed: ',
    pending,
    expect.stringMatching(/^answer allow from \S+: subagent-/),
    `approval allow (caller): ${requestId}`,
    'tool deploy({"env":"prod"})',
    `model call (turn 0) completed: ${answer}`,
    'result of segment 0: completed',
    'dispose requested',
    'closed (disposed)',
  ]);
});

it('shows a run with every run below it and what each spent (show --tree)', async () => {
  const delegating = JSON.stringify({
    script: [
      { delegate: { provider: scripted.name, prompt: 'nested', script: [{ reply: 'leaf' }] }, reply: 'got {child}' },
    ],
  });
  const id = json(await cli(['start', scripted.name, 'top', '--agent-options', delegating, '--json'])).id as string;
  await eventually(
    async () => (json(await cli(['show', id, '--json'])).status === 'parked' ? true : undefined),
    20_000,
  );
  const tree = await cli(['show', id, '--tree', '--json']);
  expect(tree.code).toBe(0);
  const nodes = json(tree) as unknown as Record<string, any>[];
  expect(nodes.map((node) => [node.treeDepth, node.depth])).toEqual([
    [0, 1],
    [1, 2],
  ]);
  expect(nodes[0]!.spend).toEqual({ turns: 2, modelCalls: 0, tokens: 0, costUsd: 0 });
  const human = (await cli(['show', id, '--tree'])).stdout.trim().split('\n');
  expect(human).toEqual([
    `${id}  parked (completed)  itself 0 tokens, 0 model calls, 1 turns, $0.0000; with the runs below it 0 tokens, 0 model calls, 2 turns, $0.0000`,
    expect.stringMatching(
      /^ {2}subagent-.* {2}closed \(completed\) {2}itself 0 tokens, 0 model calls, 1 turns, \$0\.0000; with the runs below it 0 tokens, 0 model calls, 1 turns, \$0\.0000$/,
    ),
  ]);
});

it('shows a tree of LLM runs with what each spent itself and with the runs below it; with no worker, it finds the children by their search attribute', async () => {
  const name = uniqueName('cli-tree');
  const { provider, service, stop } = await llmChild({ name, tools: [createDelegationTool({ provider: name })] });
  fake.enqueue(
    toolCallReply([{ name: 'subagent', arguments: { description: 'go down', prompt: 'leaf' } }], {
      usage: { prompt: 8, completion: 2 },
    }),
    textReply('leaf done', { usage: { prompt: 20, completion: 4 } }),
    textReply('all done', { usage: { prompt: 30, completion: 6 } }),
  );
  const run = service.start(provider.name, { prompt: text('delegate'), parent });
  try {
    expect((await run.result).stopReason).toBe('completed');
    const [childId] = (await temporal.client.workflow.getHandle(run.id).query(statusQuery)).children;
    const human = (await cli(['show', run.id, '--tree'])).stdout.trim().split('\n');
    // At $1,000 and $2,000 a million: the child's call (20 + 4) $0.028, the root's two (38 + 8) $0.054.
    expect(human).toEqual([
      `${run.id}  parked (completed)  itself 46 tokens, 2 model calls, 1 turns, $0.0540; with the runs below it 70 tokens, 3 model calls, 2 turns, $0.0820`,
      `  ${childId}  closed (completed)  itself 24 tokens, 1 model calls, 1 turns, $0.0280; with the runs below it 24 tokens, 1 model calls, 1 turns, $0.0280`,
    ]);
    expect((await cli(['show', childId!])).stdout).toContain(
      '  spent by itself: 24 tokens, 1 model calls, 1 turns, $0.0280\n',
    );
  } finally {
    await stop();
  }
  // No worker answers the runs' status now: the child is found by its SubagentParentRunId.
  const orphaned = (await cli(['show', run.id, '--tree'])).stdout.trim().split('\n');
  expect(orphaned).toEqual([
    `${run.id}  parked (completed)  spend unknown`,
    expect.stringMatching(/^ {2}subagent-.* {2}closed \(completed\) {2}spend unknown$/),
  ]);
});

const WAITING = /waiting for the model endpoint's rate limit until (\S+)/;
/** A 429 asking the caller to come back in `seconds`. */
const rateLimited = (seconds: number) =>
  errorReply(429, 'rate limit reached', { headers: { 'retry-after': String(seconds) }, type: 'rate_limit_error' });
/** The attempt of the run's pending model call, and whether it is running (not waiting for its retry). */
async function pendingCall(runId: string) {
  const { raw } = await temporal.client.workflow.getHandle(runId).describe();
  const [activity] = raw.pendingActivities ?? [];
  return (
    activity && {
      attempt: activity.attempt ?? 0,
      running: activity.state === proto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
    }
  );
}

/**
 * Runs an LLM child with `retry` whose first model call the endpoint answers 429 with a Retry-After
 * of `seconds` (and any later one not at all), waits until `subagents show` prints the wait, and
 * checks that it says until when; hands `check` the run and that time, then cancels the run. Each
 * attempt is cut off after 10 s: long enough for a CLI process to start and show the first one's
 * wait under load.
 */
async function whileRateLimited(
  seconds: number,
  retry: SubagentRunSettings['retry'],
  check: (runId: string, until: number) => Promise<void>,
): Promise<void> {
  const runSettings = { turnTimeout: '10 seconds', heartbeatTimeout: '2 seconds', retry };
  const { provider, service, stop } = await llmChild({ name: uniqueName('cli-429'), tools: [], runSettings });
  try {
    fake.enqueue(rateLimited(seconds));
    const asked = fake.requests.length;
    const run = service.start(provider.name, { prompt: text('hello'), parent });
    await fake.waitForRequests(asked + 1);
    const refusedAt = Date.now();
    const shown = await eventually(async () => WAITING.exec((await cli(['show', run.id])).stdout) ?? undefined, 15_000);
    const until = Date.parse(shown[1]!);
    expect(until).toBeGreaterThan(refusedAt + (seconds - 1) * 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + seconds * 1000);
    await check(run.id, until);
    run.cancel('done looking');
    expect((await run.result).stopReason).toBe('aborted');
  } finally {
    await stop();
  }
}

it("prints a model call's rate-limit wait while it lasts, and not once it is over, though the attempt that waited was cut off in it", async () => {
  // The attempt's 10 s run out within the endpoint's 15 s; its retry waits 30 s.
  await whileRateLimited(15, { initialInterval: '30 seconds' }, async (runId, until) => {
    // The attempt timed out in its wait and left it in its heartbeat; once the wait is over it is none.
    await eventually(
      async () => ((await pendingCall(runId))?.attempt === 2 && Date.now() > until ? true : undefined),
      30_000,
    );
    const after = await cli(['show', runId]);
    expect(after.code).toBe(0);
    expect(after.stdout).not.toMatch(WAITING);
    expect(json(await cli(['show', runId, '--json'])).rateLimitedUntil).toBeUndefined();
  });
});

it('does not show the rate-limit wait of an attempt before as the wait of the one that retried it', async () => {
  // The first attempt is cut off 10 s into a 120 s wait; the second asks at once, and hangs.
  await whileRateLimited(120, { initialInterval: '1 second' }, async (runId) => {
    await eventually(async () => {
      const call = await pendingCall(runId);
      return call && call.attempt >= 2 && call.running ? true : undefined;
    }, 20_000);
    // The wait the first attempt left is still ahead, but the attempt running now is not in it.
    await eventually(
      async () => (json(await cli(['show', runId, '--json'])).rateLimitedUntil === undefined ? true : undefined),
      30_000,
    );
  });
});

it('exports an audit trail that verifies, and detects an edited, a removed and a reordered record', async () => {
  const started = json(await cli(['start', scripted.name, 'audited task', '--wait', '--json']));
  const dir = mkdtempSync(join(tmpdir(), 'subagent-audit-'));
  const file = join(dir, 'audit.jsonl');
  expect((await cli(['audit', 'export', started.id, '--out', file])).code).toBe(0);
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  const types = lines.map((line) => JSON.parse(line).type);
  expect(types.slice(0, 2)).toEqual(['audit.header', 'start']);
  expect(types).toContain('turn');
  expect(types).toContain('result');
  expect(await cli(['audit', 'verify', file])).toMatchObject({
    code: 0,
    stdout: expect.stringContaining('chain intact'),
  });

  const tampered = (name: string, edit: (records: string[]) => string[]) => {
    const path = join(dir, name);
    writeFileSync(path, edit([...lines]).join('\n') + '\n');
    return path;
  };
  const edited = tampered('edited.jsonl', (records) =>
    records.map((line, i) => (i === 2 ? line.replace('audited task', 'innocent task') : line)),
  );
  const removed = tampered('removed.jsonl', (records) => records.filter((_, i) => i !== 1));
  const truncated = tampered('truncated.jsonl', (records) => records.slice(0, -1));
  const reordered = tampered('reordered.jsonl', (records) => [
    records[0]!,
    records[2]!,
    records[1]!,
    ...records.slice(3),
  ]);
  for (const path of [edited, removed, truncated, reordered]) {
    const outcome = await cli(['audit', 'verify', path]);
    expect(outcome.code).toBe(5);
    expect(outcome.stdout).toMatch(/record \d+: /);
  }
});

it('signs an export with the key it is given; a forged, re-hashed file fails against the public key and the server', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-audit-signed-'));
  const keys = join(dir, 'audit');
  expect((await cli(['audit', 'keygen', '--out', keys])).code).toBe(0);
  const started = json(await cli(['start', scripted.name, 'signed task', '--wait', '--json']));
  const file = join(dir, 'signed.jsonl');
  const signing = { SUBAGENT_AUDIT_SIGNING_KEY: `file:${keys}.key`, SUBAGENT_AUDIT_KEY_ID: 'ops-2026' };
  expect((await cli(['audit', 'export', started.id, '--out', file], signing)).code).toBe(0);
  const verified = await cli(['audit', 'verify', file, '--public-key', `${keys}.pub`, '--against-server']);
  expect(verified).toMatchObject({
    code: 0,
    stdout: expect.stringContaining("every record as the server's history has it"),
  });

  // A forger without the key drops the start record and makes the chain whole again.
  const records = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  const kept = records.filter((record) => record.type !== 'start');
  const forged: Record<string, unknown>[] = [];
  for (const [seq, { hash: _, prev: __, seq: ___, ...rest }] of kept.entries()) {
    const data = seq === 0 ? { ...rest.data, records: kept.length } : rest.data;
    const unsealed = {
      seq,
      type: rest.type,
      time: rest.time,
      data,
      prev: (forged.at(-1)?.hash as string) ?? '0'.repeat(64),
    };
    forged.push({ ...unsealed, hash: createHash('sha256').update(canonicalJson(unsealed)).digest('hex') });
  }
  const forgedFile = join(dir, 'forged.jsonl');
  writeFileSync(forgedFile, forged.map((record) => JSON.stringify(record)).join('\n') + '\n');
  expect(await cli(['audit', 'verify', forgedFile])).toMatchObject({
    code: 0,
    stdout: expect.stringContaining('not checked'),
  });
  const withKey = await cli(['audit', 'verify', forgedFile, '--public-key', `${keys}.pub`]);
  expect(withKey.code).toBe(5);
  expect(withKey.stdout).toContain('signature');
  // The server's history says what was dropped, whatever the file's signatures.
  const againstServer = await cli(['audit', 'verify', forgedFile, '--against-server']);
  expect(againstServer.code).toBe(5);
  expect(againstServer.stdout).toContain("differs from the server's history");
  expect(againstServer.stdout).toContain('start');
});

it('says so with documented exit codes for an unknown run, an unreachable server and a usage error', async () => {
  const unknown = await cli(['show', `subagent-${scripted.name}:missing`]);
  expect(unknown.code).toBe(3);
  expect(unknown.stderr).toContain('no subagent run with id');
  const unreachable = await cli(['list'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
  expect(unreachable.code).toBe(4);
  expect(unreachable.stderr).toContain('cannot reach the Temporal server at 127.0.0.1:1');
  const usage = await cli(['start']);
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain('usage: subagents start <provider> <prompt>');
  const both = await cli(['logs', `subagent-${scripted.name}:missing`, '--follow', '--no-follow']);
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('usage: subagents logs <id> [--follow|--no-follow], not both');
});

it('treats a workflow of another type as an unknown run (exit 3): cancel, send, show, logs and audit export leave it alone', async () => {
  const id = `subagent-${scripted.name}:${uniqueName('not-a-run')}`;
  const other = await temporal.client.workflow.start('someOtherWorkflow', {
    workflowId: id,
    taskQueue: uniqueName('nobody-polls'),
    args: ['not a run input'],
  });
  for (const args of [
    ['cancel', id],
    ['send', id, 'hello'],
    ['show', id],
    ['logs', id],
    ['audit', 'export', id],
  ]) {
    const outcome = await cli(args);
    expect({ args, code: outcome.code }).toEqual({ args, code: 3 });
    expect(outcome.stderr).toContain('it is a workflow of type "someOtherWorkflow"');
  }
  const events = (await other.fetchHistory()).events ?? [];
  expect(events.map((event) => event.eventType)).toEqual([
    proto.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    proto.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
  ]);
  await other.terminate('test over');
});

it('refuses an unknown option or an option without its value as a usage error (exit 2)', async () => {
  const unknown = await cli(['list', '--no-such-flag']);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("Unknown option '--no-such-flag'");
  expect(unknown.stderr).toContain('usage: subagents <command>');
  const noValue = await cli(['list', '--limit']);
  expect(noValue.code).toBe(2);
  expect(noValue.stderr).toContain("Option '--limit <value>' argument missing");
});

it('refuses a count or a port that is not a whole number in range as a usage error (exit 2): --limit abc listed every run, --max-depth=-1 exited 6', async () => {
  for (const args of [
    ['list', '--limit', 'abc'],
    ['list', '--limit', '0'],
    ['start', scripted.name, 'task', '--max-depth=-1'],
    ['start', scripted.name, 'task', '--max-depth', '1.5'],
    // `dev` refuses a port before it starts anything: NaN reached the server's launcher (exit 4).
    ['dev', '--port', 'abc'],
    ['dev', '--ui-port', '70000'],
  ]) {
    const outcome = await cli(args);
    expect({ args, code: outcome.code }).toEqual({ args, code: 2 });
    expect(outcome.stderr).toContain('takes a whole number');
  }
});

it('refuses --agent-options or a --schema file that is not JSON as a usage error (exit 2), not exit 6', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-schema-'));
  writeFileSync(join(dir, 'schema.json'), '{ not json');
  for (const args of [
    ['start', scripted.name, 'task', '--agent-options', '{ not json'],
    ['start', scripted.name, 'task', '--schema', join(dir, 'schema.json')],
  ]) {
    const outcome = await cli(args);
    expect({ args, code: outcome.code }).toEqual({ args, code: 2 });
    expect(outcome.stderr).toMatch(/^usage: --(agent-options|schema) takes JSON: /);
  }
});

it('runs `subagents dev`: the embedded server and a worker that serve a delegation, until SIGTERM', async () => {
  const port = await freePort();
  const cwd = mkdtempSync(join(tmpdir(), 'subagent-dev-'));
  // Runs in a fresh directory (its .data/ goes there), so tsx is imported by its path.
  const dev = spawn(
    process.execPath,
    ['--import', pathToFileURL(require.resolve('tsx')).href, CLI, 'dev', '--port', String(port), '--json'],
    {
      cwd,
      env: { ...process.env, SUBAGENT_PROVIDERS: 'scripted' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const exited = new Promise<number | null>((done) => dev.once('exit', (code) => done(code)));
  try {
    const ready = await new Promise<Record<string, unknown>>((resolveReady, reject) => {
      dev.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        const line = chunk.split('\n').find((candidate) => candidate.startsWith('{'));
        if (line) resolveReady(JSON.parse(line));
      });
      dev.once('exit', (code) => reject(new Error(`subagents dev exited with ${code}`)));
    });
    expect(ready).toMatchObject({ address: `127.0.0.1:${port}`, taskQueues: ['subagents.scripted'] });
    const outcome = await cli(['start', 'scripted', 'hello dev', '--wait'], { TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    expect(outcome).toMatchObject({ code: 0, stdout: 'completed: scripted reply to: hello dev\n' });
  } finally {
    dev.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
});
