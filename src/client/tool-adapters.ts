// The `subagent` tool in the shapes two agent ecosystems take: OpenAI chat-completions function
// tools, and the Vercel AI SDK's `tool()`. Both run the same framework-neutral definition.
import { SubagentError, messageOf } from '../seam/errors';
import type { SubagentRunEvent } from '../seam/run';
import { type ToolCallOutcome, toolError, toolResultText } from '../seam/tool';
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
  const raw: unknown = call.function?.arguments;
  if (typeof raw !== 'string') {
    return { role: 'tool', tool_call_id: call.id, content: 'Error: invalid arguments: not a JSON string' };
  }
  let args: unknown;
  try {
    args = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch {
    return { role: 'tool', tool_call_id: call.id, content: 'Error: invalid arguments: not JSON' };
  }
  return { role: 'tool', tool_call_id: call.id, content: toolResultText(await executed(tool, args, context)) };
}

/**
 * `tool.execute` held to its promise never to reject: a definition that breaks it (one of the
 * caller's own) answers with its error as an error result.
 */
async function executed(
  tool: SubagentToolDefinition,
  args: unknown,
  context: SubagentToolCallContext,
): Promise<ToolCallOutcome> {
  try {
    return await tool.execute(args, context);
  } catch (err) {
    return toolError(messageOf(err));
  }
}

/**
 * The tool for the Vercel AI SDK (`ai` 5 or 6, an optional peer dependency): pass it in
 * `generateText({ tools: { subagent: toAiSdkTool(tool, { parent }) } })`. The SDK's abort signal
 * is bridged to the run. While the run works, each of its progress events (its tree's) is a
 * preliminary result (`streamText` shows them; the model never sees them); the last result is the
 * answer, and an error result throws, which the SDK hands the model as a tool error.
 */
export function toAiSdkTool(tool: SubagentToolDefinition, context: Omit<SubagentToolCallContext, 'signal'>) {
  const ai = loadAiSdk();
  return ai.tool({
    description: tool.description,
    inputSchema: ai.jsonSchema<{ description: string; prompt: string }>(tool.parameters as never),
    execute: (args: unknown, options: { abortSignal?: AbortSignal }) =>
      progressThenAnswer((onProgress) =>
        executed(tool, args, {
          ...context,
          ...(options.abortSignal ? { signal: options.abortSignal } : {}),
          onProgress: (event) => {
            context.onProgress?.(event);
            onProgress(event);
          },
        }),
      ),
  });
}

/** The events `run` hands on as it works, then its answer's text; an error result throws. */
async function* progressThenAnswer(
  run: (onProgress: (event: SubagentRunEvent) => void) => Promise<ToolCallOutcome>,
): AsyncGenerator<SubagentRunEvent | string> {
  const waiting: SubagentRunEvent[] = [];
  let wake: (() => void) | undefined;
  let outcome: ToolCallOutcome | undefined;
  void run((event) => {
    waiting.push(event);
    wake?.();
  }).then((answered) => {
    outcome = answered;
    wake?.();
  });
  while (outcome === undefined || waiting.length > 0) {
    if (waiting.length > 0) {
      yield waiting.shift()!;
      continue;
    }
    await new Promise<void>((resolve) => (wake = resolve));
  }
  if (outcome.isError) throw new Error(toolResultText(outcome).replace(/^Error: /, ''));
  yield toolResultText(outcome);
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
