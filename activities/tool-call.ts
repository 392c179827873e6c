// One activity per tool of every hosted agent-loop provider, named after the tool, so history
// reads as the child's actions. Arguments the model got wrong go back to it as a tool error; the
// tool's output is cut to a size the model (and one payload) can take.
import { Context } from '@temporalio/activity';
import type { ContentBlock } from '../src/seam/content';
import { type ToolCallOutcome, toolError } from '../src/seam/tool';
import { type ActivityHost, newEntryId, runOf } from './host';
import type { ToolActivityInput, ToolActivityResult } from './types';

export type ToolActivity = (input: ToolActivityInput) => Promise<ToolActivityResult>;

/** The tool activities of every hosted agent-loop provider, by tool name. */
export function toolActivities(host: ActivityHost): Record<string, ToolActivity> {
  const { deps } = host;
  const maxToolOutputBytes = deps.maxToolOutputBytes ?? 256 * 1024;
  const activities: Record<string, ToolActivity> = {};
  for (const provider of deps.providers.values()) {
    if (provider.driver !== 'agent-loop') continue;
    for (const tool of provider.tools) {
      activities[tool.name] = async (input) => {
        // Two providers may each have a tool of this name: the run's own provider answers.
        const owner = host.hosted(input.provider, 'agent-loop');
        const runId = runOf(input);
        const implementation = owner.tools.find((candidate) => candidate.name === tool.name) ?? tool;
        const outcome = await host.heartbeating(async () => {
          let args: unknown;
          try {
            args = input.arguments.trim() === '' ? {} : JSON.parse(input.arguments);
          } catch {
            return toolError(`invalid arguments: not JSON (${input.arguments.slice(0, 200)})`);
          }
          const { cancellationSignal: signal, info } = Context.current();
          const parent = {
            runId,
            signal,
            ...input.delegation,
            ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
          };
          const outcome = await implementation.execute(args, {
            cwd: input.cwd,
            signal,
            runId,
            callId: input.callId,
            // The activity's identity: unique per call across continue-as-new, kept by its retries.
            callKey: `${info.workflowExecution?.runId ?? runId}/${info.activityId}`,
            ...(deps.delegate ? { delegate: (nested, request) => deps.delegate!(nested, request, parent) } : {}),
          });
          return truncated(outcome, maxToolOutputBytes);
        });
        // The next model call takes the result from here when it runs on this worker.
        const resultId = newEntryId();
        const { content, isError } = outcome;
        host.cache.putToolResult(runId, resultId, {
          type: 'tool-result',
          toolCallId: input.callId,
          content,
          isError,
        });
        return { ...outcome, resultId };
      };
    }
  }
  return activities;
}

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
