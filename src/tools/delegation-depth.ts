// Where a delegation tool keeps its config, apart from the tool itself, so that what reads it
// (the model call judging which tools a run at its depth can use) needs nothing of the client.
import type { SubagentTool } from '../seam/tool';

/** The key of a delegation tool's config; a copy made of the tool (`{ ...tool }`) keeps it. */
export const DELEGATION_CONFIG = Symbol('subagent.delegationTool');

/**
 * Whether `tool` is a delegation tool every call of which is refused in a run at `depth` under
 * `maxDepth`: the run it would start (at `depth + 1`) is deeper than the lower of its own
 * `maxDepth` and the run's. False for any other tool.
 */
export function delegatesPastDepth(tool: SubagentTool, depth: number, maxDepth: number | undefined): boolean {
  const config = (tool as { [DELEGATION_CONFIG]?: { maxDepth?: number } })[DELEGATION_CONFIG];
  if (!config) return false;
  const caps = [config.maxDepth, maxDepth].filter((cap): cap is number => cap !== undefined);
  return caps.length > 0 && depth + 1 > Math.min(...caps);
}
