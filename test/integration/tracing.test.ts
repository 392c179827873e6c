// Opt-in OpenTelemetry tracing: client, workflow and activity spans for a run, and none twice
// although every workflow task replays the whole history (a worker with no workflow cache).
import { Client } from '@temporalio/client';
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { runStarted, TemporalSubagentService, tracingClientInterceptors } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { bundleSubagentWorkflows } from '../../src/worker';
import { statusQuery } from '../../workflows/definitions';
import {
  connectTestTemporal,
  eventually,
  recordingLogger,
  startWorker,
  TestTemporal,
  text,
  turnGates,
  uniqueName,
} from '../helpers/temporal';

let temporal: TestTemporal;
let stopWorker: () => Promise<void>;
const exporter = new InMemorySpanExporter();
const scripted = createScriptedProvider({ name: uniqueName('traced') });

beforeAll(async () => {
  // As an application's OpenTelemetry setup does (the NodeSDK registers both): an active context
  // per async flow, carried across processes in W3C trace-context headers.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  temporal = await connectTestTemporal();
  const bundle = await bundleSubagentWorkflows({ tracing: true });
  stopWorker = await startWorker(temporal, [scripted], {
    tracing: { spanProcessor: new SimpleSpanProcessor(exporter) },
    workflowBundle: { code: bundle.code },
    // No cache: every workflow task replays the history from the start.
    workerOptions: { maxCachedWorkflows: 0 },
  });
}, 60_000);
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
});

it('traces a run end to end, each span once although every task replays the history', async () => {
  const client = new Client({
    connection: temporal.connection,
    interceptors: tracingClientInterceptors({ spanProcessor: new SimpleSpanProcessor(exporter) }),
  });
  const service = new TemporalSubagentService({ client, logger: recordingLogger() });
  service.registerProvider(scripted);
  const gates = turnGates();
  const run = service.start(scripted.name, {
    prompt: text('trace me'),
    parent: { id: 'p' },
    agentOptions: { script: [{ waitFor: gates.waitFor, reply: 'one' }, { reply: 'two' }] },
  });
  // The message is queued while the first turn is held, so it starts the second.
  run.sendMessage!(text('and this'));
  await runStarted(run);
  const handle = temporal.client.workflow.getHandle(run.id);
  await eventually(async () => ((await handle.query(statusQuery)).pendingMessages === 1 ? true : undefined));
  gates.open(run.id, 0);
  expect(await run.result).toEqual({ output: text('two'), stopReason: 'completed' });
  await run.dispose();

  const names = exporter.getFinishedSpans().map((span) => span.name);
  const count = (name: string) => names.filter((candidate) => candidate === name).length;
  expect(count('StartWorkflow:subagentRunWorkflow')).toBe(1);
  expect(count('RunWorkflow:subagentRunWorkflow')).toBe(1);
  expect(count('StartActivity:subagentTurn')).toBe(2);
  expect(count('RunActivity:subagentTurn')).toBe(2);
  expect(count('HandleSignal:sendMessage')).toBe(1);
  // The activity spans are children of the workflow's, which is a child of the client's.
  const byName = new Map(exporter.getFinishedSpans().map((span) => [span.name, span]));
  const workflowSpan = byName.get('RunWorkflow:subagentRunWorkflow')!;
  expect(workflowSpan.spanContext().traceId).toBe(
    byName.get('StartWorkflow:subagentRunWorkflow')!.spanContext().traceId,
  );
  expect(byName.get('RunActivity:subagentTurn')!.spanContext().traceId).toBe(workflowSpan.spanContext().traceId);
});
