// What a run hands a fork it delegates to from a tool call: its completed turns, found in its
// conversation (where the agent-loop turn in flight begins), as a session log the fork is seeded from.
import { seedOf } from '../../src/client/validate';
import { sessionLogOf, turnInFlightStart } from '../../src/seam/delegation';
import type { TranscriptEntry } from '../../src/seam/request';

const text = (value: string) => [{ type: 'text' as const, text: value }];
const user = (value: string): TranscriptEntry => ({ kind: 'user', content: text(value) });
const answer = (value: string, stopReason: 'completed' | 'max-tokens' = 'completed'): TranscriptEntry => ({
  kind: 'assistant',
  id: `a-${value}`,
  content: text(value),
  stopReason,
});
const calls = (id: string, name = 'read_file'): TranscriptEntry => ({
  kind: 'assistant',
  id: `a-${id}`,
  content: [{ type: 'tool-call', id, name, arguments: '{}' }],
  stopReason: 'completed',
});
const results = (id: string, isError = false): TranscriptEntry => ({
  kind: 'tool',
  results: [{ type: 'tool-result', toolCallId: id, content: text(`result ${id}`), isError }],
});

describe('turnInFlightStart', () => {
  it.each<[string, TranscriptEntry[], number, number]>([
    [
      'a first turn: nothing of the run completed, its seed whole',
      [user('s'), answer('s'), user('task'), calls('c')],
      2,
      2,
    ],
    ['a first step of a later turn: the turns before it', [user('one'), answer('one'), user('two'), calls('c')], 0, 2],
    [
      'a later step: the steps and the messages that came within the turn stay in it',
      [user('one'), answer('one'), user('two'), calls('c1'), results('c1'), user('steer'), calls('c2')],
      0,
      2,
    ],
    [
      'a turn that ended on another stop reason',
      [user('one'), answer('cut', 'max-tokens'), user('two'), calls('c')],
      0,
      2,
    ],
    [
      'a turn that ended on a structured_output capture',
      [user('one'), calls('s1', 'structured_output'), results('s1'), user('two'), calls('c')],
      0,
      3,
    ],
    [
      'not a capture refused as invalid: the turn went on',
      [user('one'), calls('s1', 'structured_output'), results('s1', true), calls('c')],
      0,
      0,
    ],
    [
      'a turn that ended right after its tools ran counts with the next',
      [user('one'), answer('one'), user('two'), calls('c1'), results('c1'), user('resumed'), calls('c2')],
      0,
      2,
    ],
  ])('%s', (_, entries, seedLength, start) => {
    expect(turnInFlightStart(entries, seedLength)).toBe(start);
  });
});

describe('sessionLogOf', () => {
  it('is nothing for no entries, and otherwise the entries closed by a turn/end, which seed a fork as they were', () => {
    expect(sessionLogOf([])).toEqual([]);
    const entries = [user('one'), calls('c1'), results('c1', true), answer('one')];
    const events = sessionLogOf(entries);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end' });
    const seed = seedOf({ id: 'run', session: { header: { id: 'run' }, events } });
    // The seed names its assistant messages by position.
    const unnamed = (list: TranscriptEntry[]) =>
      list.map((entry) => (entry.kind === 'assistant' ? { ...entry, id: '' } : entry));
    expect(unnamed(seed!.entries)).toEqual(unnamed(entries));
  });
});
