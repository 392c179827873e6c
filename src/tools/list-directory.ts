// `list_directory`: the entries of one directory inside the working directory, symlinks shown as
// what they point to when that stays inside it.
import type { Dirent } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { type SubagentTool, toolResult } from '../seam/tool';
import { argumentObject, compareNames, positiveIntegerOption, runTool, stringArgument } from './common';
import { displayPath, errorCode, fsRefusal, isInside, isSkippableFsError, resolveInside } from './confine';

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
            return toolResult(
              `${JSON.stringify(displayPath(cwd, requested))} is not a directory; use read_file to read a file`,
              true,
            );
          }
          throw fsRefusal(error, requested) ?? error;
        }
        entries.sort((a, b) => compareNames(a.name, b.name));
        if (entries.length === 0) return toolResult('(empty directory)');
        const shown = entries.slice(0, maxEntries);
        const lines: string[] = [];
        for (const entry of shown) lines.push(await describeEntry(entry, real, realRoot));
        if (entries.length > shown.length) lines.push(`[truncated: ${entries.length - shown.length} more entries]`);
        return toolResult(lines.join('\n'));
      }),
  };
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
