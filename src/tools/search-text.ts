// `search_text`: every line under a path inside the working directory that holds a literal or
// matches a regular expression, walking the tree within the confinement and the limits.
import { RE2JS } from 're2js';
import { type SubagentTool, confinedFileTool, toolResult } from '../seam/tool';
import {
  BINARY_SNIFF_BYTES,
  InvalidArgumentsError,
  argumentObject,
  booleanArgument,
  compareNames,
  plural,
  positiveIntegerOption,
  runTool,
  stringArgument,
} from './common';
import {
  type ConfinedDirectory,
  type ConfinedFile,
  NotDirectoryError,
  ToolPathError,
  isInside,
  isSkippableFsError,
} from './confine';

const MAX_MATCH_LINE_CHARS = 500;
const SKIPPED_DIRECTORY_NAMES = new Set(['node_modules', '.git']);

/**
 * `search_text`: every line under a file or directory inside the working directory that
 * contains `pattern` (a case-sensitive literal, or a regular expression in RE2 syntax when
 * `regex` is true, matched in time linear in the line), as `relative/path:line: text` with paths relative to the working directory.
 * The walk skips `node_modules` and `.git`, symlinks that leave the working directory (or point
 * back into the searched tree), files over `maxFileBytes` (default 1 MiB) and binary files; it
 * stops after `maxResults` (default 200) matches with a note. Refuses an invalid regular
 * expression. Checks the signal before each file and directory and rejects with its reason
 * once the run is cancelled.
 */
export function searchTextTool(options: { maxResults?: number; maxFileBytes?: number } = {}): SubagentTool {
  const maxResults = positiveIntegerOption('maxResults', options.maxResults, 200);
  const maxFileBytes = positiveIntegerOption('maxFileBytes', options.maxFileBytes, 1024 * 1024);
  return confinedFileTool({
    name: 'search_text',
    // Read-only and quick: it runs inside the model call that asked for it.
    inline: true,
    description:
      'Search text files under a path inside the working directory. Returns matching lines as `path:line: text`. ' +
      'The pattern is a case-sensitive literal substring, or a regular expression in RE2 syntax (no flags, backreferences or lookaround) when regex is true. ' +
      `Skips node_modules, .git, binary files and files over ${maxFileBytes} bytes; stops after ${maxResults} matches.`,
    parameters: {
      type: 'object',
      properties: {
        pattern: { type: 'string', minLength: 1, description: 'Text to find (literal unless regex is true).' },
        path: {
          type: 'string',
          description: "File or directory to search, relative to the working directory. Default '.'.",
        },
        regex: { type: 'boolean', description: 'Treat pattern as a regular expression (RE2 syntax). Default false.' },
      },
      required: ['pattern'],
      additionalProperties: false,
    },
    execute: (args, context) =>
      runTool(context, async (root) => {
        const input = argumentObject(args);
        const pattern = stringArgument(input, 'pattern', true);
        if (pattern === '') throw new InvalidArgumentsError('"pattern" must not be empty');
        const requested = stringArgument(input, 'path', false) ?? '.';
        const regex = booleanArgument(input, 'regex') ?? false;
        let matches: (line: string) => boolean;
        if (regex) {
          // RE2 semantics: matching time is linear in the line, whatever the pattern (a model's
          // `^(a|a)+$` cannot freeze the worker); so no backreferences or lookaround.
          let compiled: RE2JS;
          try {
            compiled = RE2JS.compile(pattern);
          } catch (error) {
            const reason = error instanceof Error ? error.message : String(error);
            throw new InvalidArgumentsError(
              `"pattern" is not a regular expression in RE2 syntax (no backreferences or lookaround): ${reason}`,
            );
          }
          matches = (line) => compiled.test(line);
        } else {
          matches = (line) => line.includes(pattern);
        }
        const display = root.display(requested);
        const search = new TextSearch({ matches, maxResults, maxFileBytes, signal: context.signal });
        let directory: ConfinedDirectory;
        try {
          directory = await root.openDirectory(requested);
        } catch (error) {
          if (!(error instanceof NotDirectoryError)) throw error;
          // A file: searched alone.
          await search.file(await root.openFile(requested), display);
          return toolResult(search.report(pattern, display));
        }
        await search.directory(directory, display, directory.real);
        return toolResult(search.report(pattern, display));
      }),
  });
}

interface TextSearchOptions {
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

  /**
   * Every entry of an opened directory (which it closes), depth first in name order. Symlinks are
   * followed when they stay inside the working directory and do not lead back into the tree
   * searched (`searchRoot`).
   */
  async directory(directory: ConfinedDirectory, display: string, searchRoot: string): Promise<void> {
    try {
      this.options.signal.throwIfAborted();
      if (this.more || this.visited.has(directory.real)) return;
      this.visited.add(directory.real);
      const entries = [...directory.entries].sort((a, b) => compareNames(a.name, b.name));
      for (const entry of entries) {
        if (this.more) return;
        if (SKIPPED_DIRECTORY_NAMES.has(entry.name)) continue;
        const childDisplay = display === '.' ? entry.name : `${display}/${entry.name}`;
        let kind: 'directory' | 'file' | undefined;
        if (entry.isSymbolicLink()) {
          const followed = await directory.kind(entry.name);
          if (followed.kind === 'outside') this.skippedOutside += 1;
          if (followed.kind === 'directory' && !isInside(searchRoot, followed.real)) kind = 'directory';
          if (followed.kind === 'file') kind = 'file';
        } else if (entry.isDirectory()) {
          kind = 'directory';
        } else if (entry.isFile()) {
          kind = 'file';
        }
        try {
          if (kind === 'directory') {
            await this.directory(await directory.openDirectory(entry.name), childDisplay, searchRoot);
          }
          if (kind === 'file') await this.file(await directory.openFile(entry.name), childDisplay);
        } catch (error) {
          // Gone, or swapped for something else since it was listed: not part of the search.
          if (!(error instanceof ToolPathError) && !isSkippableFsError(error)) throw error;
        }
      }
    } finally {
      await directory.close();
    }
  }

  /** The matching lines of an opened file, which it closes. */
  async file({ handle, size }: ConfinedFile, display: string): Promise<void> {
    let content: Buffer;
    try {
      this.options.signal.throwIfAborted();
      if (this.more) return;
      if (size > this.options.maxFileBytes) {
        this.skippedLarge += 1;
        return;
      }
      content = await handle.readFile();
    } finally {
      await handle.close();
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
    const lines =
      this.results.length > 0 ? [...this.results] : [`no matches for ${JSON.stringify(pattern)} in ${start}`];
    if (this.more) {
      lines.push(`[truncated: more than ${this.options.maxResults} matches; narrow the pattern or the path]`);
    }
    const skipped: string[] = [];
    if (this.skippedLarge > 0) {
      skipped.push(`${this.skippedLarge} ${plural(this.skippedLarge, 'file')} over ${this.options.maxFileBytes} bytes`);
    }
    if (this.skippedOutside > 0) {
      skipped.push(`${this.skippedOutside} ${plural(this.skippedOutside, 'symlink')} leaving the working directory`);
    }
    if (skipped.length > 0) lines.push(`[skipped: ${skipped.join(', ')}]`);
    return lines.join('\n');
  }
}
