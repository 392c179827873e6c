// Names and limits the caller's side, the workflow and the worker share: where a provider's runs
// live, what a run id looks like, and how large one payload may be.

/** The task queue a provider's runs (workflow and activities) use unless its descriptor names one. */
export function defaultTaskQueue(provider: string): string {
  return `subagents.${provider}`;
}

/**
 * The queue an agent-loop provider's model calls go to when its endpoint has a rate limit
 * (`endpoint.requestsPerMinute`): the server hands its tasks out at that rate to the whole fleet.
 */
export function modelTaskQueue(providerTaskQueue: string): string {
  return `${providerTaskQueue}.model`;
}

/** Prefix of every run id (= workflow id), so runs are easy to find among other workflows. */
export const RUN_ID_PREFIX = 'subagent-';

/**
 * The longest provider name, in UTF-8 bytes. It is in every id of the provider's runs (with at
 * most 78 more bytes) and in its task queue's name, both of which the server caps at 1,000 bytes.
 */
export const MAX_PROVIDER_NAME_BYTES = 900;

/**
 * The longest workflow id, or task queue name, the server takes by default (`limit.maxIDLength`,
 * in bytes). A command naming a longer one fails its workflow task, every time it is retried.
 */
export const MAX_WORKFLOW_ID_BYTES = 1000;

/**
 * A string that can name a workflow (or a task queue) in a run's commands: non-empty, well-formed
 * (core cannot encode a lone surrogate, and shuts the worker down), within the server's limit.
 * Safe inside the workflow sandbox.
 */
export function isWorkflowId(value: unknown): value is string {
  return (
    typeof value === 'string' && value !== '' && value.isWellFormed() && utf8Length(value) <= MAX_WORKFLOW_ID_BYTES
  );
}

/**
 * An id that can name a run: a workflow id with the runs' prefix. What a raw client names with
 * another (a workflow of the user's own) is no run of ours. Safe inside the workflow sandbox.
 */
export function isRunId(value: unknown): value is string {
  return isWorkflowId(value) && value.startsWith(RUN_ID_PREFIX);
}

/** Why `name` cannot name a provider, its runs and its task queue; undefined if it can. */
export function providerNameViolation(name: unknown): string | undefined {
  return nameViolation('provider name', name, MAX_PROVIDER_NAME_BYTES);
}

/**
 * The longest reason an approval answer carries: it reaches the run's history three times in one
 * workflow task (the update, its decision, the memo), and a long one passed the server's 4 MiB
 * message limit, which failed the run for good. A client cuts it; the run refuses a longer one.
 */
export const MAX_APPROVAL_REASON_CHARS = 4096;

/** The longest task queue a provider names, in UTF-8 bytes: the server's 1,000, less `.model`. */
export const MAX_TASK_QUEUE_BYTES = MAX_WORKFLOW_ID_BYTES - '.model'.length;

/**
 * Why `queue` cannot be a provider's task queue; undefined if it can. The server refuses a start
 * on a queue that is not well-formed or over its limit, so every run would fail to start.
 */
export function taskQueueViolation(queue: unknown): string | undefined {
  return nameViolation('task queue', queue, MAX_TASK_QUEUE_BYTES);
}

/** Why `value` cannot be the server's name for something (`what`): empty, not well-formed, too long. */
function nameViolation(what: string, value: unknown, maxBytes: number): string | undefined {
  if (typeof value !== 'string' || value === '') return `a ${what} must be a non-empty string`;
  if (!value.isWellFormed()) return `the ${what} ${JSON.stringify(value)} is not well-formed text`;
  const bytes = utf8Length(value);
  if (bytes > maxBytes) return `the ${what} "${value.slice(0, 40)}…" is ${bytes} bytes, over ${maxBytes}`;
  return undefined;
}

/** The longest a Node timer waits: a longer delay (or NaN, or Infinity) fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Whether `value` is a whole number from `minimum` to `maximum`: a count, a size, a time in ms. */
export function isWholeNumber(value: unknown, minimum: number, maximum = Number.MAX_SAFE_INTEGER): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= minimum && value <= maximum;
}

/** Temporal refuses payloads over 2 MiB; stay under it with room for the envelope. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 2 * 1024 * 1024 - 64 * 1024;

/** The size `value` will have as a Temporal JSON payload, in bytes. Safe inside the workflow sandbox. */
export function payloadBytes(value: unknown): number {
  return utf8Length(JSON.stringify(value) ?? '');
}

/**
 * Undefined when `value` fits in `limit` bytes as a payload; otherwise the refusal, naming `what`.
 * Every payload check (the facade's, the workflow's, the activities') words it this way.
 */
export function payloadLimitViolation(value: unknown, limit: number, what: string): string | undefined {
  const size = payloadBytes(value);
  if (size <= limit) return undefined;
  return `${what} is ${size} bytes, over the ${limit}-byte payload limit (Temporal refuses payloads over 2 MiB)`;
}

/** UTF-8 length of a well-formed string, counted without encoding it. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    // Each unit is counted once above; a surrogate of a pair adds one more (4 bytes a pair).
    if (unit >= 0x800 && (unit < 0xd800 || unit > 0xdfff)) bytes += 2;
    else if (unit >= 0x80) bytes += 1;
  }
  return bytes;
}

/** Whether `value` is an absolute http(s) URL with nothing around it: a model endpoint's base URL. */
export function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string' || value !== value.trim() || !URL.canParse(value)) return false;
  const { protocol } = new URL(value);
  return protocol === 'http:' || protocol === 'https:';
}
