// Seam §7.9, the mock provider, as this package's `scripted` test double: its reply, its name, a
// structured value when a schema is asked for, a configured stop reason, and a synchronous cancel.
// The seam's mock puts `structured: undefined` on every result; a durable result is JSON, so the
// key is absent instead, as §1.5 allows ("present only when the request carried an outputSchema").
import { createScriptedProvider, DEFAULT_SCRIPTED_REPLY } from '../../src/testing';
import { testRuns, text, uniqueName } from '../helpers/temporal';

const name = uniqueName('mock-named');
const scripted = createScriptedProvider({ name });
const runs = testRuns([scripted]);
const parent = { id: 'parent' };

describe('§7.9 the scripted test double', () => {
  it('§7.9 replies with one text block and completed, with no structured key, under its configured name', async () => {
    const run = runs.service.start(name, { prompt: text('hello'), parent });
    expect(run.id.startsWith(`subagent-${name}:`)).toBe(true);
    const result = await run.result;
    expect(result).toEqual({
      output: text(DEFAULT_SCRIPTED_REPLY.replace('{input}', 'hello')),
      stopReason: 'completed',
    });
    expect('structured' in result).toBe(false);
    await run.dispose();
  });

  it('§7.9 returns a structured value when a schema is requested and the script captures one', async () => {
    const run = runs.service.start(name, {
      prompt: text('judge'),
      parent,
      outputSchema: { type: 'object', properties: { reply: { type: 'string' } }, required: ['reply'] },
      agentOptions: { script: [{ calls: [{ name: 'structured_output', arguments: { reply: 'judged' } }] }] },
    });
    expect(await run.result).toMatchObject({ structured: { reply: 'judged' }, stopReason: 'completed' });
    await run.dispose();
  });

  it('§7.9 returns a configured stop reason: refusal', async () => {
    const run = runs.service.start(name, {
      prompt: text('do it'),
      parent,
      agentOptions: { script: [{ reply: 'no', stopReason: 'refusal' }] },
    });
    expect(await run.result).toEqual({ output: text('no'), stopReason: 'refusal' });
    await run.dispose();
  });

  it('§7.9 a synchronous cancel gives aborted', async () => {
    const run = runs.service.start(name, { prompt: text('x'), parent });
    run.cancel();
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' });
    await run.dispose();
  });
});
