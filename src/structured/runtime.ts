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
      // The schema may leave a value's inside open (an array without items): a value nested past
      // what JSON.stringify can recurse through passed, and failed every attempt of its model call.
      if (nestedDeeperThan(args, MAX_STRUCTURED_DEPTH)) {
        return toolError(`invalid arguments: nested more than ${MAX_STRUCTURED_DEPTH} levels deep`);
      }
      const violations = validateStructuredValue(schema, args);
      if (violations.length > 0) return toolError(`invalid arguments: ${listed(violations)}`);
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

/** The deepest a captured value may nest: far past any real result, well within what the call stack takes. */
const MAX_STRUCTURED_DEPTH = 1000;

/** Whether `value` has arrays or objects nested more than `limit` deep; walked without recursion. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: next, depth } = stack.pop()!;
    if (typeof next !== 'object' || next === null) continue;
    if (depth >= limit) return true;
    for (const child of Object.values(next)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/**
 * The most violations one error result lists: a value of many wrong items has one each, and the
 * whole list (megabytes for a long array) took the model call's answer past the payload limit,
 * ending the run, where the model could have been told and tried again.
 */
const MAX_LISTED_VIOLATIONS = 20;

function listed(violations: readonly string[]): string {
  const shown = violations.slice(0, MAX_LISTED_VIOLATIONS).join('; ');
  const more = violations.length - MAX_LISTED_VIOLATIONS;
  return more > 0 ? `${shown}; and ${more} more` : shown;
}
