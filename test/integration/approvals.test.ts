// Approvals: a tool call a policy holds parks the run durably (no activity in flight for an LLM
// child), its status and search attribute say `awaiting-approval`, `approve` answers it from the
// run or from any run above it, a timeout denies it, and every request and decision is in the
// run's events and its audit.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type SubagentRun,
  type SubagentRunEvent,
  type SubagentTool,
  SubagentError,
  auditDrafts,
  createSubagentTool,
  runOpenAIToolCall,
  toolResult,
} from '../../src';
import {
  createScriptedProvider,
  type FakeOpenAI,
  type ScriptedTurn,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../../src/testing';
import { createDelegationTool, createSpawnProvider } from '../../src/worker';
import { type SubagentRunStatus, statusQuery } from '../../workflows/definitions';
import {
  type TestTemporal,
  connectTestTemporal,
  eventually,
  newService,
  startWorker,
  text,
  uniqueName,
} from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-approvals-'));
const parent = { id: 'parent', session: { header: { id: 's', cwd } } };

/** Files the `delete_file` test tool was asked to delete: it only records them. */
const deleted: string[] = [];
const deleteFile: SubagentTool = {
  name: 'delete_file',
  description: 'Deletes a file.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  // Scratch files go without asking; anything else waits for a person.
  needsApproval: (args) => !String((args as { path?: string }).path).startsWith('scratch/'),
  async execute(args) {
    deleted.push((args as { path: string }).path);
    return toolResult('deleted');
  },
};

let fake: FakeOpenAI;
let temporal: TestTemporal;
let service: ReturnType<typeof newService>;
let stopWorker: () => Promise<void>;
let spawn: ReturnType<typeof createSpawnProvider>;
/** An LLM child that can delete files and delegate to its own kind. */
let cleaner: ReturnType<typeof createSpawnProvider>;
/** Scripted runs whose approvals wait an hour, and ones whose approvals time out at once. */
const patient = createScriptedProvider({ name: uniqueName('patient'), resumable: false });
const hasty = createScriptedProvider({
  name: uniqueName('hasty'),
  resumable: false,
  runSettings: { approvalTimeout: '1 second' },
});

beforeAll(async () => {
  fake = await startFakeOpenAI();
  spawn = createSpawnProvider({
    name: uniqueName('spawn'),
    tools: [deleteFile],
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
  });
  const cleanerName = uniqueName('cleaner');
  cleaner = createSpawnProvider({
    name: cleanerName,
    tools: [deleteFile, createDelegationTool({ provider: cleanerName })],
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
  });
  temporal = await connectTestTemporal();
  stopWorker = await startWorker(temporal, [spawn, cleaner, patient, hasty]);
  service = newService(temporal);
  for (const provider of [spawn, cleaner, patient, hasty]) service.registerProvider(provider);
}, 60_000);
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
  await fake?.close();
});

/** Reads `events` into `seen` until `until` matches one (or the stream ends). */
async function readUntil(
  events: AsyncIterable<SubagentRunEvent>,
  seen: SubagentRunEvent[],
  until: (event: SubagentRunEvent) => boolean,
): Promise<SubagentRunEvent | undefined> {
  for await (const event of events) {
    seen.push(event);
    if (until(event)) return event;
  }
  return undefined;
}

const status = (runId: string) =>
  temporal.client.workflow.getHandle(runId).query(statusQuery) as Promise<SubagentRunStatus>;
const statusAttribute = async (runId: string) =>
  (await temporal.client.workflow.getHandle(runId).describe()).searchAttributes.SubagentStatus?.[0];
const auditTypes = async (runId: string) => {
  const types: string[] = [];
  for await (const record of auditDrafts(temporal.client, runId, false)) types.push(record.type);
  return types;
};

describe('an LLM child', () => {
  let run: SubagentRun;
  let requestId: string;

  it('parks a call its tool holds, says awaiting-approval, and runs nothing until answered', async () => {
    fake.enqueue(toolCallReply([{ name: 'delete_file', arguments: { path: 'notes.txt' } }]), textReply('kept it'));
    run = service.start(spawn.name, { prompt: text('tidy up'), parent });
    const seen: SubagentRunEvent[] = [];
    const requested = await readUntil(run.events!(), seen, (event) => event.type === 'approval-requested');
    expect(requested).toMatchObject({
      type: 'approval-requested',
      requestId: `${run.id}/t0.s0.c0`,
      tool: 'delete_file',
      arguments: '{"path":"notes.txt"}',
      deadline: expect.any(Number),
    });
    requestId = (requested as { requestId: string }).requestId;
    expect((await status(run.id)).pendingApprovals).toEqual([
      expect.objectContaining({ requestId, tool: 'delete_file' }),
    ]);
    expect(await statusAttribute(run.id)).toBe('awaiting-approval');
    expect(deleted).toEqual([]);
    expect(fake.requests).toHaveLength(1);
  });

  it('refuses an answer that is not allow or deny, and a request the run never made', async () => {
    await expect(run.approve!(requestId, 'maybe' as never)).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    await expect(run.approve!(`${run.id}/t9.s9.c9`, 'allow')).rejects.toMatchObject({ code: 'UNKNOWN_APPROVAL' });
    await expect(run.approve!('not-a-request', 'allow')).rejects.toBeInstanceOf(SubagentError);
  });

  it('hands a denial and its reason to the model, and keeps the first decision against a later answer', async () => {
    expect(await run.approve!(requestId, { decision: 'deny', reason: 'keep the notes' })).toEqual({
      requestId,
      decision: 'deny',
      by: 'caller',
      reason: 'keep the notes',
    });
    expect(await run.result).toEqual({ output: text('kept it'), stopReason: 'completed' });
    expect(deleted).toEqual([]);
    const toolMessage = fake.requests[1]!.body.messages.find((message: { role: string }) => message.role === 'tool');
    expect(toolMessage?.content).toBe('Error: the call to delete_file was not approved: keep the notes');
    expect(await run.approve!(requestId, 'allow')).toMatchObject({ decision: 'deny', by: 'caller' });
    expect(await statusAttribute(run.id)).toBe('parked');
    expect(await auditTypes(run.id)).toEqual(
      expect.arrayContaining(['approval.requested', 'approval.answer', 'approval.decided']),
    );
  });

  it('runs an approved call, and a call its policy lets through without asking', async () => {
    fake.enqueue(
      toolCallReply([
        { name: 'delete_file', arguments: { path: 'scratch/tmp.txt' } },
        { name: 'delete_file', arguments: { path: 'old.log' } },
      ]),
      textReply('tidied'),
    );
    const next = service.start(spawn.name, { prompt: text('tidy up more'), parent });
    const seen: SubagentRunEvent[] = [];
    const requested = await readUntil(next.events!(), seen, (event) => event.type === 'approval-requested');
    // Only the call the policy holds waits; the other has run meanwhile.
    await eventually(() => (deleted.includes('scratch/tmp.txt') ? true : undefined));
    expect(deleted).toEqual(['scratch/tmp.txt']);
    await next.approve!((requested as { requestId: string }).requestId, 'allow');
    expect((await next.result).stopReason).toBe('completed');
    expect(deleted).toEqual(['scratch/tmp.txt', 'old.log']);
    const all: SubagentRunEvent[] = [];
    await readUntil(next.events!({ follow: false }), all, () => false);
    const steps = all.map((event) => (event.type.startsWith('approval') ? `${event.type}` : event.type));
    expect(steps.indexOf('approval-decided')).toBeLessThan(steps.lastIndexOf('tool-call-start'));
    expect(all.find((event) => event.type === 'approval-decided')).toMatchObject({ decision: 'allow', by: 'caller' });
  });

  it("lets the subagent tool's parent answer, through the OpenAI adapter", async () => {
    fake.enqueue(toolCallReply([{ name: 'delete_file', arguments: { path: 'main.ts' } }]), textReply('left main.ts'));
    const tool = createSubagentTool(service, { provider: spawn.name });
    const asked: string[] = [];
    const message = await runOpenAIToolCall(
      tool,
      {
        id: 'call-1',
        function: { name: 'subagent', arguments: JSON.stringify({ description: 'tidy', prompt: 'tidy' }) },
      },
      {
        parent,
        onApproval: (request) => {
          asked.push(`${request.tool} ${request.arguments}`);
          return { decision: 'deny', reason: 'the parent keeps its sources' };
        },
      },
    );
    expect(message.content).toBe('left main.ts');
    expect(asked).toEqual(['delete_file {"path":"main.ts"}']);
    const toolMessage = fake.requests.at(-1)!.body.messages.find((entry: { role: string }) => entry.role === 'tool');
    expect(toolMessage?.content).toBe('Error: the call to delete_file was not approved: the parent keeps its sources');
    expect(deleted).not.toContain('main.ts');
  });
});

describe('a three-level tree', () => {
  const tree = (provider: string, leaf: ScriptedTurn): ScriptedTurn[] => [
    {
      delegate: {
        provider,
        prompt: 'middle task',
        script: [{ delegate: { provider, prompt: 'leaf task', script: [leaf] }, reply: 'middle got {child}' }],
      },
      reply: 'root got {child}',
    },
  ];
  const askToDeploy: ScriptedTurn = {
    askApproval: { tool: 'deploy', arguments: { env: 'prod' }, kind: 'execute' },
    reply: 'deploy: {approval}',
  };

  it("answers the grandchild's request from the root's event stream", async () => {
    const root = service.start(patient.name, {
      prompt: text('ship it'),
      parent,
      agentOptions: { script: tree(patient.name, askToDeploy) as never },
    });
    const seen: SubagentRunEvent[] = [];
    const requested = await readUntil(root.events!({ nested: true }), seen, (e) => e.type === 'approval-requested');
    expect(requested).toMatchObject({ depth: 3, tool: 'deploy', kind: 'execute', arguments: '{"env":"prod"}' });
    const { requestId, runId: leafId } = requested as SubagentRunEvent & { requestId: string };
    expect(requestId.startsWith(`${leafId}/`)).toBe(true);
    expect(await statusAttribute(leafId)).toBe('awaiting-approval');

    // Only the runs above it may answer it.
    const stranger = service.start(patient.name, { prompt: text('unrelated'), parent });
    await stranger.result;
    await expect(stranger.approve!(requestId, 'allow')).rejects.toMatchObject({ code: 'UNKNOWN_APPROVAL' });

    expect(await root.approve!(requestId, { decision: 'allow', reason: 'release window' })).toMatchObject({
      decision: 'allow',
      by: 'caller',
    });
    expect(await root.result).toEqual({
      output: text('root got middle got deploy: allow'),
      stopReason: 'completed',
    });
    const leafEvents: SubagentRunEvent[] = [];
    await readUntil(service.attach(leafId).events!({ follow: false }), leafEvents, () => false);
    expect(leafEvents.filter((event) => event.type.startsWith('approval'))).toEqual([
      expect.objectContaining({ type: 'approval-requested', requestId }),
      expect.objectContaining({ type: 'approval-decided', requestId, decision: 'allow', reason: 'release window' }),
    ]);
    expect(await auditTypes(leafId)).toEqual(
      expect.arrayContaining(['approval.requested', 'approval.answer', 'approval.decided']),
    );
  }, 60_000);

  it("answers an LLM grandchild's held tool call from the root", async () => {
    const delegateTo = (prompt: string) =>
      toolCallReply([{ name: 'subagent', arguments: { description: 'clean up', prompt } }]);
    fake.enqueue(
      delegateTo('clean the middle'),
      delegateTo('clean the leaf'),
      toolCallReply([{ name: 'delete_file', arguments: { path: 'build/' } }]),
      textReply('leaf cleaned'),
      textReply('middle cleaned'),
      textReply('all clean'),
    );
    const root = service.start(cleaner.name, { prompt: text('clean everything'), parent });
    const seen: SubagentRunEvent[] = [];
    const requested = await readUntil(root.events!({ nested: true }), seen, (e) => e.type === 'approval-requested');
    expect(requested).toMatchObject({ depth: 3, tool: 'delete_file', arguments: '{"path":"build/"}' });
    expect(deleted).not.toContain('build/');
    await root.approve!((requested as { requestId: string }).requestId, 'allow');
    expect(await root.result).toEqual({ output: text('all clean'), stopReason: 'completed' });
    expect(deleted).toContain('build/');
  }, 60_000);

  it('denies a request nobody answers within the approval timeout', async () => {
    const root = service.start(hasty.name, {
      prompt: text('ship it'),
      parent,
      agentOptions: { script: tree(hasty.name, askToDeploy) as never },
    });
    expect(await root.result).toEqual({
      output: text('root got middle got deploy: deny (timeout)'),
      stopReason: 'completed',
    });
    const seen: SubagentRunEvent[] = [];
    await readUntil(root.events!({ nested: true, follow: false }), seen, () => false);
    expect(seen.filter((event) => event.type.startsWith('approval'))).toEqual([
      expect.objectContaining({ type: 'approval-requested', depth: 3 }),
      expect.objectContaining({ type: 'approval-decided', depth: 3, decision: 'deny', by: 'timeout' }),
    ]);
  }, 60_000);
});
