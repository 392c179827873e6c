// One activity per tool of every hosted agent-loop provider, named after the tool, so history
// reads as the child's actions; an inline tool runs inside the model call that asked for it
// instead (`runToolCall`, from activities/model-call.ts). Arguments the model got wrong go back to
// it as a tool error; the tool's output is cut to a size the model (and one payload) can take.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { payloadLimitViolation } from '../src/seam/constants';
import { causeChain, messageOf } from '../src/seam/errors';
import type { ContentBlock } from '../src/seam/content';
import { offeredTools, sessionLogOf, turnInFlightStart } from '../src/seam/delegation';
import type { SubagentSessionEvent } from '../src/seam/request';
import { type SubagentTool, type SubagentToolContext, type ToolCallOutcome, toolError } from '../src/seam/tool';
import type { SubagentAgentProvider } from '../src/seam/provider';
import { allowedToolNames } from './chat-endpoint';
import { type ActivityHost, keyedDelegation, newEntryId, runOf } from './host';
import type { ToolActivityInput, ToolActivityResult } from './types';

export type ToolActivity = (input: ToolActivityInput) => Promise<ToolActivityResult>;

/** The tool activities of every hosted agent-loop provider, by tool name. */
export function toolActivities(host: ActivityHost): Record<string, ToolActivity> {
  const { deps } = host;
  const activities: Record<string, ToolActivity> = {};
  for (const provider of deps.providers.values()) {
    if (provider.driver !== 'agent-loop') continue;
    for (const tool of provider.tools) {
      activities[tool.name] = async (input) => {
        // Two providers may each have a tool of this name: the run's own provider answers.
        const owner = host.hosted(input.provider, 'agent-loop');
        const runId = runOf(input);
        const implementation = asOffered(owner, tool.name, input) ?? tool;
        const outcome = await host.heartbeating(() => {
          const { cancellationSignal: signal, info } = Context.current();
          const parent = {
            runId,
            signal,
            ...input.delegation,
            ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
          };
          // The activity's identity: unique per call across continue-as-new, kept by its retries.
          const callKey = `${info.workflowExecution?.runId ?? runId}/${info.activityId}`;
          return runToolCall(host, implementation, input.arguments, {
            cwd: input.cwd,
            signal,
            runId,
            callId: input.callId,
            callKey,
            ...(deps.delegate
              ? {
                  delegate: keyedDelegation(deps.delegate, parent, callKey),
                  completedTurns: () => completedTurns(runId),
                }
              : {}),
          }).catch((err: unknown) => {
            throw reportable(err);
          });
        });
        return { ...outcome, resultId: cacheToolResult(host, runId, input.callId, outcome) };
      };
    }
  }

  /**
   * The run's completed turns as a session log, from its workflow: the call is in flight, so the
   * conversation ends inside the turn that made it, which is left out.
   */
  async function completedTurns(runId: string): Promise<SubagentSessionEvent[]> {
    const { request, entries } = await deps.fetchRunContext(runId);
    return sessionLogOf(entries.slice(0, turnInFlightStart(entries, request.seed?.entries.length ?? 0)));
  }
  return activities;
}

/**
 * `owner`'s tool `name` as the run offered it to its model: a run's filter may have reworded it
 * (`offeredTools`). Undefined when `owner` has no tool of that name.
 */
function asOffered(
  owner: SubagentAgentProvider,
  name: string,
  { toolFilter, delegation }: ToolActivityInput,
): SubagentTool | undefined {
  const own = owner.tools.find((candidate) => candidate.name === name);
  if (!own || !toolFilter) return own;
  const allowed = allowedToolNames(owner, { toolFilter, ...delegation });
  return offeredTools(owner.tools, allowed).find((candidate) => candidate.name === name) ?? own;
}

/**
 * Runs one call of `tool` with the model's raw `args`: arguments that are not JSON go back to the
 * model as a tool error, and the output is cut to the worker's `maxToolOutputBytes`. Rejects as
 * the tool does (an infrastructure fault, or the run's cancellation).
 */
export async function runToolCall(
  host: ActivityHost,
  tool: SubagentTool,
  args: string,
  context: SubagentToolContext,
): Promise<ToolCallOutcome> {
  let parsed: unknown;
  try {
    parsed = args.trim() === '' ? {} : JSON.parse(args);
  } catch {
    return toolError(`invalid arguments: not JSON (${args.slice(0, 200)})`);
  }
  const outcome = await tool.execute(parsed, context);
  // What the tool returned is checked here, once: an outcome of the wrong shape, or one no payload
  // can hold, failed the activity, which ran the tool again on every retry to the same end.
  let answer: ToolCallOutcome;
  try {
    const malformed = malformedOutcome(outcome);
    if (malformed) return toolError(`tool ${tool.name} returned ${malformed}`);
    answer = truncated(outcome, host.deps.maxToolOutputBytes ?? DEFAULT_MAX_TOOL_OUTPUT_BYTES);
    const violation = payloadLimitViolation(answer, host.deps.maxPayloadBytes, `tool ${tool.name}'s result`);
    if (violation) return toolError(violation);
  } catch (err) {
    return toolError(`tool ${tool.name} returned a result that cannot be sent: ${errorText(err)}`);
  }
  return answer;
}

/**
 * What makes `outcome` something other than a tool's outcome (content blocks, each with a string
 * type, text in a string, `isError` a boolean if set), or undefined if nothing does.
 */
function malformedOutcome(outcome: unknown): string | undefined {
  if (typeof outcome !== 'object' || outcome === null) return `${typeOf(outcome)}, not a result (see toolResult)`;
  const { content, isError, nestedSpend } = outcome as Partial<ToolCallOutcome>;
  if (!Array.isArray(content)) return 'a result whose content is not a list of blocks';
  if (isError !== undefined && typeof isError !== 'boolean') return 'a result whose isError is not a boolean';
  const badSpend = nestedSpend === undefined ? undefined : malformedSpend(nestedSpend);
  if (badSpend) return `a result whose nestedSpend ${badSpend}`;
  for (const [index, block] of (content as unknown[]).entries()) {
    const { type, text } = (typeof block === 'object' && block !== null ? block : {}) as Record<string, unknown>;
    if (typeof type !== 'string') return `a result whose content block ${index} has no type`;
    if ((type === 'text' || type === 'reasoning') && typeof text !== 'string') {
      return `a result whose ${type} block ${index} holds ${typeOf(text)}, not a string`;
    }
  }
  return undefined;
}

/**
 * What makes `nestedSpend` something other than spends by run id, or undefined if nothing does. The
 * workflow adds them into the run's spend, its budget and its integer search attribute: a null, a
 * fraction or a string there failed every workflow task of the run, for ever.
 */
function malformedSpend(nestedSpend: unknown): string | undefined {
  if (typeof nestedSpend !== 'object' || nestedSpend === null || Array.isArray(nestedSpend)) {
    return 'is not an object of spends by run id';
  }
  for (const [runId, spend] of Object.entries(nestedSpend)) {
    const fields = (typeof spend === 'object' && spend !== null ? spend : {}) as Record<string, unknown>;
    const counts = ['turns', 'modelCalls', 'tokens'].every(
      (key) => Number.isSafeInteger(fields[key]) && (fields[key] as number) >= 0,
    );
    const cost = fields.costUsd;
    if (!counts || typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
      return `for run ${JSON.stringify(runId.slice(0, 200))} is not whole turns, modelCalls and tokens and a costUsd, none negative`;
    }
  }
  return undefined;
}

function typeOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value;
}

/**
 * A thrown value's message, whatever it is (an Error whose message cannot be read, a Proxy, a
 * string), its first `MAX_FAILURE_CHARS` characters and how many more there were.
 */
export function errorText(err: unknown): string {
  return cut(messageOf(err));
}

function cut(text: string): string {
  if (text.length <= MAX_FAILURE_CHARS) return text;
  return `${text.slice(0, MAX_FAILURE_CHARS)}… (${text.length - MAX_FAILURE_CHARS} more characters)`;
}

/** The most of a failure's message a tool's result quotes, or a failure cut short reports. */
const MAX_FAILURE_CHARS = 2000;
/** The most of a tool's failure (its cause chain's messages and stacks) reported as thrown. */
const MAX_REPORTED_CHARS = 64 * 1024;

/**
 * A tool's rejection as its activity reports it: as thrown, unless its messages or stacks are
 * long (an error quoting a whole response body), which becomes a failure of the same type and
 * retryability, its messages joined and cut. The worker could not report a failure of megabytes:
 * the attempt ran out its heartbeat timeout instead, and each retry the same, saying only that.
 */
function reportable(err: unknown): unknown {
  const chain = causeChain(err);
  const size =
    chain.length > 0
      ? chain.reduce((sum, e) => sum + lengthOf(() => e.message) + lengthOf(() => e.stack), 0)
      : lengthOf(() => String(err));
  if (size <= MAX_REPORTED_CHARS) return err;
  const failure = err instanceof ApplicationFailure ? err : undefined;
  const messages = chain.length > 0 ? chain.map(messageOf).join(': ') : messageOf(err);
  return ApplicationFailure.create({
    message: cut(messages),
    type: failure?.type ?? nameOf(err),
    nonRetryable: failure?.nonRetryable ?? false,
    ...(failure?.nextRetryDelay ? { nextRetryDelay: failure.nextRetryDelay } : {}),
  });
}

/** A string's length, or past any bound when it cannot be read. */
function lengthOf(read: () => string | undefined): number {
  try {
    return read()?.length ?? 0;
  } catch {
    return Infinity;
  }
}

/** The thrown error's name (`TypeError`), as its failure's type; `Error` for anything else. */
function nameOf(err: unknown): string {
  try {
    return err instanceof Error && typeof err.name === 'string' ? err.name.slice(0, 100) : 'Error';
  } catch {
    return 'Error';
  }
}

/** Keeps a tool's result for the next model call, should it run on this worker; returns the id it is kept under. */
export function cacheToolResult(host: ActivityHost, runId: string, callId: string, outcome: ToolCallOutcome): string {
  const resultId = newEntryId();
  const { content, isError } = outcome;
  host.cache.putToolResult(runId, resultId, { type: 'tool-result', toolCallId: callId, content, isError });
  return resultId;
}

const DEFAULT_MAX_TOOL_OUTPUT_BYTES = 256 * 1024;

/** Cuts each text block so the whole outcome stays within `maxBytes`, saying how much was cut. */
function truncated(outcome: ToolCallOutcome, maxBytes: number): ToolCallOutcome {
  let budget = maxBytes;
  const content = outcome.content.map((block): ContentBlock => {
    if (block.type !== 'text') return block;
    const bytes = Buffer.from(block.text);
    if (bytes.length <= budget) {
      budget -= bytes.length;
      return block;
    }
    const kept = bytes.subarray(0, Math.max(budget, 0)).toString('utf8');
    budget = 0;
    return { type: 'text', text: `${kept}\n[output truncated: ${bytes.length - Buffer.byteLength(kept)} more bytes]` };
  });
  return { ...outcome, isError: outcome.isError === true, content };
}
