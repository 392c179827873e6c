// What the file tools share: running one call with its refusals returned as results the model
// reads, the model's arguments checked one by one, and a few text helpers.
import { type SubagentToolContext, type ToolCallOutcome, toolResult } from '../seam/tool';
import { ConfinedRoot, ToolPathError } from './confine';

export class InvalidArgumentsError extends Error {
  constructor(detail: string) {
    super(`invalid arguments: ${detail}`);
  }
}

export const NO_WORKING_DIRECTORY_MESSAGE = 'this run has no working directory, so file tools are unavailable';

/** Bytes read to tell a binary file (a NUL byte among them) from a text file. */
export const BINARY_SNIFF_BYTES = 8 * 1024;

/**
 * Runs one call confined to the run's working directory. Refused paths and bad arguments resolve
 * as failures the model reads; the run's cancellation and any other fault reject.
 */
export async function runTool(
  context: SubagentToolContext,
  body: (root: ConfinedRoot) => Promise<ToolCallOutcome>,
): Promise<ToolCallOutcome> {
  context.signal.throwIfAborted();
  if (context.cwd === undefined || context.cwd === '') return toolResult(NO_WORKING_DIRECTORY_MESSAGE, true);
  try {
    return await body(await ConfinedRoot.open(context.cwd));
  } catch (error) {
    if (error instanceof ToolPathError || error instanceof InvalidArgumentsError) {
      return toolResult(error.message, true);
    }
    throw error;
  }
}

export function argumentObject(args: unknown): Record<string, unknown> {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new InvalidArgumentsError('expected a JSON object of named arguments');
  }
  return args as Record<string, unknown>;
}

export function stringArgument(input: Record<string, unknown>, name: string, required: true): string;
export function stringArgument(input: Record<string, unknown>, name: string, required: false): string | undefined;
export function stringArgument(input: Record<string, unknown>, name: string, required: boolean): string | undefined {
  const value = input[name];
  if (value === undefined || value === null) {
    if (required) throw new InvalidArgumentsError(`"${name}" must be a string`);
    return undefined;
  }
  if (typeof value !== 'string') throw new InvalidArgumentsError(`"${name}" must be a string`);
  return value;
}

export function positiveIntegerArgument(
  input: Record<string, unknown>,
  name: string,
  meaning: string,
): number | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentsError(`"${name}" must be a positive integer (${meaning})`);
  }
  return value;
}

export function booleanArgument(input: Record<string, unknown>, name: string): boolean | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new InvalidArgumentsError(`"${name}" must be a boolean`);
  return value;
}

export function positiveIntegerOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer (got ${value})`);
  }
  return value;
}

export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function plural(count: number, noun: string): string {
  return count === 1 ? noun : `${noun}s`;
}
