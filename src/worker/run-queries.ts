// How a worker reads a run's conversation and its waiting messages from the run's workflow: with
// the `runContext` and `pendingMessages` queries, a page at a time. The server refuses a query
// answer past 2 MiB ("Blob data size exceeds limit."), so a conversation or a queue of
// messages larger than that could not be read in one answer, however often it was asked.
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { RunContextSnapshot } from '../../activities/types';
import { pendingMessagesPageQuery, runContextPageQuery } from '../../workflows/definitions';
import type { ContentBlock } from '../seam/content';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../seam/request';
import { isOverBlobLimit } from '../temporal/errors';

/**
 * A page's JSON at most: half the server's limit on one answer. An entry larger than a page (one
 * of up to a payload, 2 MiB less 64 KiB) is answered alone, within the limit still.
 */
export const QUERY_PAGE_BYTES = 1024 * 1024;

/** Pages answered by another Temporal run of the workflow (a reset, a continue-as-new) make a read start over, at most this often. */
const MAX_READS = 5;

/**
 * The run's request and its whole conversation, read a page at a time. A workflow worker from
 * before pages answers the whole in one page, as it did. Rejects as the query does, and with a
 * final `PAYLOAD_TOO_LARGE` for an entry the server will not answer even alone; retryably with
 * `CONVERSATION_MISMATCH` when the run changed under every read.
 */
export async function queryRunContext(
  handle: WorkflowHandle,
  pageBytes = QUERY_PAGE_BYTES,
): Promise<RunContextSnapshot> {
  for (let read = 1; ; read++) {
    let request: ResolvedSubagentRequest | undefined;
    const entries: TranscriptEntry[] = [];
    let answeredBy: string | undefined;
    for (;;) {
      const from = entries.length;
      const page = await answerOf(
        handle.query(runContextPageQuery, { from, maxBytes: pageBytes, request: request === undefined }),
        `run ${handle.workflowId}'s conversation entry ${from}`,
      );
      if (!('total' in page)) return page;
      if (!goesOn(page, answeredBy, from, page.entries.length + (page.request ? 1 : 0))) break;
      answeredBy = page.runId;
      request ??= page.request;
      entries.push(...page.entries);
      if (request !== undefined && entries.length >= page.total) return { request, entries };
    }
    if (read === MAX_READS) throw changedUnderRead(handle.workflowId, 'conversation');
  }
}

/**
 * The messages waiting for the run's child from position `from` on, read a page at a time. A
 * workflow worker from before pages answers all of them, of which those before `from` are left
 * out. Rejects as `queryRunContext` does.
 */
export async function queryPendingMessages(
  handle: WorkflowHandle,
  from: number,
  pageBytes = QUERY_PAGE_BYTES,
): Promise<ContentBlock[][]> {
  for (let read = 1; ; read++) {
    const messages: ContentBlock[][] = [];
    let answeredBy: string | undefined;
    for (;;) {
      const at = from + messages.length;
      const page = await answerOf(
        handle.query(pendingMessagesPageQuery, { from: at, maxBytes: pageBytes }),
        `run ${handle.workflowId}'s waiting message ${at}`,
      );
      if (Array.isArray(page)) return page.slice(from);
      if (!goesOn(page, answeredBy, at, page.messages.length)) break;
      answeredBy = page.runId;
      messages.push(...page.messages);
      if (from + messages.length >= page.total) return messages;
    }
    if (read === MAX_READS) throw changedUnderRead(handle.workflowId, 'waiting messages');
  }
}

/**
 * Whether `page` goes on the read so far: the Temporal run that answered the pages before it
 * answered it too, its list is no shorter than what was read, and it holds something (or the
 * read is at the end). Otherwise the read starts over: a reset, or a continue-as-new, came between.
 */
function goesOn(page: { runId: string; total: number }, answeredBy: string | undefined, from: number, items: number) {
  if (answeredBy !== undefined && page.runId !== answeredBy) return false;
  return from <= page.total && (items > 0 || from === page.total);
}

/** The query's answer; an answer the server refuses as too large is final, since asking again cannot shrink it. */
async function answerOf<T>(answer: Promise<T>, what: string): Promise<T> {
  try {
    return await answer;
  } catch (err) {
    if (!isOverBlobLimit(err)) throw err;
    throw ApplicationFailure.create({
      message: `${what} is too large for the server to answer a query with (its limit on one answer, 2 MiB)`,
      type: 'PAYLOAD_TOO_LARGE',
      nonRetryable: true,
      cause: err as Error,
    });
  }
}

function changedUnderRead(runId: string, what: string): ApplicationFailure {
  return ApplicationFailure.retryable(
    `run ${runId}'s ${what} changed under each of ${MAX_READS} reads (another Temporal run answered part way)`,
    'CONVERSATION_MISMATCH',
  );
}
