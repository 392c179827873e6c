// The built-in file tools a coding child can call: read a file, list a directory, search text.
// Every path is confined to the run's working directory, symlinks included, and every refusal
// goes back to the model as a tool error; only infrastructure faults and cancellation throw.
import * as fs from 'node:fs/promises';
import type { Dirent, Stats } from 'node:fs';
import * as path from 'node:path';
import type { SubagentTool, SubagentToolContext } from './provider';
import type { ToolCallOutcome } from './structured-output';

/** A path the model asked for that the tools refuse; the message is written for the model. */
export class ToolPathError extends Error {
  override readonly name = 'ToolPathError';
}

class InvalidArgumentsError extends Error {
  constructor(detail: string) {
    super(`invalid arguments: ${detail}`);
  }
}

export const NO_WORKING_DIRECTORY_MESSAGE = 'this run has no working directory, so file tools are unavailable';

const BINARY_SNIFF_BYTES = 8 * 1024;
const READ_CHUNK_BYTES = 64 * 1024;
const MAX_MATCH_LINE_CHARS = 500;
const SKIPPED_DIRECTORY_NAMES = new Set(['node_modules', '.git']);

/**
 * Resolves `requested` inside `cwd` and returns its real absolute path (symlinks resolved).
 * Throws ToolPathError when `cwd` is not an absolute path or does not exist here, when
 * `requested` holds a NUL byte, is absolute (even if it points inside `cwd`), climbs out of
 * `cwd` with `..`, does not exist, or resolves through a symlink to a place outside
 * `realpath(cwd)`. Other filesystem faults are rethrown as they are.
 */
export async function resolveInside(cwd: string, requested: string): Promise<string> {
  const quoted = JSON.stringify(requested);
  if (requested.includes('\0')) throw new ToolPathError(`path ${quoted} contains a NUL byte`);
  if (path.isAbsolute(requested)) {
    throw new ToolPathError(`path ${quoted} is absolute; use a path relative to the working directory`);
  }
  if (!path.isAbsolute(cwd) || cwd.includes('\0')) {
    throw new ToolPathError(`the working directory ${JSON.stringify(cwd)} is not an absolute path, so file tools are unavailable`);
  }
  const root = path.resolve(cwd);
  const lexical = path.resolve(root, requested);
  if (!isInside(root, lexical)) throw new ToolPathError(`path ${quoted} leaves the working directory`);

  let realRoot: string;
  try {
    realRoot = await fs.realpath(root);
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') {
      throw new ToolPathError(`the working directory ${JSON.stringify(cwd)} does not exist on this worker`);
    }
    throw error;
  }
  let real: string;
  try {
    real = await fs.realpath(lexical);
  } catch (error) {
    throw fsRefusal(error, requested) ?? error;
  }
  if (!isInside(realRoot, real)) {
    throw new ToolPathError(`path ${quoted} leaves the working directory through a symbolic link`);
  }
  return real;
}

/**
 * `read_file`: the text of one file inside the working directory, whole or a line range
 * (`offset` is a 1-based line, `limit` a line count), under a header line naming the file and
 * the lines shown. Content past `maxBytes` (default 64 KiB) is cut, at a line end when one
 * fits, and followed by `[truncated: N more bytes]`. Refuses directories, non-regular files,
 * binary files (a NUL byte in the first 8 KiB) and an `offset` past the end.
 */
export function readFileTool(options: { maxBytes?: number } = {}): SubagentTool {
  const maxBytes = positiveIntegerOption('maxBytes', options.maxBytes, 64 * 1024);
  return {
    name: 'read_file',
    description:
      `Read a text file inside the working directory. Returns a header line, then the file's text. ` +
      `Use offset (1-based line) and limit (line count) to read part of a large file; output past ${maxBytes} bytes is cut with a note. ` +
      'Paths are relative to the working directory.',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File path relative to the working directory.' },
        offset: { type: 'integer', minimum: 1, description: 'First line to read (1-based). Default 1.' },
        limit: { type: 'integer', minimum: 1, description: 'Number of lines to read. Default: to the end of the file.' },
      },
      required: ['path'],
      additionalProperties: false,
    },
    execute: (args, context) =>
      runTool(context, async (cwd) => {
        const input = argumentObject(args);
        const requested = stringArgument(input, 'path', true);
        const offset = positiveIntegerArgument(input, 'offset', 'a 1-based line number') ?? 1;
        const limit = positiveIntegerArgument(input, 'limit', 'a number of lines');
        const real = await resolveInside(cwd, requested);
        return readSelection(real, requested, displayPath(cwd, requested), offset, limit, maxBytes);
      }),
  };
}

/**
 * `list_directory`: the entries of one directory inside the working directory, one a line,
 * sorted by name, directories with a trailing `/`. A symlink shows as what it points to when
 * that is inside the working directory, and is marked when it leaves it or is broken. At most
 * `maxEntries` (default 500) are shown, then `[truncated: N more entries]`. Refuses a path
 * that is not a directory.
 */
export function listDirectoryTool(options: { maxEntries?: number } = {}): SubagentTool {
  const maxEntries = positiveIntegerOption('maxEntries', options.maxEntries, 500);
  return {
    name: 'list_directory',
    description:
      "List a directory inside the working directory: one entry per line, sorted, directories end with '/'. " +
      `At most ${maxEntries} entries are shown. The path is relative to the working directory and defaults to '.'.`,
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: "Directory path relative to the working directory. Default '.'." },
      },
      additionalProperties: false,
    },
    execute: (args, context) =>
      runTool(context, async (cwd) => {
        const input = argumentObject(args);
        const requested = stringArgument(input, 'path', false) ?? '.';
        const real = await resolveInside(cwd, requested);
        const realRoot = await fs.realpath(path.resolve(cwd));
        let entries: Dirent[];
        try {
          entries = await fs.readdir(real, { withFileTypes: true });
        } catch (error) {
          if (errorCode(error) === 'ENOTDIR') {
            return failure(`${JSON.stringify(displayPath(cwd, requested))} is not a directory; use read_file to read a file`);
          }
          throw fsRefusal(error, requested) ?? error;
        }
        entries.sort((a, b) => compareNames(a.name, b.name));
        if (entries.length === 0) return success('(empty directory)');
        const shown = entries.slice(0, maxEntries);
        const lines: string[] = [];
        for (const entry of shown) lines.push(await describeEntry(entry, real, realRoot));
        if (entries.length > shown.length) lines.push(`[truncated: ${entries.length - shown.length} more entries]`);
        return success(lines.join('\n'));
      }),
  };
}

/**
 * `search_text`: every line under a file or directory inside the working directory that
 * contains `pattern` (a case-sensitive literal, or a JavaScript regular expression source when
 * `regex` is true), as `relative/path:line: text` with paths relative to the working directory.
 * The walk skips `node_modules` and `.git`, symlinks that leave the working directory (or point
 * back into the searched tree), files over `maxFileBytes` (default 1 MiB) and binary files; it
 * stops after `maxResults` (default 200) matches with a note. Refuses an invalid regular
 * expression. Checks the signal before each file and directory and rejects with its reason
 * once the run is cancelled.
 */
export function searchTextTool(options: { maxResults?: number; maxFileBytes?: number } = {}): SubagentTool {
  const maxResults = positiveIntegerOption('maxResults', options.maxResults, 200);
  const maxFileBytes = positiveIntegerOption('maxFileBytes', options.maxFileBytes, 1024 * 1024);
  return {
    name: 'search_text',
    description:
      'Search text files under a path inside the working directory. Returns matching lines as `path:line: text`. ' +
      'The pattern is a case-sensitive literal substring, or a JavaScript regular expression (no flags) when regex is true. ' +
      `Skips node_modules, .git, binary files and files over ${maxFileBytes} bytes; stops after ${maxResults} matches.`,
    parameters: {
      type: 'object',
      properties: {
        pattern: { type: 'string', minLength: 1, description: 'Text to find (literal unless regex is true).' },
        path: { type: 'string', description: "File or directory to search, relative to the working directory. Default '.'." },
        regex: { type: 'boolean', description: 'Treat pattern as a JavaScript regular expression. Default false.' },
      },
      required: ['pattern'],
      additionalProperties: false,
    },
    execute: (args, context) =>
      runTool(context, async (cwd) => {
        const input = argumentObject(args);
        const pattern = stringArgument(input, 'pattern', true);
        if (pattern === '') throw new InvalidArgumentsError('"pattern" must not be empty');
        const requested = stringArgument(input, 'path', false) ?? '.';
        const regex = booleanArgument(input, 'regex') ?? false;
        let matches: (line: string) => boolean;
        if (regex) {
          let compiled: RegExp;
          try {
            compiled = new RegExp(pattern);
          } catch (error) {
            const reason = error instanceof Error ? error.message : String(error);
            throw new InvalidArgumentsError(`"pattern" is not a valid regular expression: ${reason}`);
          }
          matches = (line) => compiled.test(line);
        } else {
          matches = (line) => line.includes(pattern);
        }
        const real = await resolveInside(cwd, requested);
        const search = new TextSearch({
          realRoot: await fs.realpath(path.resolve(cwd)),
          searchRoot: real,
          matches,
          maxResults,
          maxFileBytes,
          signal: context.signal,
        });
        const start = displayPath(cwd, requested);
        let stat: Stats;
        try {
          stat = await fs.stat(real);
        } catch (error) {
          throw fsRefusal(error, requested) ?? error;
        }
        if (stat.isDirectory()) await search.directory(real, start);
        else if (stat.isFile()) await search.file(real, start, stat.size);
        return success(search.report(pattern, start));
      }),
  };
}

/** The built-in file tools: `read_file`, `list_directory`, `search_text`, with default limits. */
export function builtinFileTools(): SubagentTool[] {
  return [readFileTool(), listDirectoryTool(), searchTextTool()];
}

async function runTool(context: SubagentToolContext, body: (cwd: string) => Promise<ToolCallOutcome>): Promise<ToolCallOutcome> {
  context.signal.throwIfAborted();
  if (context.cwd === undefined || context.cwd === '') return failure(NO_WORKING_DIRECTORY_MESSAGE);
  try {
    return await body(context.cwd);
  } catch (error) {
    if (error instanceof ToolPathError || error instanceof InvalidArgumentsError) return failure(error.message);
    throw error;
  }
}

async function readSelection(
  real: string,
  requested: string,
  display: string,
  offset: number,
  limit: number | undefined,
  maxBytes: number,
): Promise<ToolCallOutcome> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(real, 'r');
  } catch (error) {
    if (errorCode(error) === 'EISDIR') return isDirectoryFailure(display);
    throw fsRefusal(error, requested) ?? error;
  }
  try {
    const stat = await handle.stat();
    if (stat.isDirectory()) return isDirectoryFailure(display);
    if (!stat.isFile()) return failure(`${JSON.stringify(display)} is not a regular file`);
    const size = stat.size;
    const sniff = await readAt(handle, 0, Math.min(size, BINARY_SNIFF_BYTES));
    if (sniff.includes(0)) return failure(`${JSON.stringify(display)} looks like a binary file; read_file reads text only`);
    if (size === 0) return success(`File ${display} is empty.`);

    const bounds = await lineBounds(handle, size, offset, limit);
    if (bounds.start === undefined) {
      return failure(`"offset" ${offset} is past the end of ${JSON.stringify(display)} (${bounds.totalLines} lines)`);
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
    return success(body);
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

interface TextSearchOptions {
  realRoot: string;
  searchRoot: string;
  matches: (line: string) => boolean;
  maxResults: number;
  maxFileBytes: number;
  signal: AbortSignal;
}

class TextSearch {
  private readonly results: string[] = [];
  private readonly visited = new Set<string>();
  private more = false;
  private skippedLarge = 0;
  private skippedOutside = 0;

  constructor(private readonly options: TextSearchOptions) {}

  async directory(real: string, display: string): Promise<void> {
    this.options.signal.throwIfAborted();
    if (this.more || this.visited.has(real)) return;
    this.visited.add(real);
    let entries: Dirent[];
    try {
      entries = await fs.readdir(real, { withFileTypes: true });
    } catch (error) {
      if (isSkippableFsError(error)) return;
      throw error;
    }
    entries.sort((a, b) => compareNames(a.name, b.name));
    for (const entry of entries) {
      if (this.more) return;
      if (SKIPPED_DIRECTORY_NAMES.has(entry.name)) continue;
      const full = path.join(real, entry.name);
      const childDisplay = display === '.' ? entry.name : `${display}/${entry.name}`;
      if (entry.isSymbolicLink()) {
        await this.symlink(full, childDisplay);
      } else if (entry.isDirectory()) {
        await this.directory(full, childDisplay);
      } else if (entry.isFile()) {
        await this.file(full, childDisplay);
      }
    }
  }

  private async symlink(full: string, display: string): Promise<void> {
    let target: string;
    try {
      target = await fs.realpath(full);
    } catch (error) {
      if (isSkippableFsError(error)) return;
      throw error;
    }
    if (!isInside(this.options.realRoot, target)) {
      this.skippedOutside += 1;
      return;
    }
    if (isInside(this.options.searchRoot, target)) return;
    let stat: Stats;
    try {
      stat = await fs.stat(target);
    } catch (error) {
      if (isSkippableFsError(error)) return;
      throw error;
    }
    if (stat.isDirectory()) await this.directory(target, display);
    else if (stat.isFile()) await this.file(target, display, stat.size);
  }

  async file(real: string, display: string, knownSize?: number): Promise<void> {
    this.options.signal.throwIfAborted();
    if (this.more) return;
    let content: Buffer;
    try {
      const size = knownSize ?? (await fs.stat(real)).size;
      if (size > this.options.maxFileBytes) {
        this.skippedLarge += 1;
        return;
      }
      content = await fs.readFile(real);
    } catch (error) {
      if (isSkippableFsError(error)) return;
      throw error;
    }
    if (content.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return;
    const lines = content.toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    for (let index = 0; index < lines.length; index += 1) {
      const raw = lines[index]!;
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (!this.options.matches(line)) continue;
      if (this.results.length >= this.options.maxResults) {
        this.more = true;
        return;
      }
      const shown = line.length > MAX_MATCH_LINE_CHARS ? `${line.slice(0, MAX_MATCH_LINE_CHARS)}...` : line;
      this.results.push(`${display}:${index + 1}: ${shown}`);
    }
  }

  report(pattern: string, start: string): string {
    const lines = this.results.length > 0 ? [...this.results] : [`no matches for ${JSON.stringify(pattern)} in ${start}`];
    if (this.more) lines.push(`[truncated: more than ${this.options.maxResults} matches; narrow the pattern or the path]`);
    const skipped: string[] = [];
    if (this.skippedLarge > 0) skipped.push(`${this.skippedLarge} ${plural(this.skippedLarge, 'file')} over ${this.options.maxFileBytes} bytes`);
    if (this.skippedOutside > 0) {
      skipped.push(`${this.skippedOutside} ${plural(this.skippedOutside, 'symlink')} leaving the working directory`);
    }
    if (skipped.length > 0) lines.push(`[skipped: ${skipped.join(', ')}]`);
    return lines.join('\n');
  }
}

async function describeEntry(entry: Dirent, directory: string, realRoot: string): Promise<string> {
  if (entry.isDirectory()) return `${entry.name}/`;
  if (!entry.isSymbolicLink()) return entry.name;
  let target: string;
  try {
    target = await fs.realpath(path.join(directory, entry.name));
  } catch (error) {
    if (isSkippableFsError(error)) return `${entry.name} (broken symlink)`;
    throw error;
  }
  if (!isInside(realRoot, target)) return `${entry.name} (symlink leaving the working directory)`;
  try {
    return (await fs.stat(target)).isDirectory() ? `${entry.name}/` : entry.name;
  } catch (error) {
    if (isSkippableFsError(error)) return `${entry.name} (broken symlink)`;
    throw error;
  }
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  if (relative === '') return true;
  return relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

function displayPath(cwd: string, requested: string): string {
  const root = path.resolve(cwd);
  const relative = path.relative(root, path.resolve(root, requested));
  return relative === '' ? '.' : relative.split(path.sep).join('/');
}

function fsRefusal(error: unknown, requested: string): ToolPathError | undefined {
  switch (errorCode(error)) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new ToolPathError(`no such file or directory: ${requested}`);
    case 'EACCES':
    case 'EPERM':
      return new ToolPathError(`permission denied: ${requested}`);
    case 'ELOOP':
      return new ToolPathError(`too many levels of symbolic links: ${requested}`);
    case 'ENAMETOOLONG':
      return new ToolPathError(`path ${JSON.stringify(requested)} is too long`);
    default:
      return undefined;
  }
}

function isSkippableFsError(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES' || code === 'EPERM' || code === 'ELOOP';
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function argumentObject(args: unknown): Record<string, unknown> {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new InvalidArgumentsError('expected a JSON object of named arguments');
  }
  return args as Record<string, unknown>;
}

function stringArgument(input: Record<string, unknown>, name: string, required: true): string;
function stringArgument(input: Record<string, unknown>, name: string, required: false): string | undefined;
function stringArgument(input: Record<string, unknown>, name: string, required: boolean): string | undefined {
  const value = input[name];
  if (value === undefined || value === null) {
    if (required) throw new InvalidArgumentsError(`"${name}" must be a string`);
    return undefined;
  }
  if (typeof value !== 'string') throw new InvalidArgumentsError(`"${name}" must be a string`);
  return value;
}

function positiveIntegerArgument(input: Record<string, unknown>, name: string, meaning: string): number | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentsError(`"${name}" must be a positive integer (${meaning})`);
  }
  return value;
}

function booleanArgument(input: Record<string, unknown>, name: string): boolean | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new InvalidArgumentsError(`"${name}" must be a boolean`);
  return value;
}

function positiveIntegerOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer (got ${value})`);
  return value;
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

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function plural(count: number, noun: string): string {
  return count === 1 ? noun : `${noun}s`;
}

function isDirectoryFailure(display: string): ToolCallOutcome {
  return failure(`${JSON.stringify(display)} is a directory; use list_directory to list it`);
}

function success(text: string): ToolCallOutcome {
  return { content: [{ type: 'text', text }], isError: false };
}

function failure(text: string): ToolCallOutcome {
  return { content: [{ type: 'text', text }], isError: true };
}
