// The seam's content vocabulary: the blocks a prompt, a message and an output are made of, and
// the JSON data that crosses the wire. Plain data only, so history and continue-as-new stay simple.
import { isPlainObject, jsonViolation } from './json';

export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ReasoningBlock {
  type: 'reasoning';
  text: string;
}
export interface ToolCallBlock {
  type: 'tool-call';
  id: string;
  name: string;
  /** The raw JSON argument string, as the model produced it. */
  arguments: string;
}
export interface ToolResultBlock {
  type: 'tool-result';
  toolCallId: string;
  content: ContentBlock[];
  isError?: boolean;
}

/** Merge-extensible: a provider may add block kinds through declaration merging. */
export interface ContentBlockMap {
  text: TextBlock;
  reasoning: ReasoningBlock;
  'tool-call': ToolCallBlock;
  'tool-result': ToolResultBlock;
}
export type ContentBlock = ContentBlockMap[keyof ContentBlockMap];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** One text block: the shape of a plain prompt, message or answer. */
export function textContent(text: string): ContentBlock[] {
  return [{ type: 'text', text }];
}

/** The text blocks of `content`, joined; other kinds of block are skipped. */
export function textOf(content: readonly ContentBlock[]): string {
  return content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** The string fields each kind of block must have. */
const BLOCK_STRINGS: Record<string, string[]> = {
  text: ['text'],
  reasoning: ['text'],
  'tool-call': ['id', 'name', 'arguments'],
  'tool-result': ['toolCallId'],
};

/**
 * Why `value` is not message content (a non-empty array of content blocks, plain JSON), naming the
 * place by `path`; undefined if it is. Safe inside the workflow sandbox.
 */
export function contentViolation(value: unknown, path: string): string | undefined {
  if (!Array.isArray(value) || value.length === 0) return `${path} must be a non-empty array of content blocks`;
  for (const [index, block] of value.entries()) {
    const violation = blockViolation(block, `${path}[${index}]`);
    if (violation) return violation;
  }
  return undefined;
}

function blockViolation(block: unknown, path: string): string | undefined {
  if (!isPlainObject(block) || typeof block.type !== 'string') {
    return `${path} must be a content block object with a string "type"`;
  }
  for (const key of BLOCK_STRINGS[block.type] ?? []) {
    if (typeof block[key] !== 'string') return `${path}.${key} must be a string (a "${block.type}" block)`;
  }
  if (block.type === 'tool-result') {
    if (!Array.isArray(block.content)) return `${path}.content must be an array of content blocks`;
    for (const [index, inner] of (block.content as unknown[]).entries()) {
      const violation = blockViolation(inner, `${path}.content[${index}]`);
      if (violation) return violation;
    }
    if (block.isError !== undefined && typeof block.isError !== 'boolean') return `${path}.isError must be a boolean`;
  }
  return jsonViolation(block, path);
}
