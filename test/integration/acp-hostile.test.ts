// The acp provider against ACP agents that misbehave (test/fixtures/hostile-acp-agent.ts, a test
// double speaking raw JSON-RPC in a real child process), through a real worker: every run ends
// with a stop reason and leaves no process behind, the agent's own children included.
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { acpTestAgentCommand } from '../../src/testing';
import { AcpProviderOptions, createAcpProvider } from '../../src/worker';
import type { SubagentTurnContext } from '../../src/seam/provider';
import {
  connectTestTemporal,
  eventually,
  fixture,
  FRESH_PROCESS_WITHIN_MS,
  newService,
  startWorker,
  TestTemporal,
  text,
  uniqueName,
} from '../helpers/temporal';
import { agentLog, alive } from '../helpers/acp';
import { statusQuery } from '../../workflows/definitions';

let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
const stops: (() => Promise<void>)[] = [];
const cwd = mkdtempSync(join(tmpdir(), 'subagent-acp-hostile-'));
const notExecutable = join(cwd, 'agent.sh');
writeFileSync(notExecutable, '#!/bin/sh\n', { mode: 0o644 });

beforeAll(async () => {
  temporal = await connectTestTemporal();
  service = newService(temporal);
});
afterAll(async () => {
  for (const stop of stops) await stop();
  await temporal?.close();
});

interface AgentEvent {
  event: string;
  pid: number;
  grandchild?: number;
  id?: unknown;
  code?: number;
}

/** An acp provider running the hostile agent in `mode` (with `env` besides), hosted by a fresh worker. */
async function hostileAgent(mode: string, { env, ...options }: Partial<AcpProviderOptions> = {}) {
  const { path: log, events } = agentLog<AgentEvent>();
  const provider = createAcpProvider({
    name: uniqueName('acp-hostile'),
    command: process.execPath,
    args: ['--import', pathToFileURL(require.resolve('tsx')).href, fixture('hostile-acp-agent')],
    env: { HOSTILE_ACP: mode, HOSTILE_ACP_LOG: log, ...env },
    killGraceMs: 500,
    initializeTimeoutMs: 5000,
    runSettings: { heartbeatTimeout: '2 seconds', retry: { maximumAttempts: 1 } },
    ...options,
  });
  stops.push(await startWorker(temporal, [provider], { heartbeatIntervalMs: 200 }));
  service.registerProvider(provider);
  const start = (inCwd = cwd) =>
    service.start(provider.name, {
      prompt: text('go'),
      parent: { id: 'p', session: { header: { id: 's', cwd: inCwd } } },
    });
  return { events, start };
}

/** The agent's pid and those of the processes it started, once it has logged them. */
async function processesOf(events: () => AgentEvent[]): Promise<number[]> {
  const grandchild = await eventually(
    () => events().find((e) => e.event === 'grandchild')?.grandchild,
    FRESH_PROCESS_WITHIN_MS,
  );
  return [events().find((e) => e.event === 'start')!.pid, grandchild];
}

it('settles error when the agent exits mid-prompt while a process it started holds its stdout, and kills that process', async () => {
  const agent = await hostileAgent('orphan-holds-stdout');
  const run = agent.start();
  const pids = await processesOf(agent.events);
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('exited with code 0');
  await eventually(() => (pids.some(alive) ? undefined : true), 5000);
  await run.dispose();
});

it('settles error when the agent exits while a process out of its group holds its stdout', async () => {
  const agent = await hostileAgent('escaped-holds-stdout');
  const run = agent.start();
  const [, escaped] = await processesOf(agent.events);
  try {
    const result = await run.result;
    expect(result.stopReason).toBe('error');
    expect(result.diagnostic).toContain('its stdout stayed open');
    expect(result.diagnostic).toContain('exited with code 0');
  } finally {
    // Out of the agent's group, nothing of the provider's reaches it.
    process.kill(escaped, 'SIGKILL');
  }
  await run.dispose();
});

it('cancels an agent that hangs and ignores SIGTERM, killing the processes it started too', async () => {
  const agent = await hostileAgent('orphan-then-hang');
  const run = agent.start();
  const pids = await processesOf(agent.events);
  await eventually(() => agent.events().find((e) => e.event === 'hanging'));
  run.cancel('no longer needed');
  expect((await run.result).stopReason).toBe('aborted');
  await eventually(() => (pids.some(alive) ? undefined : true), 5000);
  await run.dispose();
});

it('settles error when the agent never answers session/new', async () => {
  const agent = await hostileAgent('hang-session-new', { initializeTimeoutMs: 3000 });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('did not answer session/new within 3000 ms');
  await run.dispose();
});

it('ends the turn with error once a flood of session updates passes the output limit, and stops the agent', async () => {
  const agent = await hostileAgent('flood-chunks', { maxOutputBytes: 1024 * 1024 });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('more than 1048576 bytes');
  const pid = agent.events().find((e) => e.event === 'start')!.pid;
  await eventually(() => (alive(pid) ? undefined : true), 5000);
  await run.dispose();
});

it('takes a long, deeply nested session update in its stride, and does not call it malformed', async () => {
  // 400 KB on one line: it reaches the worker in many reads.
  const agent = await hostileAgent('deep-nesting');
  const run = agent.start();
  expect(await run.result).toEqual({ output: text('done'), stopReason: 'completed' });
  await run.dispose();
});

it('answers a request for a method it lacks with an error, and keeps updates for another session out of the output', async () => {
  const agent = await hostileAgent('protocol-garbage');
  const run = agent.start();
  expect(await run.result).toEqual({
    output: text('done'),
    stopReason: 'completed',
    diagnostic: 'the ACP agent sent 1 response to no request, ignored',
  });
  // JSON-RPC's method not found, for `x/unknown`.
  expect(agent.events()).toContainEqual(expect.objectContaining({ event: 'response', id: 'u1', code: -32601 }));
  await run.dispose();
});

it('ends the turn with error once the agent asks for permission more than maxPermissionRequests times, recording no more', async () => {
  // 2,000 requests at once; each recorded one is an event in the run's history, which has a limit.
  const agent = await hostileAgent('permission-flood', { maxPermissionRequests: 50 });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('asked for permission more than 50 times in one turn');
  const { events } = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  const recorded = (events ?? []).filter(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'permissionDecided',
  );
  expect(recorded.length).toBeLessThanOrEqual(50);
  await run.dispose();
});

it('records permission requests of 1 MiB each (a title, or 1,000 paths) in a few KiB, and the run goes on', async () => {
  // Each decision is a signal in the run's history, which the server caps (50 MB): 60 MiB of them
  // would end the run.
  const agent = await hostileAgent('permission-bloat');
  const run = agent.start();
  const result = await run.result;
  expect(result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  const { events } = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  const recorded = (events ?? []).flatMap((e) =>
    e.workflowExecutionSignaledEventAttributes?.signalName === 'permissionDecided'
      ? [e.workflowExecutionSignaledEventAttributes.input?.payloads?.[0]?.data?.length ?? 0]
      : [],
  );
  expect(recorded).toHaveLength(60);
  expect(Math.max(...recorded)).toBeLessThan(16 * 1024);
  await run.dispose();
});

it('denies without asking a person a permission request whose input is 1 MiB, and records why', async () => {
  // An ask is an update whose input the run's history and state keep while it waits.
  const agent = await hostileAgent('ask-bloat', {
    askToolKinds: ['execute'],
    runSettings: { heartbeatTimeout: '2 seconds', retry: { maximumAttempts: 1 }, approvalTimeout: '3 seconds' },
  });
  const run = agent.start();
  expect(await run.result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  const { events } = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  expect((events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toEqual([]);
  const [recorded] = (events ?? []).flatMap((e) =>
    e.workflowExecutionSignaledEventAttributes?.signalName === 'permissionDecided'
      ? [JSON.parse(Buffer.from(e.workflowExecutionSignaledEventAttributes.input!.payloads![0].data!).toString())]
      : [],
  );
  expect(recorded).toMatchObject({ decision: 'rejected', optionId: 'no' });
  expect(recorded.reason).toContain('more than a person is asked about');
  await run.dispose();
});

it('asks a person at most 4 of the permission requests an agent makes at once, so the run still takes the answers (12 asks at once held the 10 updates the server lets a run have in flight: every approve was refused RESOURCE_EXHAUSTED)', async () => {
  const agent = await hostileAgent('ask-flood', { askToolKinds: ['execute'] });
  const run = agent.start();
  const handle = temporal.client.workflow.getHandle(run.id);
  let answered = 0;
  let most = 0;
  while (answered < 12) {
    const pending = await eventually(async () => {
      const pending = (await handle.query(statusQuery).catch(() => undefined))?.pendingApprovals ?? [];
      return pending.length > 0 ? pending : undefined;
    }, FRESH_PROCESS_WITHIN_MS);
    most = Math.max(most, pending.length);
    for (const { requestId } of pending) {
      await run.approve!(requestId, 'allow');
      answered++;
    }
  }
  expect(await run.result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  expect(most).toBeLessThanOrEqual(4);
  const { events } = await handle.fetchHistory();
  const decisions = (events ?? []).flatMap((e) =>
    e.workflowExecutionSignaledEventAttributes?.signalName === 'permissionDecided'
      ? [JSON.parse(Buffer.from(e.workflowExecutionSignaledEventAttributes.input!.payloads![0].data!).toString())]
      : [],
  );
  expect(decisions.map((d: { decision: string }) => d.decision)).toEqual(Array(12).fill('allowed'));
  await run.dispose();
});

it('rejects a permission request naming a path 2,000,000 deep as more than a decision records, without judging it', async () => {
  // Judging a path looks for its deepest existing directory, one part at a time: for this one,
  // minutes of the worker's file system threads.
  const agent = await hostileAgent('permission-deep-path');
  const run = agent.start();
  expect(await run.result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  const { events } = await temporal.client.workflow.getHandle(run.id).fetchHistory();
  const [recorded] = (events ?? []).flatMap((e) =>
    e.workflowExecutionSignaledEventAttributes?.signalName === 'permissionDecided'
      ? [JSON.parse(Buffer.from(e.workflowExecutionSignaledEventAttributes.input!.payloads![0].data!).toString())]
      : [],
  );
  expect(recorded).toMatchObject({ decision: 'rejected', optionId: 'no' });
  expect(recorded.reason).toContain('more than a decision records');
  await run.dispose();
});

it('reads a flood on stderr as it comes, so an agent that writes 64 MiB there before answering is answered', async () => {
  const agent = await hostileAgent('stderr-flood');
  const run = agent.start();
  expect(await run.result).toEqual({ output: text('done'), stopReason: 'completed' });
  await run.dispose();
});

it('settles error when the agent writes a line longer than the SDK takes (40 MiB, no newline)', async () => {
  const agent = await hostileAgent('huge-line');
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('exceeds the configured 33554432 byte limit');
  await run.dispose();
});

it.each([
  ['does not exist', () => join(cwd, 'no-such-agent'), 'ENOENT'],
  ['is not executable', () => notExecutable, 'EACCES'],
])('settles error at once when the command %s, saying it could not be started', async (_case, command, code) => {
  const agent = await hostileAgent('', { command: command(), args: [] });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain(`command ${JSON.stringify(command())} could not be started`);
  expect(result.diagnostic).toContain(code);
  // It never ran, so it never exited.
  expect(result.diagnostic).not.toContain('exited');
  await run.dispose();
});

it('stays cancellable while the agent floods tool call updates', async () => {
  const agent = await hostileAgent('flood-tool-calls');
  const run = agent.start();
  await eventually(() => agent.events().find((e) => e.event === 'flooding'), FRESH_PROCESS_WITHIN_MS);
  // The worker must still heartbeat while it floods (the turn's heartbeat timeout is 2 s), and so
  // hear the cancel: wait for a heartbeat the server took past that timeout into the flood.
  const flooding = Date.now();
  const handle = temporal.client.workflow.getHandle(run.id);
  await eventually(async () => {
    const { raw } = await handle.describe();
    const beat = optionalTsToMs(raw.pendingActivities?.[0]?.lastHeartbeatTime);
    return beat !== undefined && beat > flooding + 2500 ? true : undefined;
  }, 15_000);
  run.cancel('enough');
  expect((await run.result).stopReason).toBe('aborted');
  const pid = agent.events().find((e) => e.event === 'start')!.pid;
  await eventually(() => (alive(pid) ? undefined : true), 5000);
  await run.dispose();
});

it.each([
  ['session/new answered without a sessionId', 'no-session-id', 'session/new'],
  ['a prompt answered without a stopReason', 'no-stop-reason', 'stopReason'],
])('settles error on %s, naming what is missing', async (_case, mode, missing) => {
  const agent = await hostileAgent(mode);
  const run = agent.start();
  const result = await run.result;
  expect(result).toMatchObject({ output: [], stopReason: 'error' });
  expect(result.diagnostic).toContain(missing);
  expect(result.diagnostic).not.toContain('undefined');
  await run.dispose();
});

it('settles error, retrying nothing, when session/new answers a sessionId of 3 MiB', async () => {
  // The session id travels in the turn's heartbeat and its result: the server refuses a payload that large.
  const agent = await hostileAgent('huge-session-id', {
    runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } },
  });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('sessionId');
  expect(agent.events().filter((e) => e.event === 'start')).toHaveLength(1);
  await run.dispose();
});

it.each([
  ['a stopReason of 3 MiB', 'huge-stop-reason', 'stopReason "rrr'],
  ['an error of 3 MiB', 'huge-prompt-error', 'eee'],
])(
  'settles error on a prompt answered with %s, quoting at most 2,000 characters of it',
  async (_case, mode, quoted) => {
    const agent = await hostileAgent(mode);
    const run = agent.start();
    const result = await run.result;
    expect(result).toMatchObject({ output: [], stopReason: 'error' });
    expect(result.diagnostic).toContain(quoted);
    expect(result.diagnostic).toContain('more characters');
    expect(result.diagnostic!.length).toBeLessThan(4000);
    await run.dispose();
  },
);

it.each([
  ['does not exist on the worker', join(cwd, 'gone'), 'is not a directory on this worker'],
  ['holds a NUL byte', `${cwd}/a\0b`, 'holds a NUL byte'],
])('settles error, retrying nothing, when the working directory %s', async (_case, where, reason) => {
  // The turn's own retry policy (no cap on attempts): a turn that threw would be tried again and again.
  const agent = await hostileAgent('', {
    runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } },
  });
  const run = agent.start(where);
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain(`the working directory ${JSON.stringify(where)} ${reason}`);
  expect(agent.events()).toEqual([]);
  await run.dispose();
});

it('cancels a run whose agent hangs in initialize, ignoring EOF and SIGTERM, well before the initialize timeout', async () => {
  const agent = await hostileAgent('hang-initialize', { initializeTimeoutMs: 120_000 });
  const run = agent.start();
  await eventually(() => agent.events().find((e) => e.event === 'hanging'), FRESH_PROCESS_WITHIN_MS);
  run.cancel('no longer needed');
  expect((await run.result).stopReason).toBe('aborted');
  const pid = agent.events().find((e) => e.event === 'start')!.pid;
  await eventually(() => (alive(pid) ? undefined : true), 5000);
  await run.dispose();
});

it('reads files for an agent one at a time, as it takes the answers, so 60 reads it never takes hold little memory', async () => {
  const big = join(cwd, 'big.txt');
  writeFileSync(big, 'z'.repeat(8 * 1024 * 1024));
  const agent = await hostileAgent('read-flood', {
    env: { HOSTILE_ACP_READ: big },
    fileSystem: { read: true },
  });
  const before = process.memoryUsage().rss;
  const run = agent.start();
  await eventually(() => agent.events().find((e) => e.event === 'flooding'), FRESH_PROCESS_WITHIN_MS);
  // 60 answers of 8 MiB held at once are over 1 GiB; taken one at a time, a few of them at most.
  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss - before)), 50);
  try {
    await expect(eventually(() => (peak > 400 * 1024 * 1024 ? true : undefined), 5000)).rejects.toThrow(
      'condition not met',
    );
  } finally {
    clearInterval(sample);
  }
  run.cancel('enough');
  expect((await run.result).stopReason).toBe('aborted');
  await run.dispose();
});

/** A turn context for the provider alone, without a worker: the run's side is `overrides`. */
function turnContext(overrides: Partial<SubagentTurnContext>): SubagentTurnContext {
  return {
    runId: 'subagent-acp:alone',
    segment: 0,
    turn: 0,
    attempt: 1,
    request: { prompt: text('go'), parent: { agentId: 'p', cwd, depth: 0 }, depth: 1 },
    signal: new AbortController().signal,
    transcript: async () => [],
    providerState: undefined,
    takeMessages: async () => [],
    heartbeat: () => undefined,
    lastHeartbeat: undefined,
    ...overrides,
  };
}

it('reads no more of an agent that takes none of the answers, so 300 requests whose answers it never takes are not held', async () => {
  const agent = await hostileAgent('unread-answers');
  const run = agent.start();
  const taken = () => agent.events().filter((e) => e.event === 'taken').length;
  await eventually(() => (taken() > 0 ? true : undefined), FRESH_PROCESS_WITHIN_MS);
  // Read without pause, the 300 requests (300 MiB) and their answers (600 MiB) are all in the
  // worker; read as the agent takes the answers, a few.
  await expect(eventually(() => (taken() > 20 ? true : undefined), 5000)).rejects.toThrow('condition not met');
  run.cancel('enough');
  expect((await run.result).stopReason).toBe('aborted');
  await run.dispose();
});

it('keeps what the agent answered when the messages waiting in the run cannot be read', async () => {
  // The provider alone, hosted by a turn context whose messages cannot be read (the server away).
  const provider = createAcpProvider({ ...acpTestAgentCommand({ turns: [{ chunks: ['did the work'] }] }) });
  let asked = 0;
  const result = await provider.runTurn(
    [text('go')],
    turnContext({
      takeMessages: async () => {
        asked++;
        throw new Error('14 UNAVAILABLE: the server is away');
      },
    }),
  );
  expect(asked).toBe(1);
  expect(result).toMatchObject({ stopReason: 'completed', output: text('did the work') });
});

it("drops text an agent sends after it answered a prompt: neither streamed nor in the next prompt's output", async () => {
  // The provider alone, whose turn context hands it a message at once after the first prompt, so
  // the second prompt starts while the first one's late chunk is still on its way.
  const { path: log } = agentLog<AgentEvent>();
  const provider = createAcpProvider({
    command: process.execPath,
    args: ['--import', pathToFileURL(require.resolve('tsx')).href, fixture('hostile-acp-agent')],
    env: { HOSTILE_ACP: 'late-chunks', HOSTILE_ACP_LOG: log },
    killGraceMs: 500,
  });
  let taken = 0;
  const streamed: string[] = [];
  const result = await provider.runTurn(
    [text('go')],
    turnContext({
      takeMessages: async () => (taken++ === 0 ? [text('more')] : []),
      streamText: (chunk) => void streamed.push(chunk),
    }),
  );
  expect(result).toEqual({
    output: text('second'),
    stopReason: 'completed',
    providerState: { sessionId: 'sess-hostile' },
  });
  expect(streamed).toEqual(['first', 'second']);
});

it('counts the directories a write would create against maxWriteBytes, refusing one 5,000 deep', async () => {
  const folder = mkdtempSync(join(cwd, 'deep-'));
  const agent = await hostileAgent('deep-write', {
    env: { HOSTILE_ACP_WRITE: folder },
    fileSystem: { write: true },
    maxWriteBytes: 10 * 1024 * 1024,
  });
  const run = agent.start();
  const result = await run.result;
  expect(result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  expect(result.diagnostic).toContain('refused 1 file write past maxWriteBytes');
  expect(agent.events()).toContainEqual(expect.objectContaining({ event: 'response', id: 'write-deep', code: -32602 }));
  expect(readdirSync(folder)).toEqual([]);
  await run.dispose();
});

it("keeps 10,000 messages that answer no request off the worker's console, and says how many it ignored", async () => {
  // The SDK logs each to the console: a response to a request never sent (with its id), a
  // response without an id, a session update it cannot parse.
  const printed: string[] = [];
  const spies = (['error', 'warn', 'log', 'info', 'debug'] as const).map((level) =>
    jest
      .spyOn(console, level)
      .mockImplementation((...args: unknown[]) => void printed.push(args.map(String).join(' '))),
  );
  let result;
  try {
    const agent = await hostileAgent('unknown-responses');
    const run = agent.start();
    result = await run.result;
    await run.dispose();
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  expect(printed.join('\n').length).toBeLessThan(2000);
  expect(result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  expect(result.diagnostic).toContain('6667 responses to no request');
});

it('refuses the writes past maxWriteBytes in one turn with an error the agent reads, and the turn goes on', async () => {
  // 30 writes of 1 MiB round ten files, one after another, with a budget of 10 MiB a turn.
  const folder = mkdtempSync(join(cwd, 'writes-'));
  const agent = await hostileAgent('write-flood', {
    env: { HOSTILE_ACP_WRITE: folder, HOSTILE_ACP_WRITES: '30' },
    fileSystem: { write: true },
    maxWriteBytes: 10 * 1024 * 1024,
  });
  const run = agent.start();
  const result = await run.result;
  expect(result).toMatchObject({ output: text('done'), stopReason: 'completed' });
  expect(result.diagnostic).toContain('refused 20 file writes past maxWriteBytes (10485760 bytes a turn)');
  const answers = agent.events().filter((e) => e.event === 'response');
  expect(answers.map((e) => e.code)).toEqual([
    ...Array<undefined>(10).fill(undefined),
    ...Array<number>(20).fill(-32602),
  ]);
  await run.dispose();
});

it.each([
  ['an empty command', { command: '' }, 'command must be a non-empty string'],
  ['args that are not strings', { command: 'agent', args: [1] }, 'args must be a list of strings'],
  ['a NaN maxWriteBytes (it bounded nothing)', { command: 'agent', maxWriteBytes: NaN }, 'maxWriteBytes must be'],
  ['a maxPermissionRequests of 0.5', { command: 'agent', maxPermissionRequests: 0.5 }, 'maxPermissionRequests must be'],
  ['a maxOutputBytes of 0', { command: 'agent', maxOutputBytes: 0 }, 'maxOutputBytes must be'],
  [
    'an initializeTimeoutMs of Infinity (a timer of 1 ms)',
    { command: 'agent', initializeTimeoutMs: Infinity },
    'initializeTimeoutMs must be',
  ],
  ['a negative killGraceMs', { command: 'agent', killGraceMs: -1 }, 'killGraceMs must be'],
])('refuses options with %s with INVALID_CONFIG when the provider is made', (_case, options, message) => {
  expect(() => createAcpProvider(options as never)).toThrow(
    expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining(message) }),
  );
});
