// The pace at which streamed text is handed to a run (`textPublisher`), on jest's fake clock: soon
// at first, then ever further apart, and never more batches than one attempt's budget, however
// long the text flows.
import { MAX_BATCH_BYTES, type TextBatch, textPublisher } from '../../activities/host';
import { MAX_TIMER_MS } from '../../src/seam/constants';

beforeEach(() => jest.useFakeTimers({ now: 0 }));
afterEach(() => jest.useRealTimers());

/** Text added every millisecond for `forMs`; when each batch was published, and what it held. */
async function streamFor(forMs: number, batches: { firstMs: number; maxMs: number; maxBatches: number }) {
  const published: { at: number; batch: TextBatch }[] = [];
  const publisher = textPublisher(async (batch) => {
    published.push({ at: Date.now(), batch });
  }, batches);
  for (let ms = 0; ms < forMs; ms++) {
    publisher.add('x');
    await jest.advanceTimersByTimeAsync(1);
  }
  await publisher.close();
  return published;
}

it("spreads a turn's batches ever further apart after the first quarter of its budget, and sends none past it", async () => {
  const published = await streamFor(100_000, { firstMs: 1, maxMs: 8, maxBatches: 16 });
  // 1, 2, 4 and 8 ms for the first quarter; then each wait doubles with every sixteenth (one batch).
  const waits = published.map(({ at }, i) => at - (i === 0 ? 0 : published[i - 1]!.at));
  expect(waits).toEqual([1, 2, 4, 8, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]);
  // Text keeps flowing; nothing more is sent, and nothing is lost before the budget is spent.
  expect(published.map(({ batch }) => batch.text).join('')).toBe('x'.repeat(published.at(-1)!.at));
});

it('waits no longer than a Node timer holds: a longer wait would fire after 1 ms, a batch per millisecond', async () => {
  const published: number[] = [];
  const publisher = textPublisher(
    async () => {
      published.push(Date.now());
    },
    { firstMs: 1, maxMs: MAX_TIMER_MS, maxBatches: 4 },
  );
  // One batch at the usual pace, one after the longest wait a timer holds.
  publisher.add('x');
  await jest.advanceTimersByTimeAsync(1);
  publisher.add('x');
  await jest.advanceTimersByTimeAsync(MAX_TIMER_MS);
  expect(published).toEqual([1, 1 + MAX_TIMER_MS]);
  // The next wait would be 16 times that: it is the longest a timer holds again.
  publisher.add('x');
  await jest.advanceTimersByTimeAsync(1000);
  expect(published).toHaveLength(2);
  await jest.advanceTimersByTimeAsync(MAX_TIMER_MS - 1000);
  expect(published).toEqual([1, 1 + MAX_TIMER_MS, 1 + 2 * MAX_TIMER_MS]);
  await publisher.close();
});

it('sends a batch at once when it holds MAX_BATCH_BYTES, however long the wait, and takes no text past maxBytes', async () => {
  const published: { at: number; text: string }[] = [];
  const publisher = textPublisher(
    async ({ text }) => {
      published.push({ at: Date.now(), text });
    },
    { firstMs: 60_000, maxMs: 60_000, maxBatches: 100, maxBytes: 3 * MAX_BATCH_BYTES },
  );
  const piece = 'é'.repeat(MAX_BATCH_BYTES / 8); // a quarter of a full batch in UTF-8
  for (let i = 0; i < 14; i++) publisher.add(piece);
  // Three full batches at once; nothing past the budget is kept: not the last two pieces, nor later text.
  await jest.advanceTimersByTimeAsync(0);
  expect(published).toEqual([0, 1, 2].map(() => ({ at: 0, text: piece.repeat(4) })));
  publisher.add('x');
  await jest.advanceTimersByTimeAsync(10 * 60_000);
  expect(published).toHaveLength(3);
  await publisher.close();
});

it('sends what waits at the close once the waits have grown past maxMs (it was dropped: an earlier prompt’s last words, which the result does not hold), and drops it before', async () => {
  const publish =
    (into: string[]) =>
    async ({ text }: TextBatch) => {
      into.push(text);
    };
  const batches = { firstMs: 10, maxMs: 10, maxBatches: 8 };
  const early: string[] = [];
  const soon = textPublisher(publish(early), batches);
  soon.add('a');
  await jest.advanceTimersByTimeAsync(10);
  soon.add('the result holds this');
  await soon.close();
  expect(early).toEqual(['a']);

  const late: string[] = [];
  const grown = textPublisher(publish(late), batches);
  for (const word of ['a', 'b', 'c']) {
    grown.add(word);
    await jest.advanceTimersByTimeAsync(60_000);
  }
  // Past the first quarter the waits grow (40 ms after the third batch): the close comes first.
  grown.add('prompt 1 ends; ');
  grown.add('prompt 2');
  await grown.close();
  expect(late).toEqual(['a', 'b', 'c', 'prompt 1 ends; prompt 2']);
});

it('cuts a piece larger than a batch, so every batch stays within what a payload takes (1 MiB of control characters went in one batch of 6 MiB as JSON, which the server refuses), never inside a surrogate pair', async () => {
  const published: TextBatch[] = [];
  const publisher = textPublisher(
    async (batch) => {
      published.push(batch);
    },
    { firstMs: 10, maxMs: 10, maxBatches: 1000 },
  );
  const control = '\u0001'.repeat(1024 * 1024);
  const emoji = '\u{1F600}'.repeat(300 * 1024);
  publisher.add(control);
  publisher.addReasoning(emoji);
  publisher.add('end');
  await jest.advanceTimersByTimeAsync(10);
  await publisher.close();
  for (const batch of published) expect(Buffer.byteLength(JSON.stringify(batch))).toBeLessThan(2 * 1024 * 1024);
  expect(published.map((batch) => batch.text).join('')).toBe(`${control}end`);
  expect(published.map((batch) => batch.reasoning ?? '').join('')).toBe(emoji);
  expect(published.every((batch) => !/[\uD800-\uDBFF]$/.test(batch.reasoning ?? ''))).toBe(true);
});

it('hands the first batch it cannot send to onSkipped, once, and goes on sending the batches after it', async () => {
  const published: string[] = [];
  const skipped: unknown[] = [];
  const refused = new Set(['b', 'c']);
  const publisher = textPublisher(
    async ({ text }) => {
      if (refused.has(text)) throw new Error(`refused ${text}`);
      published.push(text);
    },
    { firstMs: 10, maxMs: 10, maxBatches: 1000 },
    (err) => skipped.push(err),
  );
  for (const text of ['a', 'b', 'c', 'd']) {
    publisher.add(text);
    await jest.advanceTimersByTimeAsync(10);
  }
  await publisher.close();
  expect(published).toEqual(['a', 'd']);
  expect(skipped).toEqual([new Error('refused b')]);
});
