// The structured-output capture runtime of one turn: the `structured_output` tool carrying the
// run's own schema, the instruction that ends a structured child's system prompt, and the capture
// itself. Validation runs here, next to the model call, so an invalid value goes back to the
// model as a tool error instead of failing anything durable.
import {
  STRUCTURED_OUTPUT_TOOL,
  type StructuredOutputRuntime,
  type StructuredOutputSchema,
  type StructuredToolDefinition,
} from '../seam/structured';
import { type ToolCallOutcome, toolError, toolResult } from '../seam/tool';
import { validateStructuredValue } from './schema';

export const STRUCTURED_OUTPUT_DESCRIPTION =
  "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly.";

export const STRUCTURED_OUTPUT_INSTRUCTION =
  'When you have your final answer, you MUST report it by calling the `structured_output` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result.';

export function createStructuredOutputRuntime(schema: StructuredOutputSchema): StructuredOutputRuntime {
  const tool: StructuredToolDefinition = {
    name: STRUCTURED_OUTPUT_TOOL,
    description: STRUCTURED_OUTPUT_DESCRIPTION,
    parameters: schema,
  };
  let captured: { value: unknown } | undefined;
  const deny = (toolName: string): ToolCallOutcome =>
    toolError(`structured output already recorded: the run is complete, so \`${toolName}\` is not executed`);
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
      if (violations.length > 0) return toolError(`invalid arguments: ${violations.join('; ')}`);
      captured = { value: args };
      return toolResult('Structured output recorded.');
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
