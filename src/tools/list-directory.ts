// `list_directory`: the entries of one directory inside the working directory, symlinks shown as
// what they point to when that stays inside it.
import type { Dirent } from 'node:fs';
import { type SubagentTool, confinedFileTool, toolResult } from '../seam/tool';
import { argumentObject, compareNames, positiveIntegerOption, runTool, stringArgument } from './common';
import { type ConfinedDirectory, NotDirectoryError } from './confine';

/**
 * `list_directory`: the entries of one directory inside the working directory, one a line,
 * sorted by name, directories with a trailing `/`. A symlink shows as what it points to when
 * that is inside the working directory, and is marked when it leaves it or is broken. At most
 * `maxEntries` (default 500) are shown, then `[truncated: N more entries]`. Refuses a path
 * that is not a directory.
 */
export function listDirectoryTool(options: { maxEntries?: number } = {}): SubagentTool {
  const maxEntries = positiveIntegerOption('maxEntries', options.maxEntries, 500);
  return confinedFileTool({
    name: 'list_directory',
    // Read-only and quick: it runs inside the model call that asked for it.
    inline: true,
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
      runTool(context, async (root) => {
        const input = argumentObject(args);
        const requested = stringArgument(input, 'path', false) ?? '.';
        let directory: ConfinedDirectory;
        try {
          directory = await root.openDirectory(requested);
        } catch (error) {
          if (error instanceof NotDirectoryError) {
            return toolResult(
              `${JSON.stringify(root.display(requested))} is not a directory; use read_file to read a file`,
              true,
            );
          }
          throw error;
        }
        try {
          const entries = [...directory.entries].sort((a, b) => compareNames(a.name, b.name));
          if (entries.length === 0) return toolResult('(empty directory)');
          const shown = entries.slice(0, maxEntries);
          const lines: string[] = [];
          for (const entry of shown) lines.push(await describeEntry(entry, directory));
          if (entries.length > shown.length) lines.push(`[truncated: ${entries.length - shown.length} more entries]`);
          return toolResult(lines.join('\n'));
        } finally {
          await directory.close();
        }
      }),
  });
}

async function describeEntry(entry: Dirent, directory: ConfinedDirectory): Promise<string> {
  if (entry.isDirectory()) return `${entry.name}/`;
  if (!entry.isSymbolicLink()) return entry.name;
  const followed = await directory.kind(entry.name);
  if (followed.kind === 'outside') return `${entry.name} (symlink leaving the working directory)`;
  if (followed.kind === 'missing') return `${entry.name} (broken symlink)`;
  return followed.kind === 'directory' ? `${entry.name}/` : entry.name;
}
