// Structured output in the seam's terms: the JSON Schema subset a caller may ask for, and the
// `structured_output` capture runtime a provider's turn receives when a run asked for it.
import type { ToolCallOutcome } from './tool';

export type StructuredScalar = string | number | boolean | null;

export type StructuredSchemaType = 'object' | 'array' | 'string' | 'number' | 'integer' | 'boolean' | 'null';

export interface StructuredSchemaNode {
  type: StructuredSchemaType;
  properties?: Record<string, StructuredSchemaNode>;
  required?: string[];
  additionalProperties?: boolean;
  items?: StructuredSchemaNode;
  enum?: StructuredScalar[];
  const?: StructuredScalar;
  description?: string;
  title?: string;
  default?: unknown;
  examples?: unknown;
}

export type StructuredOutputSchema = StructuredSchemaNode & { type: 'object' };

/** The capture tool's name, as the model sees it. */
export const STRUCTURED_OUTPUT_TOOL = 'structured_output';

export interface StructuredToolDefinition {
  name: typeof STRUCTURED_OUTPUT_TOOL;
  description: string;
  parameters: StructuredOutputSchema;
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
