// The structured-output capture runtime of one turn: the `structured_output` tool carrying the
// run's own schema, the instruction that ends a structured child's system prompt, and the capture
// itself. Validation runs here, next to the model call, so an invalid value goes back to the
// model as a tool error instead of failing anything durable.
import { StructuredOutputSchema, validateStructuredValue } from '../src/schema';
import type { ContentBlock } from './contracts';

export const STRUCTURED_OUTPUT_TOOL = 'structured_output';

export const STRUCTURED_OUTPUT_DESCRIPTION =
  "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly.";

export const STRUCTURED_OUTPUT_INSTRUCTION =
  'When you have your final answer, you MUST report it by calling the `structured_output` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result.';

export interface StructuredToolDefinition {
  name: typeof STRUCTURED_OUTPUT_TOOL;
  description: string;
  parameters: StructuredOutputSchema;
}

/** What a tool call returns to the model. */
export interface ToolCallOutcome {
  content: ContentBlock[];
  isError: boolean;
}

/**
 * Handed to a provider's turn when the run asked for structured output. The provider shows
 * `tool` (last in its tool list) and appends `instruction` to its system prompt, routes every
 * `structured_output` call through `call`, and once `captured` is set ends the turn and denies
 * every further tool call with `deny`.
 */
export interface StructuredOutputRuntime {
  readonly tool: StructuredToolDefinition;
  readonly instruction: string;
  /** The captured value, once a valid call was made. */
  readonly captured: { value: unknown } | undefined;
  /** A `structured_output` call with its raw JSON argument string (as a model sends it). */
  call(argumentsJson: string): ToolCallOutcome;
  /** The refusal for any tool call after the capture. */
  deny(toolName: string): ToolCallOutcome;
  /** `tools` without any other `structured_output`, then this run's `structured_output` last. */
  withTool<T extends { name: string }>(tools: readonly T[]): (T | StructuredToolDefinition)[];
  /** `base` with the instruction appended as its final section. */
  systemPrompt(base: string): string;
}

export function createStructuredOutputRuntime(schema: StructuredOutputSchema): StructuredOutputRuntime {
  const tool: StructuredToolDefinition = {
    name: STRUCTURED_OUTPUT_TOOL,
    description: STRUCTURED_OUTPUT_DESCRIPTION,
    parameters: schema,
  };
  let captured: { value: unknown } | undefined;
  const deny = (toolName: string): ToolCallOutcome => ({
    isError: true,
    content: [
      {
        type: 'text',
        text: `Error: structured output already recorded: the run is complete, so \`${toolName}\` is not executed`,
      },
    ],
  });
  return {
    tool,
    instruction: STRUCTURED_OUTPUT_INSTRUCTION,
    get captured() {
      return captured;
    },
    call(argumentsJson) {
      if (captured) return deny(STRUCTURED_OUTPUT_TOOL);
      const args = parseArguments(argumentsJson);
      const violations = validateStructuredValue(schema, args);
      if (violations.length > 0) {
        return { isError: true, content: [{ type: 'text', text: `Error: invalid arguments: ${violations.join('; ')}` }] };
      }
      captured = { value: args };
      return { isError: false, content: [{ type: 'text', text: 'Structured output recorded.' }] };
    },
    deny,
    withTool(tools) {
      return [...tools.filter((entry) => entry.name !== STRUCTURED_OUTPUT_TOOL), tool];
    },
    systemPrompt(base) {
      return base ? `${base}\n\n${STRUCTURED_OUTPUT_INSTRUCTION}` : STRUCTURED_OUTPUT_INSTRUCTION;
    },
  };
}

/** As an agent loop parses tool arguments: empty means `{}`, unparsable JSON stays the raw string. */
function parseArguments(argumentsJson: string): unknown {
  if (argumentsJson.trim() === '') return {};
  try {
    return JSON.parse(argumentsJson);
  } catch {
    return argumentsJson;
  }
}
