// The acp provider against a real ACP agent in a child process over stdio (the scripted test
// agent of src/testing/acp-test-agent.ts, built with the official SDK): completion, chunks, every
// stop-reason mapping, cancel, permissions both ways, steering, resume through session/load,
// crashes, timeouts, malformed output, file access, and no orphan process on any path.
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SubagentRun, type SubagentRunEvent, auditDrafts } from '../../src';
import {
  type AcpAgentScript,
  type AcpScriptedTurn,
  acpTestAgentCommand,
  ReadyProcess,
  spawnWorkerProcess,
} from '../../src/testing';
import { AcpProviderOptions, createAcpProvider } from '../../src/worker';
import { statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  FRESH_PROCESS_WITHIN_MS,
  newService,
  startWorker,
  TestTemporal,
  text,
  uniqueName,
} from '../helpers/temporal';
import { agentLog, alive } from '../helpers/acp';

let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
const stops: (() => Promise<void>)[] = [];
const cwd = mkdtempSync(join(tmpdir(), 'subagent-acp-'));
writeFileSync(join(cwd, 'notes.txt'), 'inside the working directory\n');
const outside = join(mkdtempSync(join(tmpdir(), 'subagent-acp-outside-')), 'secret.txt');
writeFileSync(outside, 'outside\n');

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
  sessionId?: string;
  index?: number;
  text?: string;
}

/** An acp provider for one script, hosted by a fresh worker; its agent logs to a file of its own. */
async function acpProvider(script: AcpAgentScript, options: Partial<AcpProviderOptions> = {}) {
  const { path: log, events } = agentLog<AgentEvent>();
  const provider = createAcpProvider({
    name: uniqueName('acp'),
    ...acpTestAgentCommand(script, log),
    killGraceMs: 500,
    initializeTimeoutMs: 5000,
    runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } },
    ...options,
  });
  stops.push(await startWorker(temporal, [provider], { heartbeatIntervalMs: 200 }));
  service.registerProvider(provider);
  const start = (prompt = 'hello') =>
    service.start(provider.name, { prompt: text(prompt), parent: { id: 'p', session: { header: { id: 's', cwd } } } });
  return { provider, log, events, start };
}

/** Every agent process the run started has exited. */
async function noOrphans(events: () => AgentEvent[]): Promise<void> {
  const pids = [
    ...new Set(
      events()
        .filter((e) => e.event === 'start')
        .map((e) => e.pid),
    ),
  ];
  expect(pids.length).toBeGreaterThan(0);
  await eventually(() => (pids.some(alive) ? undefined : true), 5000);
}
const prompts = (events: () => AgentEvent[]) => events().filter((e) => e.event === 'prompt');
const statusOf = (run: SubagentRun) => temporal.client.workflow.getHandle(run.id).query(statusQuery);

it('runs a prompt turn and returns the streamed chunks as its output', async () => {
  const agent = await acpProvider({ turns: [{ chunks: ['Hello ', 'from ', 'the agent: {prompt}'] }] });
  const run = agent.start('hi there');
  expect(await run.result).toEqual({ output: text('Hello from the agent: hi there'), stopReason: 'completed' });
  const seen = agent.events();
  expect(seen.find((e) => e.event === 'session/new')).toMatchObject({ cwd });
  await noOrphans(agent.events);
  await run.dispose();
});

it('concatenates output that arrives in many chunks', async () => {
  const chunks = Array.from({ length: 60 }, (_, i) => `${i},`);
  const agent = await acpProvider({ turns: [{ chunks }] });
  const run = agent.start();
  expect(await run.result).toEqual({ output: text(chunks.join('')), stopReason: 'completed' });
  await run.dispose();
});

it('hands the agent’s chunks to the run’s observers as they come, in batches before the turn’s output', async () => {
  const chunks = Array.from({ length: 12 }, (_, i) => `part${i} `);
  // 12 chunks 100 ms apart: batches at 250 ms and 750 ms at least.
  const agent = await acpProvider({ turns: [{ chunks, chunkDelayMs: 100 }] });
  const run = agent.start();
  const seen: SubagentRunEvent[] = [];
  for await (const event of run.events!()) {
    seen.push(event);
    if (event.type === 'settled') break;
  }
  const deltas = seen.flatMap((event) => (event.type === 'text-delta' ? [event.text] : []));
  expect(deltas.length).toBeGreaterThanOrEqual(2);
  expect(chunks.join('').startsWith(deltas.join(''))).toBe(true);
  const types = seen.map((event) => event.type);
  expect(types.lastIndexOf('text-delta')).toBeLessThan(types.indexOf('text'));
  expect(seen.find((event) => event.type === 'text')).toMatchObject({ text: chunks.join('') });
  await run.dispose();
});

it('hands the agent’s thoughts on as reasoning, ahead of its text, and keeps them in the output', async () => {
  // 3 thoughts and 16 chunks 100 ms apart: batches at 250, 750 and 1750 ms, the last of text alone.
  const thoughts = Array.from({ length: 3 }, (_, i) => `idea${i} `);
  const chunks = Array.from({ length: 16 }, (_, i) => `part${i} `);
  const agent = await acpProvider({ turns: [{ thoughts, chunks, chunkDelayMs: 100 }] });
  const run = agent.start();
  const seen: SubagentRunEvent[] = [];
  for await (const event of run.events!()) {
    seen.push(event);
    if (event.type === 'settled') break;
  }
  expect((await run.result).output).toEqual([
    { type: 'reasoning', text: thoughts.join('') },
    { type: 'text', text: chunks.join('') },
  ]);
  const reasoned = seen.flatMap((event) => (event.type === 'reasoning-delta' ? [event.text] : []));
  expect(reasoned.length).toBeGreaterThanOrEqual(1);
  expect(thoughts.join('').startsWith(reasoned.join(''))).toBe(true);
  const types = seen.map((event) => event.type);
  expect(types.lastIndexOf('reasoning-delta')).toBeLessThan(types.indexOf('text-delta'));
  expect(seen.find((event) => event.type === 'reasoning')).toMatchObject({ text: thoughts.join('') });
  expect(types.indexOf('reasoning')).toBeLessThan(types.indexOf('text'));
  await run.dispose();
});

it.each([
  ['end_turn', 'completed'],
  ['cancelled', 'aborted'],
  ['max_tokens', 'max-tokens'],
  ['max_turn_requests', 'max-tokens'],
  ['refusal', 'refusal'],
  ['something_new', 'error'],
])('maps the ACP stop reason %s onto %s', async (acpReason, stopReason) => {
  const agent = await acpProvider({ turns: [{ chunks: ['partial'], stopReason: acpReason }] });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe(stopReason);
  if (stopReason === 'error') expect(result.diagnostic).toContain('something_new');
  await run.dispose();
});

it('cancels mid-prompt with session/cancel; the result is aborted and the process is gone', async () => {
  const agent = await acpProvider({ turns: [{ chunks: ['working'], waitForCancel: true }] });
  const run = agent.start();
  await eventually(() => agent.events().find((e) => e.event === 'chunk'), FRESH_PROCESS_WITHIN_MS);
  run.cancel('no longer needed');
  expect((await run.result).stopReason).toBe('aborted');
  expect(agent.events().some((e) => e.event === 'cancel')).toBe(true);
  await noOrphans(agent.events);
  await run.dispose();
});

it('kills an agent that ignores cancel, SIGTERM and EOF, so dispose returns with no process left', async () => {
  const agent = await acpProvider({ turns: [{ chunks: ['stuck'], ignoreCancel: true }] });
  const run = agent.start();
  await eventually(() => agent.events().find((e) => e.event === 'hanging'), FRESH_PROCESS_WITHIN_MS);
  await run.dispose();
  // A dispose before the result settled ends the turn disposed, which maps to error (seam §5.5).
  expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: 'the run was disposed before it settled' });
  await noOrphans(agent.events);
});

/** The permission decisions the run's history holds, as the audit reads them (signals, recorded as made). */
async function decisions(runId: string): Promise<unknown[]> {
  const records: { type: string; data: unknown }[] = [];
  for await (const record of auditDrafts(temporal.client, runId, false)) records.push(record);
  return records.filter((record) => record.type === 'permission').map((record) => record.data);
}

const inside = () => join(cwd, 'notes.txt');
it.each<[string, AcpScriptedTurn['askPermission'], Partial<AcpProviderOptions>, string, object]>([
  ['rejects by default', { title: 'edit notes', kind: 'edit', locations: [inside()] }, {}, 'reject_once', {}],
  [
    'allows a configured kind once, when every path it names is inside the working directory',
    { title: 'edit notes', kind: 'edit', locations: [inside()] },
    { allowToolKinds: ['edit'] },
    'allow_once',
    { decision: 'allowed', reason: 'kind "edit", every path inside the working directory' },
  ],
  [
    'allows always only when configured to',
    { title: 'edit notes', kind: 'edit', locations: [inside()] },
    { allowToolKinds: ['edit'], allowAlways: true },
    'allow_always',
    { decision: 'allowed' },
  ],
  [
    'rejects a path outside the working directory whatever the kind says',
    { title: 'just reading', kind: 'read', locations: ['/etc/passwd'] },
    { allowToolKinds: ['read'] },
    'reject_once',
    { decision: 'rejected', reason: 'it names a path outside the working directory: /etc/passwd' },
  ],
  [
    'rejects a path outside named in the tool input, not in its locations',
    { title: 'run a command', kind: 'execute', rawInput: { command: 'ls', cwd: '/' } },
    { allowToolKinds: ['execute'] },
    'reject_once',
    { decision: 'rejected', reason: 'it names a path outside the working directory: /' },
  ],
  [
    'rejects a file kind that names no path',
    { title: 'edit something', kind: 'edit' },
    { allowToolKinds: ['edit'] },
    'reject_once',
    { decision: 'rejected', reason: 'a edit request that names no path cannot be checked' },
  ],
])(
  'answers permission requests by policy: %s, and records each in history',
  async (_case, ask, options, chosen, recorded) => {
    const agent = await acpProvider({ turns: [{ askPermission: ask!, chunks: [' then done'] }] }, options);
    const run = agent.start();
    expect(await run.result).toEqual({ output: text(`permission: ${chosen} then done`), stopReason: 'completed' });
    expect(await decisions(run.id)).toEqual([
      expect.objectContaining({ toolCall: ask!.title, kind: ask!.kind, optionId: chosen, ...recorded }),
    ]);
    await run.dispose();
  },
);

it.each([
  ['approve', 'allow', 'allow_once', 'allowed'],
  ['deny', 'deny', 'reject_once', 'rejected'],
] as const)(
  'asks a person about a kind in askToolKinds: %s answers the agent, and the request and decision are in history',
  async (_case, decision, chosen, recorded) => {
    const ask = { title: 'run the tests', kind: 'execute', rawInput: { command: 'npm test' } };
    const agent = await acpProvider(
      { turns: [{ askPermission: ask, chunks: [' then done'] }] },
      { allowToolKinds: ['edit'], askToolKinds: ['execute'] },
    );
    const run = agent.start();
    let requested: SubagentRunEvent | undefined;
    for await (const event of run.events!()) {
      if (event.type !== 'approval-requested') continue;
      requested = event;
      break;
    }
    expect(requested).toMatchObject({ tool: 'run the tests', kind: 'execute', arguments: '{"command":"npm test"}' });
    expect((await statusOf(run)).pendingApprovals).toHaveLength(1);
    await run.approve!((requested as { requestId: string }).requestId, decision);
    expect(await run.result).toEqual({ output: text(`permission: ${chosen} then done`), stopReason: 'completed' });
    expect(await decisions(run.id)).toEqual([
      expect.objectContaining({ toolCall: 'run the tests', kind: 'execute', decision: recorded, optionId: chosen }),
    ]);
    await run.dispose();
  },
);

it('keeps a permission decision in history when the turn then fails', async () => {
  const agent = await acpProvider(
    { turns: [{ askPermission: { title: 'edit notes', kind: 'edit', locations: [inside()] }, exitCode: 3 }] },
    { allowToolKinds: ['edit'], runSettings: { retry: { maximumAttempts: 1 } } },
  );
  const run = agent.start();
  expect((await run.result).stopReason).toBe('error');
  expect(await decisions(run.id)).toEqual([expect.objectContaining({ decision: 'allowed', optionId: 'allow_once' })]);
  await run.dispose();
});

it('delivers a steering message as the next prompt turn, to the same agent process', async () => {
  const agent = await acpProvider({
    turns: [{ chunks: ['first ', 'answer'], chunkDelayMs: 300 }, { chunks: ['steered: {prompt}'] }],
  });
  const run = agent.start('start');
  await eventually(() => agent.events().find((e) => e.event === 'chunk'), FRESH_PROCESS_WITHIN_MS);
  run.sendMessage!(text('change course'));
  expect(await run.result).toEqual({ output: text('steered: change course'), stopReason: 'completed' });
  const seen = prompts(agent.events);
  expect(seen.map((e) => e.text)).toEqual(['start', 'change course']);
  expect(new Set(seen.map((e) => e.pid)).size).toBe(1);
  await run.dispose();
});

it('keeps a message that arrives after the last prompt boundary for resume, instead of a turn the agent cannot continue', async () => {
  // No session/load: a second turn would need a new process that cannot continue the session.
  const agent = await acpProvider({ exitDelayMs: 1500, turns: [{ chunks: ['only answer'] }] }, { killGraceMs: 5000 });
  const run = agent.start('start');
  // The turn has taken its last messages and is stopping the agent when this one arrives.
  await eventually(() => agent.events().find((e) => e.event === 'stdin-closed'), FRESH_PROCESS_WITHIN_MS);
  run.sendMessage!(text('too late for this turn'));
  await eventually(async () => ((await statusOf(run)).pendingMessages === 1 ? true : undefined));
  expect(await run.result).toEqual({ output: text('only answer'), stopReason: 'completed' });
  expect(prompts(agent.events).map((e) => e.text)).toEqual(['start']);
  expect(await statusOf(run)).toMatchObject({ turns: 1, pendingMessages: 1 });
  await run.dispose();
});

it('resumes through session/load in a new process, continuing the same session', async () => {
  const agent = await acpProvider(
    { loadSession: true, turns: [{ chunks: ['answer to {prompt}'] }] },
    { resumable: true },
  );
  const run = agent.start('one');
  expect(await run.result).toEqual({ output: text('answer to one'), stopReason: 'completed' });
  const resumed = run.resume!(text('two'));
  expect(await resumed.result).toEqual({ output: text('answer to two'), stopReason: 'completed' });
  const created = agent.events().find((e) => e.event === 'session/new')!;
  const loaded = agent.events().find((e) => e.event === 'session/load')!;
  expect(loaded.sessionId).toBe(created.sessionId);
  expect(loaded.pid).not.toBe(created.pid);
  await noOrphans(agent.events);
  await resumed.dispose();
});

it('offers no resume for an agent configured without it, and refuses resume when the agent cannot load', async () => {
  const plain = await acpProvider({ turns: [] });
  const run = plain.start();
  expect('resume' in run).toBe(false);
  await run.result;
  await run.dispose();

  const claimed = await acpProvider({ loadSession: false, turns: [] }, { resumable: true });
  const first = claimed.start();
  await first.result;
  const resumed = first.resume!(text('again'));
  const result = await resumed.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('NOT_RESUMABLE');
  await resumed.dispose();
});

it('settles error with the tail of stderr when the agent crashes', async () => {
  const agent = await acpProvider({
    turns: [],
    crashOnPrompt: { index: 0, stderr: 'fatal: model weights not found', code: 3 },
  });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('exited with code 3');
  expect(result.diagnostic).toContain('fatal: model weights not found');
  await run.dispose();
});

it('settles error when the agent never answers initialize', async () => {
  // Long enough for the agent to start (and log its pid) on a busy machine; it never answers.
  const agent = await acpProvider({ hangOnInitialize: true, turns: [] }, { initializeTimeoutMs: 5000 });
  const run = agent.start();
  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('did not answer initialize within 5000 ms');
  await noOrphans(agent.events);
  await run.dispose();
});

it('survives malformed output from the agent, reporting it in the diagnostic', async () => {
  const agent = await acpProvider({ garbageOnInitialize: 'this is not JSON', turns: [{ chunks: ['fine'] }] });
  const run = agent.start();
  const result = await run.result;
  expect(result).toMatchObject({ output: text('fine'), stopReason: 'completed' });
  expect(result.diagnostic).toContain('"this is not JSON"');
  await run.dispose();
});

it('gives no file access unless configured, and confines it to the run cwd when on', async () => {
  const off = await acpProvider({ turns: [{ readFile: join(cwd, 'notes.txt') }] });
  const denied = off.start();
  expect(((await denied.result).output[0] as { text: string }).text).toContain('read refused');
  await denied.dispose();

  const on = await acpProvider({ turns: [{ readFile: join(cwd, 'notes.txt') }] }, { fileSystem: { read: true } });
  const reader = on.start();
  expect(await reader.result).toEqual({
    output: text('read: inside the working directory\n'),
    stopReason: 'completed',
  });
  await reader.dispose();

  const escaping = await acpProvider({ turns: [{ readFile: outside }] }, { fileSystem: { read: true } });
  const refused = escaping.start();
  const refusal = ((await refused.result).output[0] as { text: string }).text;
  expect(refusal).toContain('read refused');
  expect(refusal).not.toContain('outside\n');
  await refused.dispose();
});

it('writes through the client file system inside the working directory only: new directories, no symlink out', async () => {
  symlinkSync(outside, join(cwd, 'to-outside'));
  const written = async (path: string) => {
    const agent = await acpProvider(
      { turns: [{ writeFile: { path, content: 'planted\n' } }] },
      { fileSystem: { write: true } },
    );
    const run = agent.start();
    const said = ((await run.result).output[0] as { text: string }).text;
    await run.dispose();
    return said;
  };
  expect(await written(join(cwd, 'new', 'dir', 'made.txt'))).toBe(`wrote ${join(cwd, 'new', 'dir', 'made.txt')}`);
  expect(readFileSync(join(cwd, 'new', 'dir', 'made.txt'), 'utf8')).toBe('planted\n');
  expect(await written(join(cwd, 'to-outside'))).toContain('write refused');
  expect(await written(join(cwd, '..', 'escaped.txt'))).toContain('write refused');
  expect(readFileSync(outside, 'utf8')).toBe('outside\n');
});

describe('a worker crash mid-prompt', () => {
  let worker: ReadyProcess | undefined;
  afterAll(async () => worker?.kill());

  it('retries the turn on another worker, where the new process loads the session', async () => {
    const { path: log, events } = agentLog<AgentEvent>();
    const name = uniqueName('acp-crash');
    const script: AcpAgentScript = { loadSession: true, turns: [{ chunks: ['slow'], chunkDelayMs: 5000 }] };
    service.registerProvider(
      createAcpProvider({
        name,
        command: 'unused',
        runSettings: { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } },
      }),
    );
    const agent = acpTestAgentCommand(script, log);
    const env = {
      PROVIDER_NAME: name,
      PROVIDER_KIND: 'acp',
      ACP_COMMAND: JSON.stringify([agent.command, ...agent.args]),
      ...agent.env,
    };
    worker = await spawnWorkerProcess(env);
    const run: SubagentRun = service.start(name, {
      prompt: text('long task'),
      parent: { id: 'p', session: { header: { id: 's', cwd } } },
    });
    const first = await eventually(() => events().find((e) => e.event === 'prompt'), 30_000);
    // The session id reaches the retry in the turn's heartbeat: wait until the server holds it.
    const handle = temporal.client.workflow.getHandle(run.id);
    await eventually(async () => {
      const { raw } = await handle.describe();
      const details = raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0]?.data;
      return details && Buffer.from(details).toString('utf8').includes(first.sessionId!) ? true : undefined;
    }, 30_000);
    await worker.kill('SIGKILL');
    worker = await spawnWorkerProcess(env);

    const result = await run.result;
    // The new process plays the script from its first turn again.
    expect(result).toEqual({ output: text('slow'), stopReason: 'completed' });
    const created = events().find((e) => e.event === 'session/new')!;
    const loaded = events().find((e) => e.event === 'session/load')!;
    expect(loaded.sessionId).toBe(created.sessionId);
    expect(loaded.pid).not.toBe(first.pid);
    // The first worker's agent saw its stdin close when the worker died, and exited.
    await eventually(() => (alive(first.pid) ? undefined : true), 5000);
    await run.dispose();
  }, 60_000);
});
