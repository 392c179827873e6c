// Records the histories the replay test checks every workflow change against. Run it when a
// workflow version ships (`npx tsx scripts/record-histories.ts v<N>`), never over the files of an
// earlier version, and never to paper over a replay failure: a failing replay means the change
// needs `patched()`. Since v2 the recordings also take the patched paths (a dispose before the
// result, a provider that cannot be nudged, a cancel that wins over a dead worker's turn); v3
// (`v3 cancelled-dead-worker`) adds a cancel that reaches the nested runs at once; v4
// (`v4 start resumed structured agent-loop disposed`) the settle record and a dispose that answers at
// once; v5 (`v5 disposed`) a segment that closes the run without a settle record; v6
// (`v6 start resumed structured agent-loop agent-loop-continued agent-loop-carried-on`) activity
// inputs that count what history holds already (store-once) and a turn that continues as new
// between model calls; v7 (`v7 resumed`) a resume that names itself; v8 (`v8 start agent-loop`)
// activity inputs without the run's id, model-call results without their calls listed twice, and
// (since v8) an agent-loop call the model-call activity answers itself; v9 (`v9 approvals
// turn-approval`) tool calls held for approval: two agent-loop calls, one approved and one denied,
// and a turn-based provider's request, approved; v10 (`v10 budget`) a run with a budget: a
// deadline's timer, cancelled when the segment settles, and the model-call limit ending the turn;
// v11 (every label) runs that record one patch marker for every patch (workflows/patches.ts) and
// a small settle record as a memo change; v12 (`v12 nested-parent nested-child`) a nested run
// that tells its parent it settled; v13 (every label) runs of the second generation, begun by a
// worker whose build ID names it, that record no patch marker at all; v14 (`v14
// parked-nested-parent parked-nested-child`) a parked run disposed while its background nested run
// is parked too: it closes only once the server has its cancel to the nested run (the server drops
// a cancel whose sender has closed); v15 (`v15 unnameable-parent unnameable-child`) what a raw
// client may send and ours refuses: a run whose parent's id has a lone surrogate fails at once, and
// a parked run ignores a `childStarted` signal naming such an id, then is disposed; v16 (`v16
// malformed-message`) a parked run drops a `sendMessage` signal whose content is not content, then
// is disposed; v17 (`v17 foreign-child`) a parked run ignores a `childStarted` signal naming a
// workflow whose id is not a run's, then is disposed (it cancels nothing); v18 (`v18
// many-children`) a parked run with one more nested run than a batch of cancels, disposed: it
// cancels them a batch at a time; v19 (`v19 malformed-input`) a raw client's run whose settings
// are null fails at once.
// The token limiter's workflow has versions of its own: v1 (`v1 limiter-continued limiter-ended`,
// files `token-limiter-v1-*.json`) reservations that wait, a charge, a continue-as-new, and the end;
// v2 (`v2 limiter-malformed`) the last run of such a limiter ignoring a raw client's charges of null
// and of Infinity tokens; v3 (`v3 limiter-malformed-input`) a limiter a raw client started with no
// input, taken as a new one.
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Payload, defaultPayloadConverter } from '@temporalio/common';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { type SubagentTool, TemporalSubagentService, toolResult } from '../src';
import { defaultTaskQueue } from '../src/seam/constants';
import { builtinFileTools } from '../src/tools';
import {
  createScriptedProvider,
  spawnWorkerProcess,
  startDevServer,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from '../src/testing';
import {
  bundleSubagentWorkflows,
  connectTemporal,
  createDelegationTool,
  createSpawnProvider,
  createSubagentWorker,
} from '../src/worker';
import {
  SUBAGENT_RUN_WORKFLOW,
  type SubagentRunInput,
  TOKEN_LIMITER_WORKFLOW,
  chargeTokensSignal,
  childStartedSignal,
  sendMessageSignal,
  statusQuery,
  tokenLimiterId,
} from '../workflows/definitions';
import { NESTED_CANCEL_BATCH } from '../workflows/patches';

const [VERSION, ...ONLY] = process.argv.slice(2);
if (!VERSION) {
  throw new Error('usage: npx tsx scripts/record-histories.ts v<N> [label...] (a version not recorded yet)');
}
const HISTORIES = join(__dirname, '..', 'test', 'histories');
const text = (value: string) => [{ type: 'text' as const, text: value }];

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  // Every recorded run stays far below this but the long turn, which so continues as new mid-turn.
  const server = await startDevServer({ dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': 150 } });
  const temporal = await connectTemporal({ env: { TEMPORAL_ADDRESS: server.address } });
  const provider = createScriptedProvider({ name: 'scripted' });
  const oneShot = createScriptedProvider({ name: 'one-shot', steering: false, resumable: false });
  const fake = await startFakeOpenAI();
  // A tool whose every call waits for approval (it runs nothing).
  const removeFile: SubagentTool = {
    name: 'remove_file',
    description: 'Removes a file.',
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
    needsApproval: true,
    execute: async () => toolResult('removed'),
  };
  const spawn = createSpawnProvider({
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
    tools: [...builtinFileTools(), removeFile],
  });
  // 500 tokens a second from a bucket of 600; each call is estimated at about 130.
  const limited = createSpawnProvider({
    name: 'limited',
    endpoint: { baseURL: fake.baseURL, model: 'fake-model', maxTokens: 50, tokensPerMinute: 30_000, tokenBurst: 600 },
    tools: [],
  });
  // An LLM child whose `subagent` tool starts a scripted run in the background.
  const background = createSpawnProvider({
    name: 'background',
    endpoint: { baseURL: fake.baseURL, model: 'fake-model' },
    tools: [
      createDelegationTool({ provider: 'scripted', background: true, agentOptions: { script: [{ reply: 'aside' }] } }),
    ],
  });
  const worker = await createSubagentWorker({
    connection: temporal.connection,
    providers: [provider, oneShot, spawn, limited, background],
  });
  const service = new TemporalSubagentService({ client: temporal.client });
  service.registerProvider(provider);
  service.registerProvider(oneShot);
  service.registerProvider(spawn);
  service.registerProvider(limited);
  service.registerProvider(background);
  await worker.runUntil(async () => {
    // A run touching every handler: steering, a failing-then-retried turn, resume, dispose.
    const run = service.start('scripted', {
      prompt: text('record me'),
      parent: { id: 'recorder', options: { subagentDepth: 1 } },
      maxDepth: 3,
      agentOptions: {
        script: [
          { delayMs: 500, reply: 'first: {input}' },
          { failAttempts: 1, reply: 'second: {input}' },
          { reply: 'resumed: {conversation}' },
        ],
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    run.sendMessage!(text('steer'));
    await run.result;
    const resumed = run.resume!(text('again'));
    await resumed.result;
    await resumed.dispose();
    // A structured run: a prose finish, the nudge, an invalid then a valid capture.
    const structured = service.start('scripted', {
      prompt: text('structured'),
      parent: { id: 'recorder' },
      outputSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
      agentOptions: {
        script: [
          { reply: 'prose first' },
          {
            calls: [
              { name: 'structured_output', arguments: { answer: 1 } },
              { name: 'structured_output', arguments: { answer: 'one' } },
            ],
          },
        ],
      },
    });
    await structured.result;
    await structured.dispose();

    // An agent-loop run: a tool call and one to a tool it does not have (answered by the model
    // call), a steering message before the next model call, an answer.
    fake.enqueue(
      toolCallReply(
        [
          { name: 'list_directory', arguments: {} },
          { name: 'no_such_tool', arguments: {} },
        ],
        { delayMs: 300 },
      ),
      textReply('listed'),
    );
    const agent = service.start('spawn', {
      prompt: text('list'),
      parent: { id: 'recorder', session: { header: { id: 's', cwd: __dirname } } },
    });
    await fake.waitForRequests(1);
    agent.sendMessage!(text('briefly'));
    await agent.result;
    await agent.dispose();

    // A dispose before the result settled: the run ends error.
    const disposed = service.start('scripted', {
      prompt: text('dispose me'),
      parent: { id: 'recorder' },
      agentOptions: { script: [{ hang: true }] },
    });
    await untilPending(disposed.id);
    await disposed.dispose();

    // A provider without steering that finishes without its structured value: no nudge.
    const unnudged = service.start('one-shot', {
      prompt: text('prose only'),
      parent: { id: 'recorder' },
      outputSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
    });
    await unnudged.result;
    await unnudged.dispose();

    const cancelled = await cancelWhileItsWorkerIsDead();

    // Two agent-loop calls held for approval in one model response: one approved, one denied.
    fake.enqueue(
      toolCallReply([
        { name: 'remove_file', arguments: { path: 'a.txt' } },
        { name: 'remove_file', arguments: { path: 'b.txt' } },
      ]),
      textReply('removed one'),
    );
    const held = service.start('spawn', { prompt: text('remove both'), parent: { id: 'recorder' } });
    const [first, second] = await pendingApprovals(held.id, 2);
    await held.approve!(first!, 'allow');
    await held.approve!(second!, { decision: 'deny', reason: 'keep b' });
    await held.result;
    await held.dispose();

    // A turn-based provider's request (as an ACP permission request its policy asks about).
    const asking = service.start('scripted', {
      prompt: text('deploy'),
      parent: { id: 'recorder' },
      agentOptions: { script: [{ askApproval: { tool: 'deploy', arguments: { env: 'prod' } }, reply: '{approval}' }] },
    });
    const [request] = await pendingApprovals(asking.id, 1);
    await asking.approve!(request!, 'allow');
    await asking.result;
    await asking.dispose();

    // A budget: two model calls allowed, and a deadline an hour away.
    fake.enqueue(
      toolCallReply([{ name: 'list_directory', arguments: {} }]),
      toolCallReply([{ name: 'list_directory', arguments: {} }]),
    );
    const budgeted = service.start('spawn', {
      prompt: text('list, and list again'),
      parent: { id: 'recorder', session: { header: { id: 's', cwd: __dirname } } },
      budget: { maxModelCalls: 2, deadline: Date.now() + 60 * 60 * 1000 },
    });
    await budgeted.result;
    await budgeted.dispose();

    // A nested run: the child tells its parent it settled (\`childSettled\`), and the parent hears it.
    const nesting = service.start('scripted', {
      prompt: text('delegate'),
      parent: { id: 'recorder' },
      agentOptions: {
        script: [
          { delegate: { provider: 'scripted', prompt: 'nested', script: [{ reply: 'leaf' }] }, reply: 'got {child}' },
        ],
      },
    });
    await nesting.result;
    const [nestedChild] = (await temporal.client.workflow.getHandle(nesting.id).query(statusQuery)).children;
    // The parent has heard from its child before it goes.
    await eventually(async () => {
      const history = await temporal.client.workflow.getHandle(nesting.id).fetchHistory();
      return history.events?.some(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'childSettled',
      );
    });
    await nesting.dispose();
    await temporal.client.workflow.getHandle(nestedChild!).result();

    // A parked run disposed while its background nested run is parked too: the cancel to the nested
    // run lands before the parent closes.
    fake.enqueue(
      toolCallReply([{ name: 'subagent', arguments: { description: 'aside', prompt: 'on the side' } }]),
      textReply('started it'),
    );
    const parkedParent = service.start('background', { prompt: text('delegate aside'), parent: { id: 'recorder' } });
    await parkedParent.result;
    let parkedChild: string | undefined;
    await eventually(async () => {
      [parkedChild] = (await temporal.client.workflow.getHandle(parkedParent.id).query(statusQuery)).children;
      return parkedChild !== undefined && (await service.attach(parkedChild).result).stopReason === 'completed';
    });
    await parkedParent.dispose();
    await temporal.client.workflow.getHandle(parkedChild!).result();

    // What a raw client may send and ours refuses: a run whose parent's id no command can carry
    // fails at once; a parked run ignores a nested run's start that names such an id.
    const [started] = (await temporal.client.workflow.getHandle(run.id).fetchHistory()).events!;
    const { input, taskQueue } = started!.workflowExecutionStartedEventAttributes!;
    const runInput = defaultPayloadConverter.fromPayload<SubagentRunInput>(input!.payloads![0]! as Payload);
    const unnameableParent = await temporal.client.workflow.start(SUBAGENT_RUN_WORKFLOW, {
      args: [{ ...runInput, request: { ...runInput.request, parent: { id: 'recorder', runId: 'subagent-x:\ud800' } } }],
      taskQueue: taskQueue!.name!,
      workflowId: `${run.id}-unnameable-parent`,
    });
    await unnameableParent.result().catch(() => undefined);
    const malformedInput = await temporal.client.workflow.start(SUBAGENT_RUN_WORKFLOW, {
      args: [{ ...runInput, settings: null } as never],
      taskQueue: taskQueue!.name!,
      workflowId: `${run.id}-malformed-input`,
    });
    await malformedInput.result().catch(() => undefined);
    const unnameableChild = service.start('scripted', { prompt: text('park'), parent: { id: 'recorder' } });
    await unnameableChild.result;
    await temporal.client.workflow
      .getHandle(unnameableChild.id)
      .signal(childStartedSignal, { runId: 'subagent-x:\ud800' });
    await unnameableChild.dispose();
    const malformedMessage = service.start('scripted', { prompt: text('park'), parent: { id: 'recorder' } });
    await malformedMessage.result;
    await temporal.client.workflow
      .getHandle(malformedMessage.id)
      .signal(sendMessageSignal, { content: 'not content' } as never);
    await malformedMessage.dispose();
    const foreignChild = service.start('scripted', { prompt: text('park'), parent: { id: 'recorder' } });
    await foreignChild.result;
    await temporal.client.workflow.getHandle(foreignChild.id).signal(childStartedSignal, { runId: 'orders-1' });
    await foreignChild.dispose();
    // More nested runs than one batch of cancels (runs the server does not have, as if closed long ago).
    const manyChildren = service.start('scripted', { prompt: text('park'), parent: { id: 'recorder' } });
    await manyChildren.result;
    for (let i = 0; i <= NESTED_CANCEL_BATCH; i++) {
      await temporal.client.workflow
        .getHandle(manyChildren.id)
        .signal(childStartedSignal, { runId: `subagent-scripted:closed-${i}` });
    }
    await manyChildren.dispose();

    // An endpoint's token limiter: calls that wait for the bucket, one whose usage is over its
    // estimate (charged the rest), a continue-as-new, and the end once the bucket is full again.
    // A limiter a raw client started with no input: a new one, which ends once it has lingered (since v3).
    const rawLimiter = await temporal.client.workflow.start(TOKEN_LIMITER_WORKFLOW, {
      args: [null as never],
      workflowId: tokenLimiterId('limited-raw'),
      taskQueue: defaultTaskQueue('limited'),
    });
    const limitedCalls = 60;
    fake.enqueue(
      textReply('over the estimate', { usage: { prompt: 2000, completion: 10 } }),
      ...Array.from({ length: limitedCalls - 1 }, () => textReply('done')),
    );
    const limitedRuns = Array.from({ length: limitedCalls }, (_, i) =>
      service.start('limited', { prompt: text(`call ${i}`), parent: { id: 'recorder' } }),
    );
    await Promise.all(limitedRuns.map((run) => run.result));
    await Promise.all(limitedRuns.map((run) => run.dispose()));
    const limiter = tokenLimiterId('limited');
    // Charges a raw client may send and ours never do: ignored (since v2).
    const limiterHandle = temporal.client.workflow.getHandle(limiter);
    await limiterHandle.signal(chargeTokensSignal, null as never);
    await limiterHandle.signal(chargeTokensSignal, { tokensPerMinute: 30_000, burst: 600, tokens: Infinity });
    const limiterRuns = await untilClosed(limiter);
    await rawLimiter.result();

    // One agent-loop turn long enough to continue as new between two of its model calls.
    const steps = 30;
    fake.enqueue(
      ...Array.from({ length: steps }, () => toolCallReply([{ name: 'list_directory', arguments: {} }])),
      textReply('done at last'),
    );
    const long = service.start('spawn', {
      prompt: text('keep listing'),
      parent: { id: 'recorder', session: { header: { id: 's', cwd: __dirname } } },
    });
    await long.result;
    await long.dispose();
    const longRuns: string[] = [];
    for await (const execution of temporal.client.workflow.list({ query: `WorkflowId = '${long.id}'` })) {
      longRuns.push(execution.runId);
    }
    const firstLongRun = (await temporal.client.workflow.getHandle(long.id).describe()).raw.workflowExecutionInfo
      ?.firstRunId;
    const carriedOn = longRuns.find((runId) => runId !== firstLongRun);

    const handle = temporal.client.workflow.getHandle(run.id);
    const firstRunId = (await handle.describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
    const recordings: (readonly [string, string, string | undefined, string?])[] = [
      ['start', run.id, firstRunId],
      ['resumed', run.id, undefined],
      ['structured', structured.id, undefined],
      ['agent-loop', agent.id, undefined],
      ['disposed', disposed.id, undefined],
      ['unnudged', unnudged.id, undefined],
      ['cancelled-dead-worker', cancelled, undefined],
      ['agent-loop-continued', long.id, firstLongRun ?? undefined],
      ['agent-loop-carried-on', long.id, carriedOn],
      ['approvals', held.id, undefined],
      ['turn-approval', asking.id, undefined],
      ['budget', budgeted.id, undefined],
      ['nested-parent', nesting.id, undefined],
      ['nested-child', nestedChild!, undefined],
      ['parked-nested-parent', parkedParent.id, undefined],
      ['parked-nested-child', parkedChild!, undefined],
      ['unnameable-parent', unnameableParent.workflowId, undefined],
      ['unnameable-child', unnameableChild.id, undefined],
      ['malformed-message', malformedMessage.id, undefined],
      ['foreign-child', foreignChild.id, undefined],
      ['many-children', manyChildren.id, undefined],
      ['malformed-input', malformedInput.workflowId, undefined],
      // The token limiter's recordings are versioned on their own (`v1 limiter-continued limiter-ended`).
      ['limiter-continued', limiter, limiterRuns[0], 'token-limiter'],
      ['limiter-ended', limiter, limiterRuns.at(-1), 'token-limiter'],
      ['limiter-malformed', limiter, limiterRuns.at(-1), 'token-limiter'],
      ['limiter-malformed-input', rawLimiter.workflowId, undefined, 'token-limiter'],
    ];
    // A version that changes one path records only the labels given after it.
    const chosen = recordings.filter(([label, , , workflow]) =>
      ONLY.length ? ONLY.includes(label) : workflow === undefined,
    );
    for (const [label, workflowId, runId, workflow = 'subagent-run'] of chosen) {
      const history = await temporal.client.workflow.getHandle(workflowId, runId).fetchHistory();
      const name = `${workflow}-${VERSION}-${label.replace(/^limiter-/, '')}.json`;
      const file = join(HISTORIES, name);
      if (existsSync(file)) throw new Error(`${file} exists: recorded histories are never rewritten`);
      const json = historyToJSON(history) + '\n';
      writeFileSync(file, json);
      appendFileSync(
        join(HISTORIES, 'RECORDED.sha256'),
        `${createHash('sha256').update(json).digest('hex')}  ${name}\n`,
      );
      console.log(`wrote ${file} (${history.events?.length} events)`);
    }
  });
  await temporal.close();
  await server.stop();
  await fake.close();

  /** Resolves once `check` is true, asking every 50 ms. */
  async function eventually(check: () => Promise<boolean | undefined>): Promise<void> {
    while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 50));
  }

  /** The ids of the run's approval requests, once `count` wait. */
  async function pendingApprovals(workflowId: string, count: number): Promise<string[]> {
    const handle = temporal.client.workflow.getHandle(workflowId);
    for (;;) {
      const pending = (await handle.query(statusQuery).catch(() => undefined))?.pendingApprovals ?? [];
      if (pending.length >= count) return pending.map((request) => request.requestId);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The runs of workflow `workflowId`, first to last, once its last has closed. */
  async function untilClosed(workflowId: string): Promise<string[]> {
    const handle = temporal.client.workflow.getHandle(workflowId);
    await handle.result();
    const runs: { runId: string; startTime: Date }[] = [];
    for await (const execution of temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
      runs.push({ runId: execution.runId, startTime: execution.startTime });
    }
    return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime()).map(({ runId }) => runId);
  }

  /** Resolves once the run's first activity is running. */
  async function untilPending(workflowId: string): Promise<void> {
    const handle = temporal.client.workflow.getHandle(workflowId);
    while (!(await handle.describe().catch(() => undefined))?.raw.pendingActivities?.length) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /**
   * A run whose turn, waiting on a nested run, runs in a worker process that is killed; a worker
   * here takes the workflow tasks; the run is cancelled before the dead turn's heartbeat times
   * out, cancels its nested run at once, and settles aborted.
   */
  async function cancelWhileItsWorkerIsDead(): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), 'record-dead-worker-'));
    const bundlePath = join(dir, 'bundle.js');
    writeFileSync(bundlePath, (await bundleSubagentWorkflows()).code);
    const eventsFile = join(dir, 'events.jsonl');
    writeFileSync(eventsFile, '');
    const doomedProvider = createScriptedProvider({ name: 'doomed', runSettings: { heartbeatTimeout: '15 seconds' } });
    service.registerProvider(doomedProvider);
    const doomed = await spawnWorkerProcess({
      TEMPORAL_TEST_ADDRESS: server.address,
      TEMPORAL_TEST_BUNDLE: bundlePath,
      PROVIDER_NAME: 'doomed',
      EVENTS_FILE: eventsFile,
    });
    const run = service.start('doomed', {
      prompt: text('delegate, then wait'),
      parent: { id: 'recorder' },
      agentOptions: { script: [{ delegate: { provider: 'doomed', prompt: 'hang', script: [{ hang: true }] } }] },
    });
    // Both turns run in the doomed worker, and the run has no workflow task left in flight there.
    const handle = temporal.client.workflow.getHandle(run.id);
    for (;;) {
      const turns = readFileSync(eventsFile, 'utf8').split('"turn-start"').length - 1;
      const settled = turns === 2 && !(await handle.describe()).raw.pendingWorkflowTask;
      if (settled && (await handle.query(statusQuery)).children.length === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const survivor = await createSubagentWorker({ connection: temporal.connection, providers: [doomedProvider] });
    await survivor.runUntil(async () => {
      await doomed.kill('SIGKILL');
      run.cancel('cancelled while its worker is dead');
      const result = await run.result;
      if (result.stopReason !== 'aborted') throw new Error(`the cancelled run settled ${result.stopReason}`);
      await run.dispose();
    });
    return run.id;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
