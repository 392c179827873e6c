// The `subagent` tool for an LLM child itself (spawn, fork): the model-facing delegation tool of
// the caller's side, run as a tool activity that delegates through the worker's own service.
import { SubagentError } from '../seam/errors';
import type { SubagentProviderDescriptor } from '../seam/provider';
import type { SubagentSessionEvent } from '../seam/request';
import { type SubagentTool, toolError } from '../seam/tool';
import {
  SUBAGENT_RESULT_TOOL_NAME,
  SUBAGENT_TOOL_NAME,
  SubagentToolConfig,
  delegate,
  delegationArgs,
  delegationParameters,
  isSubagentResultTool,
  subagentToolWording,
} from '../client/subagent-tool';
// Where a delegation tool keeps its config, so the worker hosting it can bind it to its provider.
import { DELEGATION_CONFIG, WITHOUT_COLLECTOR } from '../seam/delegation';

/** What `createDelegationTool` takes: the caller-side tool's config, and the provider's context contract. */
export interface SubagentDelegationToolConfig extends SubagentToolConfig {
  /**
   * Whether the provider hands the child this conversation's completed turns (fork). Omitted: as
   * the provider's descriptor says, once a worker that knows the provider hosts the tool (until
   * then, and where the worker does not know it, false). `true` for a provider the worker knows
   * not to inherit is `INVALID_CONFIG`; `false` hands nothing down, to a fork too, and says so.
   */
  inheritsParentContext?: boolean;
}

type DelegationTool = SubagentTool & { readonly [DELEGATION_CONFIG]: SubagentDelegationToolConfig };

/**
 * Each call is an activity named after the tool that delegates with the calling run as parent,
 * so a child can delegate further, limited by the `maxDepth` set above it. A retried call (its
 * worker died) joins the run the first attempt started instead of starting another. With
 * `inheritsParentContext` (the wording for a fork provider), each call reads the run's completed
 * turns from its workflow and hands them down, so the child is seeded with them as the tool says.
 */
export function createDelegationTool(config: SubagentDelegationToolConfig): SubagentTool {
  return delegationTool({ ...config }, config.inheritsParentContext ?? false, true);
}

/**
 * The tool for `config`: `inherits`, whether it says the child sees this conversation and hands
 * the run's completed turns down; `collectable`, the name of the tool a background call's answer
 * is collected with (true: `subagent_result`), or false when the model has none.
 */
function delegationTool(
  config: SubagentDelegationToolConfig,
  inherits: boolean,
  collectable: boolean | string,
): DelegationTool {
  const wording = subagentToolWording(inherits, config.background ?? false, collectable);
  return {
    name: config.name ?? SUBAGENT_TOOL_NAME,
    description: wording.description,
    parameters: delegationParameters(wording.prompt) as unknown as Record<string, unknown>,
    [DELEGATION_CONFIG]: config,
    async execute(args, context) {
      const parsed = delegationArgs(args);
      if ('error' in parsed) return parsed.error;
      const { delegate: start, completedTurns } = context;
      if (!start) return toolError('this worker offers no delegation: the subagent tool is unavailable here');
      // The wording promised the child this conversation's completed turns: they go with the start.
      let parentEvents: SubagentSessionEvent[] | undefined;
      if (inherits) {
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
        { reportSpend: true, collectable },
      );
    },
  };
}

/**
 * `tools` of the hosted provider `owner`, each delegation tool among them bound to what the worker
 * knows: made without `inheritsParentContext`, it takes that of the provider it delegates to, as
 * `lookup` knows it (its wording, and whether it hands the completed turns down); in the background,
 * it names the result tool beside it (one `createSubagentResultTool` made, by its mark, whatever its
 * name), and without one says the answer does not come back (a tool merely named `subagent_result`
 * collects nothing); with one, it carries its wording without it, for a run whose `toolFilter`
 * leaves the result tool out (`offeredTools`). The rest of a copy made of it (`{ ...tool,
 * needsApproval }`) is kept. The same array when nothing changes. Throws `INVALID_CONFIG` naming
 * the tool and both providers for a tool made with `true` for a provider that does not inherit:
 * its model would be told the child sees a conversation it never gets; and, when `every` lists
 * every provider there will ever be (the worker's own service), for a provider not among them,
 * listing them: every call would fail `NO_PROVIDER`.
 */
export function bindDelegationTools(
  owner: string,
  tools: readonly SubagentTool[],
  lookup: (name: string) => SubagentProviderDescriptor | undefined,
  every?: readonly string[],
): readonly SubagentTool[] {
  // Only the project's own result tool collects a background run's answer, under whatever name it has.
  const collector = tools.find(isSubagentResultTool)?.name;
  let changed = false;
  const bound = tools.map((tool) => {
    const config = (tool as Partial<DelegationTool>)[DELEGATION_CONFIG];
    if (!config) return tool;
    const target = lookup(config.provider);
    if (!target && every) {
      throw new SubagentError(
        `provider "${owner}" has a delegation tool "${tool.name}" for provider "${config.provider}", which the worker's own service does not know, so every call would fail (it knows: ${every.map((name) => `"${name}"`).join(', ')}); host that provider in this worker, or pass a service that knows it as subagents`,
        'INVALID_CONFIG',
      );
    }
    if (config.inheritsParentContext === true && target && !target.inheritsParentContext) {
      throw new SubagentError(
        `provider "${owner}" has a delegation tool "${tool.name}" made with inheritsParentContext: true, but provider "${config.provider}" does not inherit its parent's context: the model would be told its child sees this conversation, which it never does (omit the flag: the tool then follows the provider)`,
        'INVALID_CONFIG',
      );
    }
    const inherits = config.inheritsParentContext ?? target?.inheritsParentContext ?? false;
    // Made as if `subagent_result` collected its answer (or it waits for the answer itself).
    const collectable = config.background ? (collector ?? false) : true;
    const asMade = !config.background || collector === SUBAGENT_RESULT_TOOL_NAME;
    const inheritsAsMade = inherits === (config.inheritsParentContext ?? false);
    const boundTool = inheritsAsMade && asMade ? tool : worded(tool, config, inherits, collectable);
    // A run whose filter leaves the result tool out is offered this wording instead (`offeredTools`).
    const uncollected =
      config.background && collector ? { collector, tool: worded(tool, config, inherits, false) } : undefined;
    if (boundTool === tool && !uncollected) return tool;
    changed = true;
    return uncollected ? { ...boundTool, [WITHOUT_COLLECTOR]: uncollected } : boundTool;
  });
  return changed ? bound : tools;
}

/** `tool` with the wording and calls of a delegation tool made with `inherits` and `collectable`; the rest kept. */
function worded(
  tool: SubagentTool,
  config: SubagentDelegationToolConfig,
  inherits: boolean,
  collectable: boolean | string,
): SubagentTool {
  const { description, parameters, execute } = delegationTool(config, inherits, collectable);
  return { ...tool, description, parameters, execute };
}
