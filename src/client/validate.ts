// Validation and resolution of what callers pass in, before anything durable exists. Every
// malformed field is a synchronous `SubagentError('INVALID_REQUEST')` naming the field.
import { MAX_WORKFLOW_ID_BYTES, isWorkflowId, payloadLimitViolation } from '../seam/constants';
import {
  type ContentBlock,
  type JsonObject,
  type ToolCallBlock,
  type ToolResultBlock,
  contentViolation,
} from '../seam/content';
import { SubagentDepthError, SubagentError } from '../seam/errors';
import { describeValue, isPlainObject, jsonCopy, jsonViolation, omitUndefined } from '../seam/json';
import type {
  ResolvedSubagentBudget,
  ResolvedSubagentRequest,
  SubagentParentRef,
  SubagentStartRequest,
  TranscriptEntry,
} from '../seam/request';
import { snapshotOutputSchema } from '../structured/schema';

export interface ResolveOptions {
  /** The provider inherits the parent's context (fork): seed the child from the parent's log. */
  seedFromParent?: boolean;
  /** The tools the provider has, when it declares them: `toolFilter` may name only these. */
  toolNames?: readonly string[];
}

/**
 * Checks a start request and returns its wire form: plain JSON, parent serialised, depth
 * computed, the schema snapshotted, a fork's seed cut from the parent's log. Throws
 * `INVALID_REQUEST`, `UNKNOWN_TOOL`, `SubagentDepthError` or `OutputSchemaError`, in that order.
 */
export function resolveStartRequest(
  request: SubagentStartRequest,
  options: ResolveOptions = {},
): ResolvedSubagentRequest {
  if (!isObjectLike(request)) invalid('the start request must be an object');
  const prompt = contentBlocks(request.prompt, 'request.prompt');
  const parent = parentRef(request.parent);
  if (request.signal !== undefined && !isAbortSignal(request.signal)) invalid('request.signal must be an AbortSignal');
  const agentOptions = optionalJsonObject(request.agentOptions, 'request.agentOptions');
  const maxDepth = request.maxDepth;
  if (maxDepth !== undefined && !isNonNegativeInteger(maxDepth)) {
    invalid(`request.maxDepth must be a non-negative integer (got ${describeValue(maxDepth)})`);
  }
  const toolFilter = request.toolFilter === undefined ? undefined : toolFilterOf(request.toolFilter);
  const budget = request.budget === undefined ? undefined : budgetOf(request.budget);
  const seed = options.seedFromParent ? seedOf(request.parent) : undefined;
  if (toolFilter && options.toolNames) {
    const unknown = [...(toolFilter.allow ?? []), ...(toolFilter.deny ?? [])].filter(
      (name) => !options.toolNames!.includes(name),
    );
    if (unknown.length > 0) {
      throw new SubagentError(
        `request.toolFilter names ${unknown.map((name) => `"${name}"`).join(', ')}, which the provider does not have (its tools: ${options.toolNames.join(', ') || 'none'})`,
        'UNKNOWN_TOOL',
      );
    }
  }

  const depth = parent.depth + 1;
  if (maxDepth !== undefined && depth > maxDepth) throw new SubagentDepthError(depth, maxDepth);
  // Snapshotted: a later change to the caller's object changes neither what the child sees nor validation.
  const outputSchema =
    request.outputSchema === undefined
      ? undefined
      : (snapshotOutputSchema(request.outputSchema) as unknown as JsonObject);

  return omitUndefined({ prompt, parent, seed, depth, agentOptions, outputSchema, maxDepth, toolFilter, budget });
}

const BUDGET_LIMITS = ['maxTurns', 'maxModelCalls', 'maxTokens', 'maxCostUsd'] as const;

/**
 * A budget's wire form: each limit a number of 0 or more (counts whole), the deadline in epoch ms.
 * Throws `INVALID_REQUEST`.
 */
export function budgetOf(value: unknown): ResolvedSubagentBudget {
  if (!isPlainObject(value)) invalid(`request.budget must be an object (got ${describeValue(value)})`);
  const budget = value as Record<string, unknown>;
  const known = new Set<string>([...BUDGET_LIMITS, 'deadline']);
  const unknown = Object.keys(budget).filter((key) => !known.has(key) && budget[key] !== undefined);
  if (unknown.length > 0) {
    invalid(`request.budget has no ${unknown.map((key) => `"${key}"`).join(', ')} (it takes ${[...known].join(', ')})`);
  }
  const resolved: ResolvedSubagentBudget = {};
  for (const limit of BUDGET_LIMITS) {
    const amount = budget[limit];
    if (amount === undefined) continue;
    const whole = limit !== 'maxCostUsd';
    if (
      typeof amount !== 'number' ||
      !Number.isFinite(amount) ||
      amount < 0 ||
      (whole && !Number.isSafeInteger(amount))
    ) {
      invalid(
        `request.budget.${limit} must be a ${whole ? 'whole number' : 'number'} of 0 or more (got ${describeValue(amount)})`,
      );
    }
    resolved[limit] = amount;
  }
  if (budget.deadline !== undefined) {
    const { deadline } = budget;
    const ms =
      deadline instanceof Date ? deadline.getTime() : typeof deadline === 'string' ? Date.parse(deadline) : deadline;
    // Only a time a Date holds (within 8.64e15 ms of 1970): the run names its deadline as one
    // when it passes, and one before that range failed every workflow task of the run.
    if (typeof ms !== 'number' || Number.isNaN(new Date(ms).getTime())) {
      invalid(
        `request.budget.deadline must be a Date, an ISO 8601 time or epoch milliseconds within 8.64e15 of 1970 (got ${describeValue(deadline)})`,
      );
    }
    resolved.deadline = ms;
  }
  return resolved;
}

/** Checks message or resume content: a non-empty array of content blocks, plain JSON. */
export function contentBlocks(value: unknown, path: string): ContentBlock[] {
  const violation = contentViolation(value, path);
  if (violation) invalid(violation);
  return jsonCopy(value as ContentBlock[]);
}

/**
 * `read()`, what the caller passed in read and checked; anything other than our own error that
 * reading it throws (a getter, a Proxy trap) is `INVALID_REQUEST`, with that error as its cause.
 */
export function readCallerInput<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof SubagentError) throw err;
    throw new SubagentError(`${what} could not be read: ${(err as Error)?.message ?? String(err)}`, 'INVALID_REQUEST', {
      cause: err,
    });
  }
}

/** Throws `PAYLOAD_TOO_LARGE` when `value` would not fit in one payload of `limit` bytes. */
export function assertPayloadWithin(value: unknown, limit: number, what: string): void {
  const violation = payloadLimitViolation(value, limit, what);
  if (violation) throw new SubagentError(violation, 'PAYLOAD_TOO_LARGE');
}

/**
 * The parent as the run carries it. The parent is the harness's own agent object, so its fields
 * are read from any object (class instances and getters included), never only from plain ones.
 */
function parentRef(parent: unknown): SubagentParentRef {
  const id = isObjectLike(parent) ? parent.id : undefined;
  if (typeof id !== 'string' || id === '') {
    invalid('request.parent is required: the delegating agent, at least { id: string }');
  }
  const { options, session, runId, rootRunId } = parent as Record<string, unknown>;
  if (options !== undefined && !isObjectLike(options)) invalid('request.parent.options must be an object');
  const depth = options?.subagentDepth ?? 0;
  if (!isNonNegativeInteger(depth)) {
    invalid(`request.parent.options.subagentDepth must be a non-negative integer (got ${describeValue(depth)})`);
  }
  const model = options?.model;
  if (model !== undefined && typeof model !== 'string') invalid('request.parent.options.model must be a string');
  const header = isObjectLike(session) ? session.header : undefined;
  if (session !== undefined && !(isObjectLike(header) && typeof header.id === 'string')) {
    invalid('request.parent.session must be { header: { id: string, cwd?: string } }');
  }
  const cwd = header?.cwd;
  if (cwd !== undefined && typeof cwd !== 'string') invalid('request.parent.session.header.cwd must be a string');
  for (const [field, value] of [
    ['runId', runId],
    ['rootRunId', rootRunId],
  ] as const) {
    if (value !== undefined && !isWorkflowId(value)) {
      invalid(
        `request.parent.${field} must be a run id: well-formed text of 1 to ${MAX_WORKFLOW_ID_BYTES} bytes (got ${describeText(value)})`,
      );
    }
  }
  return omitUndefined({
    agentId: id,
    sessionId: header?.id as string | undefined,
    cwd: cwd as string | undefined,
    depth,
    model: model as string | undefined,
    runId: runId as string | undefined,
    rootRunId: rootRunId as string | undefined,
  });
}

/**
 * The parent's balanced completed-turn prefix: its session events up to and including the last
 * `turn/end` (never the turn in flight), as conversation entries. Undefined when no turn completed.
 */
export function seedOf(parent: SubagentStartRequest['parent']): ResolvedSubagentRequest['seed'] {
  const events: unknown = parent.session?.events;
  if (events === undefined) return undefined;
  if (!Array.isArray(events)) invalid('request.parent.session.events must be an array of session events');
  const lastTurnEnd = events.findLastIndex((event) => isObjectLike(event) && event.type === 'turn/end');
  if (lastTurnEnd < 0) return undefined;
  const prefix = events.slice(0, lastTurnEnd + 1);
  const entries: TranscriptEntry[] = [];
  prefix.forEach((event: unknown, index) => {
    const path = `request.parent.session.events[${index}]`;
    if (!isObjectLike(event) || typeof event.type !== 'string') {
      invalid(`${path} must be a session event with a string "type"`);
    }
    const data = isObjectLike(event.data) ? event.data : {};
    if (event.type === 'user/message') {
      entries.push({ kind: 'user', content: contentBlocks(data.content, `${path}.data.content`) });
    } else if (event.type === 'assistant/message') {
      const content =
        Array.isArray(data.content) && data.content.length === 0
          ? []
          : contentBlocks(data.content, `${path}.data.content`);
      entries.push({ kind: 'assistant', id: `seed-${index}`, content, stopReason: 'completed' });
    } else if (event.type === 'tool/result') {
      if (typeof data.callId !== 'string') invalid(`${path}.data.callId must be a string`);
      const content =
        Array.isArray(data.content) && data.content.length === 0
          ? []
          : contentBlocks(data.content, `${path}.data.content`);
      entries.push({
        kind: 'tool',
        results: [{ type: 'tool-result', toolCallId: data.callId, content, isError: data.isError === true }],
      });
    }
  });
  return { entries: pairedToolResults(entries), events: prefix.length };
}

/** What a seeded call whose result is not in the parent's log is answered with. */
const NO_RESULT_IN_LOG = "[no result: the parent's log holds none for this call (its turn ended before one came)]";

/**
 * The seed's entries as a chat-completions endpoint takes them, which refuses a request (400)
 * where a tool result answers no call of the assistant message just before it, or a call goes
 * unanswered: after each assistant message one tool entry, in call order, its calls' results
 * from the log, an error result for a call the log has none for; a result that answers no such
 * call (a stray, a second one) is left out. A balanced log comes out as it went in.
 */
function pairedToolResults(entries: readonly TranscriptEntry[]): TranscriptEntry[] {
  const paired: TranscriptEntry[] = [];
  let calls: ToolCallBlock[] = [];
  const results = new Map<string, ToolResultBlock>();
  const answerCalls = () => {
    if (calls.length > 0) {
      paired.push({
        kind: 'tool',
        results: calls.map(
          (call) =>
            results.get(call.id) ?? {
              type: 'tool-result',
              toolCallId: call.id,
              content: [{ type: 'text', text: NO_RESULT_IN_LOG }],
              isError: true,
            },
        ),
      });
    }
    calls = [];
    results.clear();
  };
  for (const entry of entries) {
    if (entry.kind === 'tool') {
      for (const result of entry.results) {
        if (calls.some((call) => call.id === result.toolCallId) && !results.has(result.toolCallId)) {
          results.set(result.toolCallId, result);
        }
      }
      continue;
    }
    answerCalls();
    paired.push(entry);
    if (entry.kind === 'assistant') {
      calls = entry.content.filter((block): block is ToolCallBlock => block.type === 'tool-call');
    }
  }
  answerCalls();
  return paired;
}

function toolFilterOf(filter: unknown): ResolvedSubagentRequest['toolFilter'] {
  if (!isPlainObject(filter)) invalid('request.toolFilter must be { allow?: string[], deny?: string[] }');
  for (const key of Object.keys(filter)) {
    if (key !== 'allow' && key !== 'deny') invalid(`request.toolFilter.${key} is not a filter field (allow, deny)`);
    const names = filter[key];
    if (names !== undefined && !(Array.isArray(names) && names.every((name) => typeof name === 'string'))) {
      invalid(`request.toolFilter.${key} must be an array of tool names (strings)`);
    }
  }
  return jsonCopy(filter) as ResolvedSubagentRequest['toolFilter'];
}

function optionalJsonObject(value: unknown, path: string): JsonObject | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) invalid(`${path} must be a plain object`);
  const notJson = jsonViolation(value, path);
  if (notJson) invalid(notJson);
  return jsonCopy(value as JsonObject);
}

/** A value for an error message, a long string cut short. */
function describeText(value: unknown): string {
  if (typeof value !== 'string') return describeValue(value);
  return value.length > 40
    ? `${JSON.stringify(value.slice(0, 40))}… (${value.length} characters)`
    : JSON.stringify(value);
}

function isNonNegativeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return isObjectLike(value) && typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function';
}

function isObjectLike(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null;
}

function invalid(message: string): never {
  throw new SubagentError(message, 'INVALID_REQUEST');
}
