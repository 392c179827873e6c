// `read_file`: the text of one file inside the working directory, whole or a line range, cut to
// a byte limit at a line end.
import * as fs from 'node:fs/promises';
import { type SubagentTool, confinedFileTool, type ToolCallOutcome, toolResult } from '../seam/tool';
import {
  BINARY_SNIFF_BYTES,
  argumentObject,
  positiveIntegerArgument,
  positiveIntegerOption,
  runTool,
  stringArgument,
} from './common';
import { type ConfinedFile, IsDirectoryError } from './confine';

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * `read_file`: the text of one file inside the working directory, whole or a line range
 * (`offset` is a 1-based line, `limit` a line count), under a header line naming the file and
 * the lines shown. Content past `maxBytes` (default 64 KiB) is cut, at a line end when one
 * fits, and followed by `[truncated: N more bytes]`. Refuses directories, non-regular files,
 * binary files (a NUL byte in the first 8 KiB) and an `offset` past the end.
 */
export function readFileTool(options: { maxBytes?: number } = {}): SubagentTool {
  const maxBytes = positiveIntegerOption('maxBytes', options.maxBytes, 64 * 1024);
  return confinedFileTool({
    name: 'read_file',
    // Read-only and quick: it runs inside the model call that asked for it.
    inline: true,
    description:
      `Read a text file inside the working directory. Returns a header line, then the file's text. ` +
      `Use offset (1-based line) and limit (line count) to read part of a large file; output past ${maxBytes} bytes is cut with a note. ` +
      'Paths are relative to the working directory.',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File path relative to the working directory.' },
        offset: { type: 'integer', minimum: 1, description: 'First line to read (1-based). Default 1.' },
        limit: {
          type: 'integer',
          minimum: 1,
          description: 'Number of lines to read. Default: to the end of the file.',
        },
      },
      required: ['path'],
      additionalProperties: false,
    },
    execute: (args, context) =>
      runTool(context, async (root) => {
        const input = argumentObject(args);
        const requested = stringArgument(input, 'path', true);
        const offset = positiveIntegerArgument(input, 'offset', 'a 1-based line number') ?? 1;
        const limit = positiveIntegerArgument(input, 'limit', 'a number of lines');
        const display = root.display(requested);
        let file: ConfinedFile;
        try {
          file = await root.openFile(requested);
        } catch (error) {
          if (error instanceof IsDirectoryError) return isDirectoryFailure(display);
          throw error;
        }
        return readSelection(file, display, offset, limit, maxBytes);
      }),
  });
}

/** The selection of an opened file, which it closes. */
async function readSelection(
  { handle, size }: ConfinedFile,
  display: string,
  offset: number,
  limit: number | undefined,
  maxBytes: number,
): Promise<ToolCallOutcome> {
  try {
    const sniff = await readAt(handle, 0, Math.min(size, BINARY_SNIFF_BYTES));
    if (sniff.includes(0)) {
      return toolResult(`${JSON.stringify(display)} looks like a binary file; read_file reads text only`, true);
    }
    if (size === 0) return toolResult(`File ${display} is empty.`);

    const bounds = await lineBounds(handle, size, offset, limit);
    if (bounds.start === undefined) {
      return toolResult(
        `"offset" ${offset} is past the end of ${JSON.stringify(display)} (${bounds.totalLines} lines)`,
        true,
      );
    }
    const start = bounds.start;
    const end = bounds.end;
    const window = await readAt(handle, start, Math.min(end - start, maxBytes));
    let cut = window.length;
    if (start + window.length < end) {
      const lastNewline = window.lastIndexOf(0x0a);
      cut = lastNewline >= 0 ? lastNewline + 1 : utf8Boundary(window);
      if (cut === 0) cut = window.length;
    }
    const text = window.subarray(0, cut).toString('utf8');
    const newlines = countNewlines(window.subarray(0, cut));
    const lastLine = text.endsWith('\n') ? offset + newlines - 1 : offset + newlines;
    const atEnd = start + cut >= size;
    const header = `File ${display}, lines ${offset}-${Math.max(lastLine, offset)}${atEnd ? ' (end of file)' : ''}:`;
    let body = `${header}\n${text}`;
    const remaining = end - (start + cut);
    if (remaining > 0) body += `${body.endsWith('\n') ? '' : '\n'}[truncated: ${remaining} more bytes]`;
    return toolResult(body);
  } finally {
    await handle.close();
  }
}

/**
 * Byte offsets of the selection: where line `offset` starts, and where the line after the
 * selection starts (or the file size). `start` is undefined when `offset` is past the end.
 */
async function lineBounds(
  handle: fs.FileHandle,
  size: number,
  offset: number,
  limit: number | undefined,
): Promise<{ start: number | undefined; end: number; totalLines: number }> {
  let start: number | undefined = offset === 1 ? 0 : undefined;
  const endLine = limit === undefined ? undefined : offset + limit;
  if (start !== undefined && endLine === undefined) return { start, end: size, totalLines: 0 };
  let line = 1;
  let position = 0;
  let lastByte = -1;
  const chunk = Buffer.alloc(READ_CHUNK_BYTES);
  while (position < size) {
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) break;
    const data = chunk.subarray(0, bytesRead);
    lastByte = data[bytesRead - 1]!;
    let index = data.indexOf(0x0a);
    while (index >= 0) {
      line += 1;
      const next = position + index + 1;
      if (line === offset && start === undefined) {
        start = next;
        if (endLine === undefined) return { start: next < size ? next : undefined, end: size, totalLines: line - 1 };
      }
      if (endLine !== undefined && line === endLine) {
        return { start: start !== undefined && start < size ? start : undefined, end: next, totalLines: line - 1 };
      }
      index = data.indexOf(0x0a, index + 1);
    }
    position += bytesRead;
  }
  const totalLines = lastByte === 0x0a ? line - 1 : line;
  return { start: start !== undefined && start < size ? start : undefined, end: size, totalLines };
}

async function readAt(handle: fs.FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

/** The length of `buffer` without a trailing, incomplete UTF-8 sequence. */
function utf8Boundary(buffer: Buffer): number {
  let lead = buffer.length - 1;
  while (lead > 0 && (buffer[lead]! & 0xc0) === 0x80) lead -= 1;
  if (lead < 0) return 0;
  const byte = buffer[lead]!;
  const width = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
  return lead + width > buffer.length ? lead : buffer.length;
}

function countNewlines(buffer: Buffer): number {
  let count = 0;
  let index = buffer.indexOf(0x0a);
  while (index >= 0) {
    count += 1;
    index = buffer.indexOf(0x0a, index + 1);
  }
  return count;
}

function isDirectoryFailure(display: string): ToolCallOutcome {
  return toolResult(`${JSON.stringify(display)} is a directory; use list_directory to list it`, true);
}
