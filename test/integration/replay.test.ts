// Determinism: recorded histories of the shipped workflows (the run and the token limiter) replay
// against the current code.
// A failure here means a workflow change needs `patched()`; never re-record to make it pass
// (docs/versioning.md). Recordings overwritten before that rule held are back under their own
// names: `<name>.<commit>.json`, the file as that commit had it.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { createScriptedProvider, replayHistoryFile } from '../../src/testing';
import { subagentSinks } from '../../src/worker';
import {
  connectTestTemporal,
  eventually,
  installQuietRuntime,
  newService,
  startWorker,
  text,
  uniqueName,
  workflowBundle,
} from '../helpers/temporal';

const HISTORIES = join(__dirname, '..', 'histories');
/** The run's recordings of v11, every label the script had then; v13 records them and the nested two. */
const V11_LABELS = [
  'start',
  'resumed',
  'structured',
  'agent-loop',
  'disposed',
  'unnudged',
  'cancelled-dead-worker',
  'agent-loop-continued',
  'agent-loop-carried-on',
  'approvals',
  'turn-approval',
  'budget',
];

describe('replay', () => {
  beforeAll(installQuietRuntime);

  const files = readdirSync(HISTORIES).filter(
    (file) => (file.startsWith('subagent-run-') || file.startsWith('token-limiter-')) && file.endsWith('.json'),
  );

  it("has recorded histories of each shipped workflow version: the run's v1, v2 with its patched paths, v3 to v19, and the overwritten ones; the token limiter's v1 to v3", () => {
    expect(files).toEqual(
      expect.arrayContaining([
        ...['start', 'resumed', 'structured', 'agent-loop'].map((label) => `subagent-run-v1-${label}.json`),
        ...['start', 'resumed', 'structured', 'agent-loop', 'disposed', 'unnudged', 'cancelled-dead-worker'].map(
          (label) => `subagent-run-v2-${label}.json`,
        ),
        'subagent-run-v3-cancelled-dead-worker.json',
        ...['start', 'resumed', 'structured', 'agent-loop', 'disposed'].map((label) => `subagent-run-v4-${label}.json`),
        'subagent-run-v5-disposed.json',
        ...['start', 'resumed', 'structured', 'agent-loop', 'agent-loop-continued', 'agent-loop-carried-on'].map(
          (label) => `subagent-run-v6-${label}.json`,
        ),
        'subagent-run-v7-resumed.json',
        ...['start', 'agent-loop'].map((label) => `subagent-run-v8-${label}.json`),
        ...['approvals', 'turn-approval'].map((label) => `subagent-run-v9-${label}.json`),
        'subagent-run-v10-budget.json',
        ...V11_LABELS.map((label) => `subagent-run-v11-${label}.json`),
        ...['nested-parent', 'nested-child'].map((label) => `subagent-run-v12-${label}.json`),
        ...[...V11_LABELS, 'nested-parent', 'nested-child'].map((label) => `subagent-run-v13-${label}.json`),
        ...['parked-nested-parent', 'parked-nested-child'].map((label) => `subagent-run-v14-${label}.json`),
        ...['unnameable-parent', 'unnameable-child'].map((label) => `subagent-run-v15-${label}.json`),
        'subagent-run-v16-malformed-message.json',
        'subagent-run-v17-foreign-child.json',
        'subagent-run-v18-many-children.json',
        'subagent-run-v19-malformed-input.json',
        ...['continued', 'ended'].map((label) => `token-limiter-v1-${label}.json`),
        'token-limiter-v2-malformed.json',
        'token-limiter-v3-malformed-input.json',
        ...['start', 'resumed'].map((label) => `subagent-run-v1-${label}.ec5e0de.json`),
        ...['start', 'resumed', 'structured'].map((label) => `subagent-run-v1-${label}.d523cac.json`),
        ...['start', 'resumed', 'structured', 'agent-loop'].map((label) => `subagent-run-v1-${label}.ad44515.json`),
        ...['start', 'resumed', 'structured', 'agent-loop', 'disposed', 'unnudged'].map(
          (label) => `subagent-run-v2-${label}.92b4f8b.json`,
        ),
      ]),
    );
  });

  it.each(files)('replays %s without a determinism error', async (file) => {
    await expect(
      replayHistoryFile(join(HISTORIES, file), { workflowBundle: workflowBundle() }),
    ).resolves.toBeUndefined();
  });

  it('replays a history recorded live from the current code, whose runs record no patch marker', async () => {
    const temporal = await connectTestTemporal();
    const provider = createScriptedProvider({ name: uniqueName('replay') });
    const stop = await startWorker(temporal, [provider]);
    try {
      const service = newService(temporal);
      service.registerProvider(provider);
      const run = service.start(provider.name, { prompt: text('x'), parent: { id: 'p' } });
      run.sendMessage!(text('y'));
      await run.result;
      const resumed = run.resume!(text('z'));
      await resumed.result;
      await resumed.dispose();
      const query = `WorkflowId = '${run.id}'`;
      await eventually(async () => ((await temporal.client.workflow.count(query)).count === 2 ? true : undefined));
      const histories = temporal.client.workflow.list({ query }).intoHistories();
      let replayed = 0;
      for await (const result of Worker.runReplayHistories(
        { workflowBundle: workflowBundle(), sinks: subagentSinks() },
        histories,
      )) {
        expect(result.error).toBeUndefined();
        replayed++;
      }
      expect(replayed).toBe(2);
      // Both runs began on this build, whose ID names its generation: no marker, no
      // TemporalChangeVersion upsert (docs/versioning.md).
      let checked = 0;
      for await (const execution of temporal.client.workflow.list({ query })) {
        const history = await temporal.client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
        const events = history.events ?? [];
        expect(
          events.find((e) => e.workflowTaskCompletedEventAttributes)?.workflowTaskCompletedEventAttributes,
        ).toMatchObject({ workerVersion: { buildId: expect.stringMatching(/^subagents@2\+[0-9a-f]{16}$/) } });
        expect(events.filter((e) => e.markerRecordedEventAttributes)).toEqual([]);
        expect(JSON.stringify(events)).not.toContain('TemporalChangeVersion');
        checked++;
      }
      expect(checked).toBe(2);
    } finally {
      await stop();
      await temporal.close();
    }
  });

  // A run's state is its own only while the modules it shares with the worker's other runs hold
  // none (the layout test checks that); sharing them is what the preloading does.
  it('builds its bundle to evaluate the workflow modules once per worker thread, shared by its runs', () => {
    const code = readFileSync(workflowBundle().codePath, 'utf8');
    const preloaded = /exports\.preloadModules = function preloadModules\(\) \{([^}]*)\}/.exec(code)?.[1];
    expect(preloaded).toContain('"./workflows/index.ts"');
  });
});
