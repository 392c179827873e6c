// Idempotent start: a caller key makes starting twice return the same run and never create two
// workflows, from any process and after the run closed; the same key for another request is typed.
// Idempotent resume: the same resume sent again after the run continued as new begins one segment
// and is one `resumed` event and one audit record, and a caller that joins after it waits for that
// segment.
import { exportAudit } from '../../src';
import { createScriptedProvider } from '../../src/testing';
import { resumeUpdate, statusQuery } from '../../workflows/definitions';
import { eventually, newService, testRuns, text, turnGates, uniqueName } from '../helpers/temporal';

const scripted = createScriptedProvider({ name: uniqueName('idem'), resumable: false });
const resumable = createScriptedProvider({ name: uniqueName('idem-resume') });

const runs = testRuns([scripted, resumable]);

const request = (key: string, prompt = 'same task') => ({
  prompt: text(prompt),
  parent: { id: 'p' },
  idempotencyKey: key,
  agentOptions: { script: [{ delayMs: 300, reply: 'done: {input}' }] },
});
const gates = turnGates();
/**
 * A resume of segment 0, as the client sends it, and as its retry after a fault sends it again: the
 * same update id.
 */
const resend = (runId: string, content: string, resumeId: string) =>
  runs.temporal.client.workflow.getHandle(runId).executeUpdate(resumeUpdate, {
    args: [{ fromSegment: 0, content: text(content), resumeId }],
    updateId: `resume-${resumeId}`,
  });
const workflowsWithId = async (runId: string) =>
  (await runs.temporal.client.workflow.count(`WorkflowId = '${runId}'`)).count;

it('returns the same run for the same key, from another caller too, with one workflow', async () => {
  const key = uniqueName('key');
  const first = runs.service.start(scripted.name, request(key));
  const other = newService(runs.temporal);
  other.registerProvider(scripted);
  const second = other.start(scripted.name, request(key));
  expect(second.id).toBe(first.id);
  const [a, b] = await Promise.all([first.result, second.result]);
  expect(a).toEqual({ output: text('done: same task'), stopReason: 'completed' });
  expect(b).toEqual(a);
  expect(await eventually(() => workflowsWithId(first.id).then((n) => (n > 0 ? n : undefined)))).toBe(1);
});

it('returns the closed run for a key whose run has ended, starting nothing new', async () => {
  const key = uniqueName('key');
  const first = runs.service.start(scripted.name, request(key));
  await first.result;
  await first.dispose();
  const again = runs.service.start(scripted.name, request(key));
  expect(await again.result).toEqual({ output: text('done: same task'), stopReason: 'completed' });
  expect(await eventually(() => workflowsWithId(first.id).then((n) => (n > 0 ? n : undefined)))).toBe(1);
});

it('rejects the result with IDEMPOTENCY_CONFLICT when the key was used for a different request', async () => {
  const key = uniqueName('key');
  const first = runs.service.start(scripted.name, request(key, 'one task'));
  expect(await first.result).toEqual({ output: text('done: one task'), stopReason: 'completed' });
  const conflicting = runs.service.start(scripted.name, request(key, 'another task'));
  await expect(conflicting.result).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
  expect(await workflowsWithId(first.id)).toBe(1);
});

it('lets exactly one of two racing starts with one key and different requests win', async () => {
  const key = uniqueName('key');
  const racers = [
    runs.service.start(scripted.name, request(key, 'one task')),
    runs.service.start(scripted.name, request(key, 'another task')),
  ];
  const settled = await Promise.allSettled(racers.map((run) => run.result));
  const won = settled.filter((outcome) => outcome.status === 'fulfilled');
  const lost = settled.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  expect(won).toHaveLength(1);
  expect(lost.map((outcome) => (outcome.reason as { code: string }).code)).toEqual(['IDEMPOTENCY_CONFLICT']);
  expect(await eventually(() => workflowsWithId(racers[0]!.id).then((n) => (n > 0 ? n : undefined)))).toBe(1);
});

it('treats equal requests as equal whatever the key order of their objects', async () => {
  const key = uniqueName('key');
  const first = runs.service.start(scripted.name, {
    ...request(key),
    agentOptions: { script: [{ delayMs: 100, reply: 'x' }], other: 1 },
  });
  const second = runs.service.start(scripted.name, {
    ...request(key),
    agentOptions: { other: 1, script: [{ reply: 'x', delayMs: 100 }] },
  });
  expect(await second.result).toEqual(await first.result);
});

it('refuses a malformed key synchronously with INVALID_REQUEST', () => {
  expect(() => runs.service.start(scripted.name, { ...request(''), idempotencyKey: '' })).toThrow(
    expect.objectContaining({ code: 'INVALID_REQUEST' }),
  );
  expect(() => runs.service.start(scripted.name, { ...request('k'), idempotencyKey: 7 as never })).toThrow(
    expect.objectContaining({ code: 'INVALID_REQUEST' }),
  );
});

it('answers a resume sent again after it began its segment (its answer lost), beginning one segment', async () => {
  const run = runs.service.start(resumable.name, {
    prompt: text('first'),
    parent: { id: 'p' },
    agentOptions: { script: [{ reply: 'turn {turn}: {input}' }, { reply: 'turn {turn}: {input}' }] },
  });
  await run.result;
  const handle = runs.temporal.client.workflow.getHandle(run.id);
  expect(await resend(run.id, 'again', 'r-1')).toEqual({ segment: 1 });
  // The run has continued as new into segment 1: the same resume now reaches a run that never saw it.
  await eventually(async () => ((await handle.query(statusQuery)).segment === 1 ? true : undefined));
  expect(await resend(run.id, 'again', 'r-1')).toEqual({ segment: 1 });
  expect(await runs.service.attach(run.id).result).toEqual({ output: text('turn 1: again'), stopReason: 'completed' });
  expect((await handle.query(statusQuery)).segment).toBe(1);
  // Another resume of segment 0 is still refused.
  await expect(resend(run.id, 'other', 'r-2')).rejects.toMatchObject({
    cause: expect.objectContaining({ type: 'NOT_RESUMABLE' }),
  });
  // The run's progress events tell one resume.
  const resumed: number[] = [];
  for await (const event of run.events!({ follow: false })) if (event.type === 'resumed') resumed.push(event.segment);
  expect(resumed).toEqual([1]);
  const audit = await exportAudit(runs.temporal.client, run.id);
  expect(audit.filter((record) => record.type === 'resume')).toHaveLength(1);
  await runs.service.attach(run.id).dispose();
});

it('a caller that joins once a resume was sent again waits for the segment under way', async () => {
  const run = runs.service.start(resumable.name, {
    prompt: text('first'),
    parent: { id: 'p' },
    agentOptions: {
      script: [{ reply: 'turn {turn}: {input}' }, { waitFor: gates.waitFor, reply: 'turn {turn}: {input}' }],
    },
  });
  await run.result;
  expect(await resend(run.id, 'again', 'r-1')).toEqual({ segment: 1 });
  await eventually(async () =>
    (await runs.temporal.client.workflow.getHandle(run.id).query(statusQuery)).segment === 1 ? true : undefined,
  );
  // One caller follows segment 1 as the resume comes again; another joins it after (one watch).
  const early = runs.service.attach(run.id).result;
  expect(await resend(run.id, 'again', 'r-1')).toEqual({ segment: 1 });
  const late = runs.service.attach(run.id).result;
  gates.open(run.id, 1);
  const second = { output: text('turn 1: again'), stopReason: 'completed' };
  expect(await early).toEqual(second);
  expect(await late).toEqual(second);
  await runs.service.attach(run.id).dispose();
});
