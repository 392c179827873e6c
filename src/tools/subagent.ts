// The `subagent` tool for an LLM child itself (spawn, fork): the model-facing delegation tool of
// the caller's side, run as a tool activity that delegates through the worker's own service.
import type { SubagentSessionEvent } from '../seam/request';
import { type SubagentTool, toolError } from '../seam/tool';
import {
  SUBAGENT_TOOL_NAME,
  SubagentToolConfig,
  delegate,
  delegationArgs,
  delegationParameters,
  subagentToolWording,
} from '../client/subagent-tool';

/**
 * Each call is an activity named after the tool that delegates with the calling run as parent,
 * so a child can delegate further, limited by the `maxDepth` set above it. A retried call (its
 * worker died) joins the run the first attempt started instead of starting another. With
 * `inheritsParentContext` (the wording for a fork provider), each call reads the run's completed
 * turns from its workflow and hands them down, so the child is seeded with them as the tool says.
 */
export function createDelegationTool(config: SubagentToolConfig & { inheritsParentContext?: boolean }): SubagentTool {
  const wording = subagentToolWording(config.inheritsParentContext ?? false, config.background ?? false);
  return {
    name: config.name ?? SUBAGENT_TOOL_NAME,
    description: wording.description,
    parameters: delegationParameters(wording.prompt) as unknown as Record<string, unknown>,
    async execute(args, context) {
      const parsed = delegationArgs(args);
      if ('error' in parsed) return parsed.error;
      const { delegate: start, completedTurns } = context;
      if (!start) return toolError('this worker offers no delegation: the subagent tool is unavailable here');
      // The wording promised the child this conversation's completed turns: they go with the start.
      let parentEvents: SubagentSessionEvent[] | undefined;
      if (config.inheritsParentContext) {
        if (!completedTurns) {
          return toolError("this worker cannot read the run's completed turns: the subagent tool is unavailable here");
        }
        parentEvents = await completedTurns();
      }
      // A retried call joins the run its first attempt started; another call starts its own.
      const idempotencyKey = `${context.runId}/${context.callKey}`;
      return delegate(
        (request) => start(config.provider, { ...request, idempotencyKey }, parentEvents),
        parsed.prompt,
        config,
        context.signal,
        { reportSpend: true },
      );
    },
  };
}
