// The `subagent` tool in the shapes two agent ecosystems take: OpenAI chat-completions function
// tools, and the Vercel AI SDK's `tool()`. Both run the same framework-neutral definition.
import { SubagentError } from '../seam/errors';
import { toolResultText } from '../seam/tool';
import type { SubagentToolCallContext, SubagentToolDefinition } from './subagent-tool';

/** The tool as an OpenAI chat-completions `tools` entry. */
export function toOpenAITool(tool: SubagentToolDefinition) {
  return {
    type: 'function' as const,
    function: {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters as unknown as Record<string, unknown>,
    },
  };
}

/**
 * Runs one OpenAI tool call against the tool and resolves with the `tool` message to append to
 * the conversation. Never rejects: malformed arguments and failed runs become the message text.
 */
export async function runOpenAIToolCall(
  tool: SubagentToolDefinition,
  call: { id: string; function: { name: string; arguments: string } },
  context: SubagentToolCallContext,
): Promise<{ role: 'tool'; tool_call_id: string; content: string }> {
  let args: unknown;
  try {
    args = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
  } catch {
    return { role: 'tool', tool_call_id: call.id, content: 'Error: invalid arguments: not JSON' };
  }
  return { role: 'tool', tool_call_id: call.id, content: toolResultText(await tool.execute(args, context)) };
}

/**
 * The tool for the Vercel AI SDK (`ai` 5 or 6, an optional peer dependency): pass it in
 * `generateText({ tools: { subagent: toAiSdkTool(tool, { parent }) } })`. The SDK's abort signal
 * is bridged to the run; an error result throws, which the SDK hands the model as a tool error.
 */
export function toAiSdkTool(tool: SubagentToolDefinition, context: Omit<SubagentToolCallContext, 'signal'>) {
  const ai = loadAiSdk();
  return ai.tool({
    description: tool.description,
    inputSchema: ai.jsonSchema<{ description: string; prompt: string }>(tool.parameters as never),
    execute: async (args: unknown, options: { abortSignal?: AbortSignal }) => {
      const outcome = await tool.execute(args, {
        ...context,
        ...(options.abortSignal ? { signal: options.abortSignal } : {}),
      });
      if (outcome.isError) throw new Error(toolResultText(outcome).replace(/^Error: /, ''));
      return toolResultText(outcome);
    },
  });
}

function loadAiSdk(): typeof import('ai') {
  try {
    // Loaded on first use: `ai` is an optional peer dependency, absent unless the caller uses it.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('ai') as typeof import('ai');
  } catch (err) {
    throw new SubagentError(
      'the Vercel AI SDK adapter needs the `ai` package (version 5 or 6) installed',
      'INVALID_CONFIG',
      { cause: err },
    );
  }
}
