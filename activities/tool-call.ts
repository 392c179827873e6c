// One activity per tool of every hosted agent-loop provider, named after the tool, so history
// reads as the child's actions; an inline tool runs inside the model call that asked for it
// instead (`runToolCall`, from activities/model-call.ts). Arguments the model got wrong go back to
// it as a tool error; the tool's output is cut to a size the model (and one payload) can take.
import { Context } from '@temporalio/activity';
import type { ContentBlock } from '../src/seam/content';
import { type SubagentTool, type SubagentToolContext, type ToolCallOutcome, toolError } from '../src/seam/tool';
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
        const implementation = owner.tools.find((candidate) => candidate.name === tool.name) ?? tool;
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
            ...(deps.delegate ? { delegate: keyedDelegation(deps.delegate, parent, callKey) } : {}),
          });
        });
        return { ...outcome, resultId: cacheToolResult(host, runId, input.callId, outcome) };
      };
    }
  }
  return activities;
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
  return truncated(outcome, host.deps.maxToolOutputBytes ?? DEFAULT_MAX_TOOL_OUTPUT_BYTES);
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
  return { ...outcome, content };
}
