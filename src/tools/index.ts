// Tools an LLM child can call, each run as an activity named after it: the built-in file tools,
// confined to the run's working directory, and the `subagent` tool that delegates further.
import type { SubagentTool } from '../seam/tool';
import { listDirectoryTool } from './list-directory';
import { readFileTool } from './read-file';
import { searchTextTool } from './search-text';

export { NO_WORKING_DIRECTORY_MESSAGE } from './common';
export { ConfinedRoot, ToolPathError } from './confine';
export { listDirectoryTool } from './list-directory';
export { readFileTool } from './read-file';
export { searchTextTool } from './search-text';
export { type SubagentDelegationToolConfig, createDelegationTool } from './subagent';
export { defaultSystemPrompt } from '../../activities/system-prompt';

/** The built-in file tools: `read_file`, `list_directory`, `search_text`, with default limits. */
export function builtinFileTools(): SubagentTool[] {
  return [readFileTool(), listDirectoryTool(), searchTextTool()];
}
