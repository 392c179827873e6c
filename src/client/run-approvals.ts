// Answering a tool call a run holds for approval, from the run itself or from any run above it:
// a request id names its run (`<run id>/<request>`), so the root of a tree answers a grandchild's
// request as its events show it. The answer is an update to the run that asked; the same answer
// sent again (a retry after a lost response) is the same update.
import type { Client } from '@temporalio/client';
import { type SubagentRunStatus, approveUpdate, statusQuery } from '../../workflows/definitions';
import { MAX_APPROVAL_REASON_CHARS, MAX_WORKFLOW_ID_BYTES } from '../seam/constants';
import { SubagentError } from '../seam/errors';
import { describeValue } from '../seam/json';
import type { SubagentApprovalDecision } from '../seam/result';
import type { SubagentApprovalAnswer } from '../seam/run';
import { isNotFound, sendAgainIfDropped, toSubagentError } from '../temporal/errors';

/**
 * The longest request id an answer can carry: its update id (`approve-<request id>`) is one of the
 * server's ids, at most 1,000 bytes.
 */
const MAX_REQUEST_ID_BYTES = MAX_WORKFLOW_ID_BYTES - 'approve-'.length;

/** Deepest tree walked up from a request's run to the run answering it. */
const MAX_TREE_DEPTH = 64;

/**
 * Answers request `requestId` of run `runId` or of a run below it. Resolves with the decision the
 * request has: this one, or the one made first (by another caller, or the timeout). A reason is
 * sent well-formed and cut at `MAX_APPROVAL_REASON_CHARS`. Rejects with `INVALID_REQUEST` for a
 * malformed answer, `UNKNOWN_APPROVAL` for a request neither the run nor any run below it made,
 * `UNKNOWN_RUN` when the run is gone.
 */
export async function approveRequest(
  client: Client,
  runId: string,
  requestId: string,
  answer: SubagentApprovalAnswer,
): Promise<SubagentApprovalDecision> {
  if (typeof answer !== 'string' && (typeof answer !== 'object' || answer === null)) {
    throw new SubagentError(
      `approve: the answer must be "allow", "deny" or { decision, reason? } (got ${describeValue(answer)})`,
      'INVALID_REQUEST',
    );
  }
  let decision: unknown;
  let reason: unknown;
  try {
    ({ decision, reason } = typeof answer === 'string' ? { decision: answer, reason: undefined } : answer);
  } catch (err) {
    // A getter or a Proxy trap of the caller's that throws.
    throw new SubagentError('approve: the answer could not be read', 'INVALID_REQUEST', { cause: err });
  }
  if (decision !== 'allow' && decision !== 'deny') {
    // Quoted only when it is text: JSON.stringify threw on a BigInt or a cycle.
    const got = typeof decision === 'string' ? JSON.stringify(decision.slice(0, 200)) : typeof decision;
    throw new SubagentError(`approve: the decision must be "allow" or "deny" (got ${got})`, 'INVALID_REQUEST');
  }
  if (reason !== undefined && typeof reason !== 'string') {
    throw new SubagentError('approve: reason must be a string', 'INVALID_REQUEST');
  }
  const asking = typeof requestId === 'string' ? requestId.slice(0, Math.max(requestId.lastIndexOf('/'), 0)) : '';
  // The server refused a longer one's update as UNAVAILABLE, as if it were away.
  if (!asking || Buffer.byteLength(requestId) > MAX_REQUEST_ID_BYTES) {
    throw new SubagentError(
      `approve: "${String(requestId).slice(0, 200)}" is not an approval request id (<run id>/<request>)`,
      'UNKNOWN_APPROVAL',
    );
  }
  if (asking !== runId && !(await isBelow(client, asking, runId))) {
    throw new SubagentError(
      `approval request ${requestId} is not of run ${runId} or of a run below it`,
      'UNKNOWN_APPROVAL',
    );
  }
  // A long reason failed the run for good (see MAX_APPROVAL_REASON_CHARS); the run refuses one now.
  const sent = reason === undefined ? undefined : reason.slice(0, MAX_APPROVAL_REASON_CHARS).toWellFormed();
  try {
    return await sendAgainIfDropped(() =>
      client.workflow.getHandle(asking).executeUpdate(approveUpdate, {
        args: [{ requestId, decision, ...(sent === undefined ? {} : { reason: sent }) }],
        updateId: `approve-${requestId}`,
      }),
    );
  } catch (err) {
    throw toSubagentError(err, asking);
  }
}

/** Whether run `descendant` was delegated by `ancestor`, or by a run it delegated, and so on. */
async function isBelow(client: Client, descendant: string, ancestor: string): Promise<boolean> {
  let current = descendant;
  for (let hop = 0; hop < MAX_TREE_DEPTH; hop++) {
    let status: SubagentRunStatus;
    try {
      status = await client.workflow.getHandle(current).query(statusQuery);
    } catch (err) {
      if (isNotFound(err)) return false;
      throw toSubagentError(err, current);
    }
    if (status.parentRunId === undefined) return false;
    if (status.parentRunId === ancestor) return true;
    current = status.parentRunId;
  }
  return false;
}
