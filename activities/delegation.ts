// What a run passes down to the runs it delegates: its depth, its depth cap and its model.
// Pure, so the workflow (for tool activities) and the turn activity compute it the same way.
import type { ResolvedSubagentRequest, ToolActivityInput } from './contracts';

/** The model a run asked for: its own non-empty `agentOptions.model`, else its parent's. */
export function requestedModel(request: ResolvedSubagentRequest): string | undefined {
  const own = request.agentOptions?.model;
  return typeof own === 'string' && own !== '' ? own : request.parent.model;
}

/** This run as the parent of a nested run: the depth, cap and model a child inherits. */
export function delegationOf(request: ResolvedSubagentRequest): ToolActivityInput['delegation'] {
  const model = requestedModel(request);
  return {
    depth: request.depth,
    ...(request.maxDepth === undefined ? {} : { maxDepth: request.maxDepth }),
    ...(model === undefined ? {} : { model }),
  };
}
