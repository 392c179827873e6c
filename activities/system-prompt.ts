// What an LLM child is told of itself when its provider gives it no system prompt of its own:
// made at each model call from the tools that call offers, so it describes only what the child has.
import type { SubagentAgentProvider } from '../src/seam/provider';
import { type SubagentTool, isConfinedFileTool } from '../src/seam/tool';

/**
 * The system prompt of a child offered `tools` and no prompt of its own: it speaks of tools only
 * when there are some, and of the working directory only through the built-in file tools among
 * them (a tool of the same name, or any other tool, may reach anything), which a run without a
 * working directory (`hasWorkingDirectory` false) cannot use.
 */
export function defaultSystemPrompt(tools: readonly SubagentTool[], hasWorkingDirectory = true): string {
  const intro = 'You are a subagent: another agent delegated a task to you.';
  if (tools.length === 0) return `${intro} Work on it, then answer with a concise, complete result.`;
  const confined = tools.filter(isConfinedFileTool).map((tool) => tool.name);
  const one = confined.length === 1;
  const files =
    confined.length === 0
      ? ''
      : hasWorkingDirectory
        ? ` ${listed(confined)} ${one ? 'reaches' : 'reach'} only the files inside the working directory.`
        : ` ${listed(confined)} ${one ? 'is' : 'are'} unavailable: this run has no working directory.`;
  return `${intro} Work on it with the tools you have, then answer with a concise, complete result.${files}`;
}

/** The default prompt a provider was made with, to tell it from one a copy of the provider replaced. */
const MADE_WITH_DEFAULT_PROMPT = Symbol('subagent.defaultSystemPrompt');

/** `provider`, marked as made with `systemPrompt`, the default for its tools; a copy keeps the mark. */
export function withDefaultSystemPrompt<P extends SubagentAgentProvider>(provider: P): P {
  return Object.assign(provider, { [MADE_WITH_DEFAULT_PROMPT]: provider.systemPrompt });
}

/**
 * The system prompt a model call of `provider` that offers `tools` sends, for a run in `cwd`: a
 * provider made without a prompt of its own (and not given one since) gets the default made for
 * those tools, which a run's `toolFilter` may have narrowed; any other provider its own.
 */
export function systemPromptFor(
  provider: SubagentAgentProvider,
  tools: readonly SubagentTool[],
  cwd: string | undefined,
): string {
  const made = (provider as { [MADE_WITH_DEFAULT_PROMPT]?: string })[MADE_WITH_DEFAULT_PROMPT];
  if (made === undefined || made !== provider.systemPrompt) return provider.systemPrompt;
  // The file tools refuse every call of a run without one (NO_WORKING_DIRECTORY_MESSAGE).
  return defaultSystemPrompt(tools, cwd !== undefined && cwd !== '');
}

function listed(names: readonly string[]): string {
  return names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}
