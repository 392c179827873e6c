// `npm start`, the main job, as a process of its own against the test server: one delegation to
// `spawn` end to end (start, a steering message, the result, a resume, dispose) on the local fake
// model; and, with a model endpoint but no model named anywhere, a refusal that says what to set.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startFakeOpenAI, textReply } from '../../src/testing';

const ROOT = join(__dirname, '..', '..');

async function mainJob(
  env: Record<string, string | undefined>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, TEMPORAL_ADDRESS: process.env.TEMPORAL_TEST_ADDRESS, ...env };
  for (const [key, value] of Object.entries(childEnv)) if (value === undefined) delete childEnv[key];
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'src', 'main.ts')],
      {
        cwd: ROOT,
        env: childEnv,
      },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

it('runs one delegation end to end on the fake model: result, resumed result, disposed', async () => {
  const outcome = await mainJob({ OPENAI_BASE_URL: undefined, SUBAGENT_MODEL: undefined });
  expect(outcome.code).toBe(0);
  expect(outcome.stdout).toContain('the model is a local fake server (a test double)');
  expect(outcome.stdout).toMatch(
    /result: completed: The repository has \d+ folders: .*test\/.* \(as asked: "Keep it to one sentence\."\)\./,
  );
  expect(outcome.stdout).toContain('resumed result: completed: The tests are in test/.');
  expect(outcome.stdout).toContain('disposed: the run workflow has closed');
}, 60_000);

it('refuses with INVALID_CONFIG, naming what to set, when the endpoint is set but no model is', async () => {
  const fake = await startFakeOpenAI({ handler: () => textReply('never asked') });
  try {
    const outcome = await mainJob({ OPENAI_BASE_URL: fake.baseURL, SUBAGENT_MODEL: undefined });
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toContain('INVALID_CONFIG');
    expect(outcome.stderr).toContain('has no model to call: set SUBAGENT_MODEL');
    expect(fake.requests).toEqual([]);
  } finally {
    await fake.close();
  }
}, 60_000);
