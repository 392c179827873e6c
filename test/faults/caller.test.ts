// Fault (d): the caller process dies while its delegations run. A new caller attaches by id and
// gets every result; the runs never depended on the process that started them.
import { createScriptedProvider, spawnReadyProcess } from '../../src/testing';
import { statusQuery } from '../../workflows/definitions';
import { fixture, newService, testRuns, text, turnGates, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('caller-faults') });

const runs = testRuns([scripted]);

it('gives every result to a new caller that attaches after the first one was SIGKILLed', async () => {
  const gates = turnGates();
  let printed = '';
  const caller = await spawnReadyProcess(
    fixture('caller-process'),
    { PROVIDER_NAME: scripted.name, RUNS: '5', GATES: gates.waitFor },
    (line) => {
      if (line.startsWith('[')) printed = line;
    },
  );
  const ids = JSON.parse(printed) as string[];
  await caller.kill('SIGKILL');
  // The caller died while every run was still working: each turn is held at its gate.
  const phases = await Promise.all(
    ids.map(async (id) => (await runs.temporal.client.workflow.getHandle(id).query(statusQuery)).phase),
  );
  expect(phases).toEqual(ids.map(() => 'running'));
  for (const id of ids) gates.open(id, 0);

  const service = newService(runs.temporal);
  service.registerProvider(scripted);
  const results = await Promise.all(ids.map((id) => service.attach(id).result));
  expect(results).toEqual(ids.map((_, i) => ({ output: text(`finished task ${i}`), stopReason: 'completed' })));
  await Promise.all(ids.map((id) => service.attach(id).dispose()));
});
