// A deploy under running delegations. Build A (the workflow as frozen in test/fixtures/builds)
// starts runs in worker processes of its own: some park, some are in the middle of a turn, one in
// the middle of an agent loop. A's workers are killed; build B (today's workflow, with changes
// made behind patched()) takes over, and every run finishes or resumes correctly. And the
// reverse mistake: a change made without patched() is caught by replaying recorded histories.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeterminismViolationError } from '@temporalio/workflow';
import { bundleWorkflowCode } from '@temporalio/worker';
import { runStarted, type SubagentRun } from '../../src';
import {
  type FakeOpenAI,
  type ReadyProcess,
  createScriptedProvider,
  replayHistoryFile,
  spawnWorkerProcess,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { createSpawnProvider } from '../../src/worker';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  text,
  turnGates,
  uniqueName,
  workflowBundle,
} from '../helpers/temporal';

const BUILD_A = join(__dirname, '..', 'fixtures', 'builds', 'workflows-95c8865.js');
const HISTORIES = join(__dirname, '..', 'histories');
const settings = { heartbeatTimeout: '2 seconds', retry: { initialInterval: '100 ms' } };

let temporal: TestTemporal;
let fake: FakeOpenAI;
const buildA: ReadyProcess[] = [];
const eventsFile = join(mkdtempSync(join(tmpdir(), 'subagent-deploy-')), 'events.jsonl');
const scripted = createScriptedProvider({ name: uniqueName('deployed'), runSettings: settings });
let spawn: ReturnType<typeof createSpawnProvider>;

beforeAll(async () => {
  writeFileSync(eventsFile, '');
  temporal = await connectTestTemporal();
  fake = await startFakeOpenAI();
  spawn = createSpawnProvider({
    name: uniqueName('deployed-spawn'),
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
    runSettings: settings,
  });
  const common = { TEMPORAL_TEST_ADDRESS: temporal.address, TEMPORAL_TEST_BUNDLE: BUILD_A, EVENTS_FILE: eventsFile };
  buildA.push(
    await spawnWorkerProcess({ ...common, PROVIDER_NAME: scripted.name }),
    await spawnWorkerProcess({
      ...common,
      PROVIDER_KIND: 'spawn',
      PROVIDER_NAME: spawn.name,
      OPENAI_BASE_URL: fake.baseURL,
      SUBAGENT_MODEL: 'fake-model',
    }),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all(buildA.map((worker) => worker.kill()));
  await fake?.close();
  await temporal?.close();
});

/** Turns started in build A's worker process. */
const turnsInA = () =>
  readFileSync(eventsFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { kind: string; runId: string })
    .filter((event) => event.kind === 'turn-start');

it("build B takes over build A's runs, parked and mid-turn, and each finishes or resumes correctly", async () => {
  const service = newService(temporal);
  service.registerProvider(scripted);
  service.registerProvider(spawn);
  const gates = turnGates();
  const start = (prompt: string, script: object[]) =>
    service.start(scripted.name, { prompt: text(prompt), parent: { id: 'p' }, agentOptions: { script } });

  // The agent loop: its first model call and tool call run in A, its second call hangs in A.
  let aDead!: () => void;
  const killed = new Promise<void>((resolve) => (aDead = resolve));
  let alive = true;
  fake.setHandler(async (request) => {
    const assistants = request.body.messages.filter((m: { role: string }) => m.role === 'assistant').length;
    if (assistants === 1 && alive) await killed;
    if (assistants < 2) return toolCallReply([{ name: 'list_directory', arguments: {} }]);
    return textReply('agent done');
  });

  const parked = ['parked-1', 'parked-2'].map((prompt) =>
    start(prompt, [{ reply: 'one: {input}' }, { reply: 'two: {input}' }]),
  );
  for (const [index, run] of parked.entries()) {
    expect(await run.result).toEqual({ output: text(`one: parked-${index + 1}`), stopReason: 'completed' });
  }
  const midTurn = ['mid-1', 'mid-2'].map((prompt) =>
    start(prompt, [{ waitFor: gates.waitFor, reply: 'held: {input}' }]),
  );
  await Promise.all(midTurn.map(runStarted));
  const agent: SubagentRun = service.start(spawn.name, {
    prompt: text('list twice'),
    parent: { id: 'p', session: { header: { id: 's', cwd: __dirname } } },
  });
  // Every run is in A: the held turns have begun there, the agent loop's second call is out.
  await eventually(() => (midTurn.every((run) => turnsInA().some((e) => e.runId === run.id)) ? true : undefined));
  await eventually(() =>
    fake.requests.some((r) => r.body.messages.filter((m: { role: string }) => m.role === 'assistant').length === 1)
      ? true
      : undefined,
  );

  // The deploy: A's workers die, B's start.
  await Promise.all(buildA.map((worker) => worker.kill('SIGKILL')));
  alive = false;
  aDead();
  const stopB = await startWorker(temporal, [scripted, spawn], { heartbeatIntervalMs: 200 });
  try {
    for (const run of midTurn) gates.open(run.id, 0);
    for (const [index, run] of midTurn.entries()) {
      expect(await run.result).toEqual({ output: text(`held: mid-${index + 1}`), stopReason: 'completed' });
    }
    expect(await agent.result).toEqual({ output: text('agent done'), stopReason: 'completed' });
    for (const [index, run] of parked.entries()) {
      const resumed = run.resume!(text(`second-${index + 1}`));
      expect(await resumed.result).toEqual({ output: text(`two: second-${index + 1}`), stopReason: 'completed' });
      await resumed.dispose();
    }
    // A's run records its patch markers; the run B continued it as began on B's generation, and
    // records none (docs/versioning.md).
    const [inA, inB] = await eventually(async () => {
      const runs = await runsOf(parked[0]!.id);
      return runs.length === 2 ? runs : undefined;
    });
    expect(inA!.buildId).toMatch(/^subagents\+/);
    expect(inA!.markers).toBeGreaterThan(0);
    expect(inB).toEqual({ buildId: expect.stringMatching(/^subagents@2\+/), markers: 0 });
    await Promise.all([...midTurn, agent].map((run) => run.dispose()));
  } finally {
    await stopB();
  }
}, 120_000);

/** Each Temporal run of a delegation, oldest first: its first workflow task's build ID, its patch markers. */
async function runsOf(id: string): Promise<{ buildId: string | undefined; markers: number }[]> {
  const executions = [];
  for await (const execution of temporal.client.workflow.list({ query: `WorkflowId = '${id}'` })) {
    executions.push(execution);
  }
  executions.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  return Promise.all(
    executions.map(async ({ runId }) => {
      const events = (await temporal.client.workflow.getHandle(id, runId).fetchHistory()).events ?? [];
      const task = events.find((e) => e.workflowTaskCompletedEventAttributes)?.workflowTaskCompletedEventAttributes;
      const markers = events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch').length;
      return { buildId: task?.workerVersion?.buildId ?? undefined, markers };
    }),
  );
}

it('catches a workflow change made without patched() by replaying the recorded histories', async () => {
  const unpatched = await bundleWorkflowCode({
    workflowsPath: require.resolve('../fixtures/unpatched-change/workflows'),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} },
  });
  for (const recording of ['subagent-run-v4-start.json', 'subagent-run-v6-agent-loop.json']) {
    await expect(replayHistoryFile(join(HISTORIES, recording), { workflowBundle: unpatched })).rejects.toBeInstanceOf(
      DeterminismViolationError,
    );
    // The shipped code replays the same histories.
    await expect(
      replayHistoryFile(join(HISTORIES, recording), { workflowBundle: workflowBundle() }),
    ).resolves.toBeUndefined();
  }
}, 120_000);
