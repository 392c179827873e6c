// The conversation a model call sends under a character budget: the oldest tool outputs give way,
// the newest and every user and assistant message go whole.
import { withinContext } from '../../activities/chat-endpoint';
import type { TranscriptEntry } from '../../src/seam/request';

const text = (value: string) => [{ type: 'text' as const, text: value }];
const tool = (id: string, output: string): TranscriptEntry => ({
  kind: 'tool',
  results: [{ type: 'tool-result', toolCallId: id, content: text(output) }],
});
const conversation: TranscriptEntry[] = [
  { kind: 'user', content: text('task') },
  {
    kind: 'assistant',
    id: 'a1',
    content: [{ type: 'tool-call', id: 'c1', name: 'read', arguments: '{}' }],
    stopReason: 'completed',
  },
  tool('c1', 'x'.repeat(100)),
  {
    kind: 'assistant',
    id: 'a2',
    content: [{ type: 'tool-call', id: 'c2', name: 'read', arguments: '{}' }],
    stopReason: 'completed',
  },
  tool('c2', 'y'.repeat(100)),
];
const outputs = (entries: TranscriptEntry[]) =>
  entries.flatMap((entry) =>
    entry.kind === 'tool' ? entry.results.map((r) => (r.content[0] as { text: string }).text) : [],
  );

it('sends the whole conversation without a budget, or when it fits', () => {
  expect(withinContext(conversation, undefined)).toEqual(conversation);
  expect(withinContext(conversation, 1000)).toEqual(conversation);
});

it('leaves out the oldest tool outputs past the budget, with a note, and keeps the newest whole', () => {
  const fitted = withinContext(conversation, 150);
  expect(outputs(fitted)).toEqual([
    "[output left out: 100 characters, over the conversation's budget of 150]",
    'y'.repeat(100),
  ]);
  // User and assistant messages, and the conversation itself, are untouched.
  expect(fitted.filter((entry) => entry.kind !== 'tool')).toEqual(
    conversation.filter((entry) => entry.kind !== 'tool'),
  );
  expect(outputs(conversation)).toEqual(['x'.repeat(100), 'y'.repeat(100)]);
});
