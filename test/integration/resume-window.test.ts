// The resume window with the time-skipping test server: a parked run closes once its window has
// passed (hours, skipped in a moment), and resume then fails with the typed error.
import { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { TemporalSubagentService } from '../../src';
import { createScriptedProvider, resolveTemporalBinary } from '../../src/testing';
import { SubagentRunOutcome } from '../../workflows/definitions';
import { installQuietRuntime, recordingLogger, startWorker, TestTemporal, text } from '../helpers/temporal';

let env: TestWorkflowEnvironment;
let stopWorker: () => Promise<void>;
let service: TemporalSubagentService;
/**
 * A plain client on the test server: only `env.sleep` moves its clock. The environment's own
 * client lets the server skip ahead while a `result()` waits, which, on a loaded machine, skipped
 * past the resumed run's window while the first run's close was still on its way.
 */
let client: Client;
const logger = recordingLogger();
const scripted = createScriptedProvider({ runSettings: { resumeWindow: '6 hours' } });

beforeAll(async () => {
  installQuietRuntime();
  env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTemporalBinary('test-server') } },
  });
  const namespace = env.namespace ?? 'default';
  client = new Client({ connection: env.connection, namespace });
  const temporal: TestTemporal = {
    address: '',
    namespace,
    connection: env.nativeConnection,
    client,
    close: async () => undefined,
  };
  stopWorker = await startWorker(temporal, [scripted]);
  // The time-skipping test server knows no custom search attributes.
  service = new TemporalSubagentService({ client, logger, searchAttributes: false });
  service.registerProvider(scripted);
}, 60_000);
afterAll(async () => {
  await stopWorker?.();
  await env?.teardown();
});

it('closes a parked run when its resume window passes, and refuses resume with NOT_RESUMABLE', async () => {
  const run = service.start(scripted.name, { prompt: text('park me'), parent: { id: 'p' } });
  expect(await run.result).toEqual({ output: text('scripted reply to: park me'), stopReason: 'completed' });

  const resumable = service.start(scripted.name, { prompt: text('resume me in time'), parent: { id: 'p' } });
  await resumable.result;
  await env.sleep('5 hours');
  const inTime = resumable.resume!(text('within the window'));
  expect((await inTime.result).stopReason).toBe('completed');

  await env.sleep('2 hours'); // past the first run's six hours
  const outcome = (await client.workflow.getHandle(run.id).result()) as SubagentRunOutcome;
  expect(outcome.closedBy).toBe('expired');
  const late = run.resume!(text('too late'));
  await expect(late.result).rejects.toMatchObject({ code: 'NOT_RESUMABLE' });
  await inTime.dispose();
  expect(logger.warnings).toEqual([]);
}, 120_000);
