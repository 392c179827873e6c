// The worker's cache of user messages its workflows told it of (a sink): keyed by the workflow run
// and the message's place in the conversation, taken once, and bounded in size; of the tool
// results it produced for a run's next model call, bounded in number and in size; and of runs'
// conversations, bounded in number and in size.
import { RunContextCache } from '../../activities';
import type { ToolResultBlock } from '../../src/seam/content';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../../src/seam/request';

const user = (text: string): TranscriptEntry => ({ kind: 'user', content: [{ type: 'text', text }] });

describe('the cache of user messages', () => {
  it('gives each message back at its place in the conversation of its workflow run, once', () => {
    const cache = new RunContextCache();
    cache.putUserEntries('run-a', 4, [user('steer'), user('more')]);
    expect(cache.takeUserEntry('run-a', 5)).toEqual(user('more'));
    expect(cache.takeUserEntry('run-a', 4)).toEqual(user('steer'));
    expect(cache.takeUserEntry('run-a', 4)).toBeUndefined();
  });

  it('keeps another run of the same workflow (a reset, a continue-as-new) apart', () => {
    const cache = new RunContextCache();
    cache.putUserEntries('run-a', 2, [user('before the reset')]);
    expect(cache.takeUserEntry('run-b', 2)).toBeUndefined();
  });

  it('forgets the oldest messages past its size, and keeps none too large for it', () => {
    const cache = new RunContextCache();
    const big = 'x'.repeat(6 * 1024 * 1024);
    cache.putUserEntries('run-a', 0, [user(big), user(big)]);
    cache.putUserEntries('run-b', 0, [user(big)]);
    expect(cache.takeUserEntry('run-a', 0)).toBeUndefined();
    expect(cache.takeUserEntry('run-a', 1)).toEqual(user(big));
    expect(cache.takeUserEntry('run-b', 0)).toEqual(user(big));
    cache.putUserEntries('run-c', 0, [user('y'.repeat(17 * 1024 * 1024))]);
    expect(cache.takeUserEntry('run-c', 0)).toBeUndefined();
  });
});

describe('the cache of tool results', () => {
  const result = (text: string): ToolResultBlock => ({
    type: 'tool-result',
    toolCallId: 'call',
    content: [{ type: 'text', text }],
    isError: false,
  });

  it('forgets the oldest results past 64 Mi characters in all, not only past 1,024 of them (a worker kept 1,024 of up to a payload each)', () => {
    const cache = new RunContextCache();
    // 300 results of 256 KiB (a tool's whole output): 75 Mi characters, each never taken here.
    const output = 'x'.repeat(256 * 1024);
    for (let index = 0; index < 300; index++) cache.putToolResult('run-a', `r${index}`, result(output));
    expect(cache.toolResultsFor('run-a', ['r0'])).toBeUndefined();
    expect(cache.toolResultsFor('run-a', ['r299'])).toEqual([result(output)]);
    cache.dropToolResults('run-a', ['r299']);
    expect(cache.toolResultsFor('run-a', ['r299'])).toBeUndefined();
  });
});

describe('the cache of conversations', () => {
  const request = {} as ResolvedSubagentRequest;
  const ref = (entries: number) => ({ length: entries, lastAssistantId: undefined });

  it('forgets the least recently used conversations past 256 Mi characters in all, not only past 256 runs, and keeps none too large for it (a worker kept 256 of many megabytes each)', () => {
    const cache = new RunContextCache();
    // One string, shared: what the cache counts is each entry's JSON, not memory this test holds.
    const big = 'x'.repeat(100 * 1024 * 1024);
    for (const runId of ['run-a', 'run-b']) cache.put(runId, { request, entries: [user(big)] });
    expect(cache.lookup('run-a', ref(1))).toBeDefined(); // run-b is now the least recently used
    cache.put('run-c', { request, entries: [user(big)] });
    expect(cache.lookup('run-b', ref(1))).toBeUndefined();
    expect(cache.lookup('run-a', ref(1))).toBeDefined();
    expect(cache.lookup('run-c', ref(1))).toBeDefined();
    cache.put('run-d', { request, entries: [user(big), user(big), user(big)] });
    expect(cache.lookup('run-d', ref(3))).toBeUndefined();
    expect(cache.size).toBe(2);
  });
});
