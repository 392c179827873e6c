// Search attributes on a namespace that lacks them: the service warns once and starts runs
// without them (never a failing start, never a stuck workflow); `ensureSearchAttributes` then
// registers them and runs carry them again.
import { Client } from '@temporalio/client';
import Long from 'long';
import { ensureSearchAttributes, TemporalSubagentService } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import {
  connectTestTemporal,
  eventually,
  recordingLogger,
  startWorker,
  TestTemporal,
  text,
  uniqueName,
} from '../helpers/temporal';

const namespace = uniqueName('bare-namespace');
let temporal: TestTemporal;
let stopWorker: () => Promise<void>;
const scripted = createScriptedProvider({ name: uniqueName('sa') });

beforeAll(async () => {
  const base = await connectTestTemporal();
  await base.connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(86_400) },
  });
  await base.close();
  temporal = await connectTestTemporal(namespace);
  await eventually(
    async () =>
      await temporal.connection.workflowService.describeNamespace({ namespace }).then(
        () => true,
        () => undefined,
      ),
  );
  stopWorker = await startWorker(temporal, [scripted]);
});
afterAll(async () => {
  await stopWorker?.();
  await temporal?.close();
});

it('starts runs without search attributes where the namespace lacks them, and with them once registered', async () => {
  const logger = recordingLogger();
  const service = new TemporalSubagentService({
    client: new Client({ connection: temporal.connection, namespace }),
    logger,
  });
  service.registerProvider(scripted);
  const first = service.start(scripted.name, { prompt: text('one'), parent: { id: 'p' } });
  expect(await first.result).toEqual({ output: text('scripted reply to: one'), stopReason: 'completed' });
  const second = service.start(scripted.name, { prompt: text('two'), parent: { id: 'p' } });
  await second.result;
  expect(logger.warnings).toEqual([expect.stringContaining('does not know the subagent search attributes')]);
  expect((await temporal.client.workflow.getHandle(first.id).describe()).searchAttributes).not.toHaveProperty(
    'SubagentProvider',
  );

  expect(await ensureSearchAttributes(temporal.connection, namespace)).toEqual([
    'SubagentProvider',
    'SubagentParentRunId',
    'SubagentDepth',
    'SubagentStatus',
    'SubagentStopReason',
    'SubagentRootRunId',
    'SubagentTokens',
    'SubagentCostUsd',
  ]);
  expect(await ensureSearchAttributes(temporal.connection, namespace)).toEqual([]);
  // The server may refuse a start with attributes registered a moment ago, which a service then
  // starts without them, as it warns. And the frontend takes attributes just registered before
  // every history host does: a host that does not know them yet refuses the workflow task that
  // upserts them, which is then retried (under a full test run's load, once not within 90 s). A
  // new service tries again until a run starts indexed and shows its attributes; a run whose
  // upsert is still refused is ended.
  const { third, searchAttributes } = await eventually(async () => {
    const startLogger = recordingLogger();
    const indexed = new TemporalSubagentService({
      client: new Client({ connection: temporal.connection, namespace }),
      logger: startLogger,
    });
    indexed.registerProvider(scripted);
    const run = indexed.start(scripted.name, { prompt: text('three'), parent: { id: 'p' } });
    await run.result;
    if (startLogger.warnings.length > 0) {
      await run.dispose();
      return undefined;
    }
    const handle = temporal.client.workflow.getHandle(run.id);
    const shown = await eventually(async () => {
      const { searchAttributes: now } = await handle.describe();
      return now.SubagentStopReason ? now : undefined;
    }, 20_000).catch(() => undefined);
    if (shown) return { third: run, searchAttributes: shown };
    await handle.terminate('its search attributes are refused');
    return undefined;
  }, 120_000);
  expect(searchAttributes).toMatchObject({
    SubagentProvider: [scripted.name],
    SubagentStatus: ['parked'],
    SubagentStopReason: ['completed'],
    SubagentDepth: [1],
  });
  await Promise.all([first.dispose(), second.dispose(), third.dispose()]);
}, 180_000);
