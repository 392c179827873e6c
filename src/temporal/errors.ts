// What the Temporal client throws, read as the seam's typed errors: which failures mean the
// server is away for a moment, which are one of its limits, and the code each maps to.
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, NamespaceNotFoundError } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { SUBAGENT_ERROR_CODES, SubagentError, SubagentErrorCode, causeChain } from '../seam/errors';

export const GRPC_INVALID_ARGUMENT = 3;
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_NOT_FOUND = 5;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_FAILED_PRECONDITION = 9;
const GRPC_UNAVAILABLE = 14;

const grpcCodes = (err: unknown) => causeChain(err).map((e) => (e as { code?: unknown }).code);

/**
 * gRPC UNAVAILABLE or DEADLINE_EXCEEDED anywhere in the cause chain, or a connection that broke
 * under a call in flight ("transport error"): the server is down or restarting.
 */
export function isUnreachable(err: unknown): boolean {
  return (
    grpcCodes(err).some((code) => code === GRPC_UNAVAILABLE || code === GRPC_DEADLINE_EXCEEDED) ||
    causeChain(err).some((e) => /^transport error/.test(e.message))
  );
}

/** How long a reader or a caller rides out an unreachable server before it gives up, unless told otherwise. */
export const DEFAULT_RECONNECT_WINDOW_MS = 10 * 60_000;

/**
 * `call`, made again with backoff (100 ms, doubling to 5 s) while the server is unreachable (down,
 * restarting), for at most `windowMs` from the first failure; any other failure, one `isFinal`
 * names, and an abort of `signal` reject at once.
 */
export async function ridingOutOutages<T>(
  call: () => Promise<T>,
  {
    windowMs,
    isFinal = () => false,
    signal,
  }: { windowMs: number; isFinal?: (err: unknown) => boolean; signal?: AbortSignal },
): Promise<T> {
  let since: number | undefined;
  for (let backoff = 100; ; backoff = Math.min(backoff * 2, 5000)) {
    try {
      return await call();
    } catch (err) {
      since ??= Date.now();
      if (isFinal(err) || !isUnreachable(err) || Date.now() - since >= windowMs || signal?.aborted) throw err;
      await sleep(backoff, undefined, { signal }).catch(() => {
        throw err;
      });
    }
  }
}

/**
 * The server refused an update because the run's workflow task is failing (its worker cannot
 * process the run right now, a bad deploy or a codec setting, say): it takes updates again once a
 * worker completes the task, so a caller may wait for that. The server gives this refusal no type
 * of its own (FAILED_PRECONDITION, WorkflowNotReady), so its message is what tells it apart.
 */
export function isTaskFailing(err: unknown): boolean {
  return notReadyBecause(err, /Workflow Task in failed state/i);
}

/**
 * The server dropped an update because the workflow task it rode in failed on completion (a new
 * event arrived while the worker ran it, say): the update never reached the run, and the server
 * does not send it again. Sent again with the same update id, it does reach the run. Like a
 * failing task's refusal, it is FAILED_PRECONDITION (WorkflowNotReady), told apart by its message.
 */
export function isUpdateDropped(err: unknown): boolean {
  return notReadyBecause(err, /due to unexpected workflow task failure/i);
}

/** A FAILED_PRECONDITION (the server's WorkflowNotReady) in the cause chain whose message says `reason`. */
function notReadyBecause(err: unknown, reason: RegExp): boolean {
  return causeChain(err).some(
    (e) => (e as { code?: unknown }).code === GRPC_FAILED_PRECONDITION && reason.test(e.message),
  );
}

/**
 * The server's words when it refused a start because its namespace does not know one of the
 * search attributes the start sets ("search attribute X is not defined"; on SQL visibility with
 * aliases, "no mapping defined for search attribute X"), or undefined. Only that: a refusal that
 * merely mentions search attributes, such as the server failing to read their definitions for a
 * moment, is no reason to stop setting them.
 */
export function unknownSearchAttribute(err: unknown): string | undefined {
  return causeChain(err).find(
    (e) =>
      (e as { code?: unknown }).code === GRPC_INVALID_ARGUMENT &&
      /search attribute \S+ is not defined|no mapping defined for search attribute/i.test(e.message),
  )?.message;
}

/**
 * The server refused a payload past its size limit: a query answer past 2 MiB, say, which it
 * refuses with INVALID_ARGUMENT, "Blob data size exceeds limit.".
 */
export function isOverBlobLimit(err: unknown): boolean {
  return causeChain(err).some(
    (e) => (e as { code?: unknown }).code === GRPC_INVALID_ARGUMENT && /blob data size exceeds limit/i.test(e.message),
  );
}

/** How many times `sendAgainIfDropped` sends an update that a failed workflow task drops each time. */
const MAX_SENDS = 3;

/** `send`, an update, sent again (up to three times in all) while a failed workflow task drops it. */
export async function sendAgainIfDropped<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      if (!isUpdateDropped(err) || attempt === MAX_SENDS) throw err;
    }
  }
}

/** NOT_FOUND, from the client or a raw service call: no such workflow (or run). */
export function isNotFound(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || grpcCodes(err).includes(GRPC_NOT_FOUND);
}

/**
 * One of the server's limits (a rate limit, updates in flight per workflow, the signals one
 * Temporal run takes) in the cause chain: a refusal, not an outage. The server answers a signal
 * past `history.maximumSignalsPerExecution` (10,000 by default) with INVALID_ARGUMENT, "exceeded
 * workflow execution limit for signal events", so its message is what tells that one apart.
 */
function limitIn(err: unknown): Error | undefined {
  return causeChain(err).find((e) => {
    const { code } = e as { code?: unknown };
    return (
      code === GRPC_RESOURCE_EXHAUSTED ||
      (code === GRPC_INVALID_ARGUMENT && /exceeded workflow execution limit/i.test(e.message))
    );
  });
}

/** Maps what the Temporal client throws onto the seam's typed errors. */
export function toSubagentError(err: unknown, runId: string): SubagentError {
  // One of ours, however deep the client wrapped it (a codec's refusal, say).
  const ours = causeChain(err).find((e) => e instanceof SubagentError);
  if (ours) return ours as SubagentError;
  if (err instanceof WorkflowNotFoundError) {
    return new SubagentError(`no subagent run with id "${runId}"`, 'UNKNOWN_RUN', { cause: err });
  }
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    const code = err.cause.type as SubagentErrorCode;
    if (code in SUBAGENT_ERROR_CODES) return new SubagentError(err.cause.message, code, { cause: err });
  }
  // A blob the history refers to is gone: no retry will bring it back.
  const missing = causeChain(err).find((e) => e instanceof ApplicationFailure && e.type === 'PAYLOAD_MISSING');
  if (missing) return new SubagentError(missing.message, 'PAYLOAD_MISSING', { cause: err });
  if (isTaskFailing(err)) {
    return new SubagentError(
      `run ${runId} takes no calls while its workflow task is failing (its history's last WorkflowTaskFailed event says why); it takes them again once a worker completes the task`,
      'UNAVAILABLE',
      { cause: err },
    );
  }
  // A namespace the server does not know is a setting to change, not an outage to wait out.
  const namespace = causeChain(err).find((e) => e instanceof NamespaceNotFoundError);
  if (namespace) {
    return new SubagentError(
      `${namespace.message}: the client's namespace must exist on the server (temporal operator namespace create)`,
      'INVALID_CONFIG',
      { cause: err },
    );
  }
  const limit = limitIn(err);
  if (limit) {
    return new SubagentError(
      `Temporal refused a call for run ${runId} at one of its limits: ${limit.message}`,
      'RESOURCE_EXHAUSTED',
      { cause: err },
    );
  }
  const sealed = sealedWithoutCodec(err, runId);
  if (sealed) return sealed;
  const message = err instanceof Error ? err.message : String(err);
  return new SubagentError(`Temporal call for run ${runId} failed: ${message}`, 'UNAVAILABLE', { cause: err });
}

/**
 * The client met a payload the payload codec sealed (`binary/encrypted`) and has no codec to open
 * it: `INVALID_CONFIG` saying so, or undefined for any other error. (Before, the converter's
 * "Unknown encoding" became `UNAVAILABLE`, as if the server were away, and a caller waited on.)
 */
export function sealedWithoutCodec(err: unknown, runId?: string): SubagentError | undefined {
  const sealed = causeChain(err).find((e) => /Unknown encoding: binary\/encrypted/.test(e.message));
  if (!sealed) return undefined;
  return new SubagentError(
    `${runId === undefined ? "the run's" : `run ${runId}'s`} payloads are encrypted, and this client has no ` +
      'codec to decrypt them: give it the keys (SUBAGENT_ENCRYPTION_KEYS, or a data converter with the AesGcmPayloadCodec)',
    'INVALID_CONFIG',
    { cause: err },
  );
}

/**
 * `call`, or a rejection with the signal's reason as soon as it aborts; the call's own later
 * failure is left unheard. For calls that cannot be stopped themselves: a `NativeConnection` (a
 * worker's, one `connectTemporal` shares) ignores `withAbortSignal`, so a history read's long poll
 * went on until the run's next event, days maybe. Left to the server, such a poll ends within its
 * long-poll interval (20 s by default), and nothing reads after it.
 */
export function abortable<T>(call: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    call.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      call.catch(() => undefined);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    call.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
