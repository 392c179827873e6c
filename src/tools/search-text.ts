// `search_text`: every line under a path inside the working directory that holds a literal or
// matches a regular expression, walking the tree within the confinement and the limits.
import type { Dirent, Stats } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { RE2JS } from 're2js';
import { type SubagentTool, toolResult } from '../seam/tool';
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
import { displayPath, fsRefusal, isInside, isSkippableFsError, resolveInside } from './confine';

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
  return {
    name: 'search_text',
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
      runTool(context, async (cwd) => {
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
        return toolResult(search.report(pattern, start));
      }),
  };
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
