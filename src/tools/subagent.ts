// The `subagent` tool for an LLM child itself (spawn, fork): the model-facing delegation tool of
// the caller's side, run as a tool activity that delegates through the worker's own service.
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
 * worker died) joins the run the first attempt started instead of starting another.
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
      const { delegate: start } = context;
      if (!start) return toolError('this worker offers no delegation: the subagent tool is unavailable here');
      // A retried call joins the run its first attempt started; another call starts its own.
      const idempotencyKey = `${context.runId}/${context.callKey}`;
      return delegate(
        (request) => start(config.provider, { ...request, idempotencyKey }),
        parsed.prompt,
        config,
        context.signal,
        { reportSpend: true },
      );
    },
  };
}
