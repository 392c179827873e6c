// One turn that streams for a long time: an ACP turn is one activity, so its run cannot continue as
// new until it ends, and every batch of its text is a signal (and a workflow task) in that one
// Temporal run. Each test runs on a dev server of its own whose limits a fast stream reaches in
// seconds (the scripted ACP test agent in a real child process, batches a few milliseconds apart),
// as a turn of hours would reach the server's defaults.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { temporal as proto } from '@temporalio/proto';
import type { SubagentMessageUndeliveredInfo } from '../../src';
import { type AcpScriptedTurn, acpTestAgentCommand } from '../../src/testing';
import { createAcpProvider } from '../../src/worker';
import { statusQuery } from '../../workflows/definitions';
import { agentLog } from '../helpers/acp';
import {
  eventually,
  FRESH_PROCESS_WITHIN_MS,
  newService,
  startTestServer,
  startWorker,
  text,
  uniqueName,
} from '../helpers/temporal';

const cwd = mkdtempSync(join(tmpdir(), 'subagent-streaming-turn-'));
/** Batches a few milliseconds apart, at most 20 for a turn, and at most 1 MiB of text. */
const TEXT_BATCHES = { firstMs: 1, maxMs: 2, maxBatches: 20, maxBytes: 1024 * 1024 };
/** 3,000 chunks a millisecond or so apart: thousands of batches at the pace above, without a budget. */
const CHUNKS = Array.from({ length: 3000 }, (_, i) => `w${i} `);
const WHOLE = CHUNKS.join('');
const { EventType } = proto.api.enums.v1;

type Service = ReturnType<typeof newService>;
type Temporal = Awaited<ReturnType<typeof startTestServer>>;

/** What the agent logs: each chunk it sends, by prompt. */
interface AgentEvent {
  event: string;
  index?: number;
}

/** The ACP test agent playing `turns` on a server of its own with `dynamicConfig`; `check` looks at the run. */
async function streamOn(
  dynamicConfig: Record<string, unknown>,
  turns: AcpScriptedTurn[],
  check: (
    run: ReturnType<Service['start']>,
    context: { service: Service; temporal: Temporal; agentEvents: () => AgentEvent[] },
  ) => Promise<void>,
) {
  const temporal = await startTestServer({ dynamicConfig });
  const { path: log, events: agentEvents } = agentLog<AgentEvent>();
  const provider = createAcpProvider({
    name: uniqueName('streaming-turn'),
    ...acpTestAgentCommand({ turns }, log),
    askToolKinds: ['execute'],
    killGraceMs: 500,
    initializeTimeoutMs: 10_000,
    runSettings: { retry: { maximumAttempts: 1 } },
  });
  const stopWorker = await startWorker(temporal, [provider], { textBatches: TEXT_BATCHES });
  try {
    const service = newService(temporal);
    service.registerProvider(provider);
    const run = service.start(provider.name, {
      prompt: text('stream'),
      parent: { id: 'p', session: { header: { id: 's', cwd } } },
    });
    await check(run, { service, temporal, agentEvents });
    await run.dispose();
  } finally {
    await stopWorker();
    await temporal.close();
  }
}

/** The turn completed, its result holding the whole text. */
async function settledWithWholeText(run: ReturnType<Service['start']>): Promise<void> {
  const result = await run.result;
  expect([result.stopReason, result.diagnostic]).toEqual(['completed', undefined]);
  expect(result.output).toEqual(text(WHOLE));
}

/** The text the run's observers were handed, in order. */
async function streamed(run: ReturnType<Service['start']>): Promise<string> {
  let seen = '';
  for await (const event of run.events!({ follow: false })) {
    if (event.type === 'text-delta') seen += event.text;
  }
  return seen;
}

it("keeps a turn's streamed text within its batch budget, so the run still takes a steering message and a permission decision after it on a server that takes 60 signals (they were refused past the limit: the message RESOURCE_EXHAUSTED, the approved request cancelled)", async () => {
  const ask = { title: 'run the tests', kind: 'execute', rawInput: { command: 'npm test' } };
  await streamOn(
    { 'history.maximumSignalsPerExecution': 60 },
    [{ chunks: CHUNKS, chunkDelayMs: 1, askPermission: ask, askPermissionLast: true }],
    async (run, { service, temporal }) => {
      // The agent has streamed all its text and waits for a person to answer.
      let requestId: string | undefined;
      for await (const event of run.events!()) {
        if (event.type !== 'approval-requested') continue;
        requestId = event.requestId;
        break;
      }
      const undelivered: SubagentMessageUndeliveredInfo[] = [];
      service.on('subagent/message-undelivered', (info) => undelivered.push(info));
      run.sendMessage!(text('after the stream'));
      const handle = temporal.client.workflow.getHandle(run.id);
      await eventually(async () =>
        undelivered.length > 0 || (await handle.query(statusQuery)).pendingMessages === 1 ? true : undefined,
      );
      expect(undelivered.map((info) => info.error.code)).toEqual([]);
      await run.approve!(requestId!, 'allow');
      // The agent was told it may, and the message was its next prompt.
      expect(await run.result).toEqual({ output: text('echo: after the stream'), stopReason: 'completed' });

      const history = await handle.fetchHistory();
      const signals = (name: string) =>
        history.events!.filter(
          (event) =>
            event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
            event.workflowExecutionSignaledEventAttributes?.signalName === name,
        );
      expect(signals('permissionDecided')).toHaveLength(1);
      expect(signals('textDelta').length).toBeGreaterThan(0);
      expect(signals('textDelta').length).toBeLessThanOrEqual(TEXT_BATCHES.maxBatches);
      // What observers were handed is the beginning of what the agent said, in both prompts.
      const seen = await streamed(run);
      expect(seen.length).toBeGreaterThan(0);
      expect(`${WHOLE}permission: allow_onceecho: after the stream`.startsWith(seen)).toBe(true);
    },
  );
}, 180_000);

it('keeps a turn that streams for long from getting its run terminated at the history limit (a server that ends a run past 300 events)', async () => {
  await streamOn(
    { 'limit.historyCount.error': 300, 'limit.historyCount.warn': 200 },
    [{ chunks: CHUNKS, chunkDelayMs: 1 }],
    async (run, { temporal }) => {
      await settledWithWholeText(run);
      const { status } = await temporal.client.workflow.getHandle(run.id).describe();
      expect(status.name).toBe('COMPLETED');
    },
  );
}, 180_000);

it('keeps what a turn of many prompts streams within its byte budget, so its run is not terminated at the history size limit (a server that ends a run past 3 MiB: 3 prompts of 1.2 MiB each, the steering between them)', async () => {
  const prompt = { chunks: ['y'.repeat(10 * 1024)], repeatChunks: 120, chunkDelayMs: 10 };
  await streamOn(
    { 'limit.historySize.error': 3 * 1024 * 1024, 'limit.historySize.warn': 1024 * 1024 },
    [prompt, prompt, { ...prompt, chunks: ['z'.repeat(10 * 1024)] }],
    async (run, { agentEvents }) => {
      // A message while each of the first two prompts streams: the next prompt of the same turn.
      for (const index of [0, 1]) {
        await eventually(
          () => agentEvents().find((e) => e.event === 'chunk' && e.index === index),
          FRESH_PROCESS_WITHIN_MS,
        );
        run.sendMessage!(text(`go on ${index}`));
      }
      const result = await run.result;
      expect([result.stopReason, result.diagnostic]).toEqual(['completed', undefined]);
      expect(result.output).toEqual(text('z'.repeat(1200 * 1024)));
      // Observers were handed the beginning of the first prompt's text, up to the budget.
      const seen = await streamed(run);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.length).toBeLessThanOrEqual(TEXT_BATCHES.maxBytes);
      expect(seen).toBe('y'.repeat(seen.length));
    },
  );
}, 180_000);
