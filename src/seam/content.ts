// The seam's content vocabulary: the blocks a prompt, a message and an output are made of, and
// the JSON data that crosses the wire. Plain data only, so history and continue-as-new stay simple.

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
