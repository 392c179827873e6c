// What a run's input can be for its code to run at all. Our client sends nothing else (it resolves
// and checks every field before the start); a raw Temporal client may, and the run then fails at
// its start (`subagentRunWorkflow`) rather than at each of its workflow tasks.
import { MAX_WORKFLOW_ID_BYTES, isWholeNumber, isWorkflowId } from '../src/seam/constants';
import { contentViolation } from '../src/seam/content';
import { describeValue, isPlainObject } from '../src/seam/json';
import type { SubagentRunInput } from './definitions';

/** The server counts attempts in 32 bits: 2 ** 31 read as negative, and it refused every workflow task. */
const MAX_ATTEMPTS = 2 ** 31 - 1;

/**
 * What of a run's input its code cannot run with, if anything: a part that is not an object, a
 * prompt that is not content, a setting that is not a number of the kind it is, carried state
 * whose lists are not lists. Before, each failed every workflow task of the run (a TypeError, or a
 * timer of NaN ms at its park), or its turn on every attempt, or parked it beyond a dispose. What
 * runs of earlier builds lack may be absent (`maxStepsPerTurn`, `structuredNudgeRetries`,
 * `maxPayloadBytes`, `approvalTimeoutMs`; a carried state's `children` and `messageIds`).
 */
export function malformedIn(input: unknown): string | undefined {
  if (!isPlainObject(input)) return 'its input must be an object';
  const { request, settings } = input;
  if (!isPlainObject(request)) return 'request must be an object';
  if (!isPlainObject(request.parent)) return 'request.parent must be an object';
  const prompt = contentViolation(request.prompt, 'request.prompt');
  if (prompt !== undefined) return prompt;
  const { seed } = request;
  if (seed !== undefined && !(isPlainObject(seed) && Array.isArray(seed.entries))) {
    return 'request.seed must be { entries: [...] }';
  }
  if (!isPlainObject(settings)) return 'settings must be an object';
  if (!isPlainObject(settings.turnRetry)) return 'settings.turnRetry must be an object';
  const { carried } = input;
  if (carried !== undefined && !isPlainObject(carried)) return 'carried must be an object';
  return fieldsViolation('settings', settings, SETTINGS) ?? (carried && fieldsViolation('carried', carried, CARRIED));
}

/** The first field of `object` (at `path`) that does not fit what `fields` says it must be. */
function fieldsViolation(
  name: string,
  object: Record<string, any>,
  fields: readonly [string, Fits][],
): string | undefined {
  for (const [path, fits] of fields) {
    const value: unknown = path.split('.').reduce((part, key) => part[key], object);
    if (!fits(value)) return `${name}.${path} cannot be ${describeValue(value).slice(0, 200)}`;
  }
  return undefined;
}

type Fits = (value: unknown) => boolean;
/** A finite number of at least `minimum` (a time in ms need not be whole: '1.5 ms' is one). */
const atLeast =
  (minimum: number): Fits =>
  (value) =>
    typeof value === 'number' && Number.isFinite(value) && value >= minimum;
const whole =
  (minimum: number, maximum?: number): Fits =>
  (value) =>
    isWholeNumber(value, minimum, maximum);
const optional =
  (fits: Fits): Fits =>
  (value) =>
    value === undefined || fits(value);
const list: Fits = (value) => Array.isArray(value);
const listOfText: Fits = (value) => Array.isArray(value) && value.every((item) => typeof item === 'string');

/** Each setting the run reads, and what it must be (`ResolvedRunSettings`, as `resolveRunSettings` makes it). */
const SETTINGS: readonly [string, Fits][] = [
  ['resumeWindowMs', atLeast(0)],
  ['turnStartToCloseMs', atLeast(1)],
  ['turnHeartbeatMs', atLeast(1)],
  ['structuredNudgeRetries', optional(whole(0))],
  ['maxStepsPerTurn', optional(whole(1))],
  ['maxPayloadBytes', optional(whole(1))],
  ['approvalTimeoutMs', optional(atLeast(1))],
  ['turnRetry.initialIntervalMs', atLeast(1)],
  ['turnRetry.maximumIntervalMs', atLeast(1)],
  ['turnRetry.backoffCoefficient', atLeast(1)],
  ['turnRetry.maximumAttempts', whole(1, MAX_ATTEMPTS)],
  ['turnRetry.nonRetryableErrorTypes', listOfText],
];

/** What a continued run reads of the state its run before carried (`SubagentRunCarry`) before anything else. */
const CARRIED: readonly [string, Fits][] = [
  ['segment', whole(0)],
  ['turn', whole(0)],
  ['transcript', list],
  ['pending', list],
  // Lists of anything: a raw client's `sendMessage` may carry an id of any type, which the run
  // remembers, and a run from before `foreign-children-ignored` took a child of any type.
  ['children', optional(list)],
  ['messageIds', optional(list)],
];

/**
 * Which id of a run's input its commands could not carry, if any: the parent it signals, and the
 * task queue its model calls go to. Our client refuses such input; a raw client may send it.
 */
export function unnameableIn({ request, modelTaskQueue }: SubagentRunInput): string | undefined {
  const parentRunId = request.parent.runId;
  if (parentRunId !== undefined && !isWorkflowId(parentRunId)) {
    return `request.parent.runId must be well-formed text of 1 to ${MAX_WORKFLOW_ID_BYTES} bytes`;
  }
  if (modelTaskQueue !== undefined && !isWorkflowId(modelTaskQueue)) {
    return `modelTaskQueue must be well-formed text of 1 to ${MAX_WORKFLOW_ID_BYTES} bytes`;
  }
  return undefined;
}
