// The built-in file tools against a real temporary tree: what each tool returns, and every way a
// path can try to leave the working directory (absolute, `..`, symlinks, NUL bytes).
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ToolCallOutcome, SubagentTool, SubagentToolContext } from '../../src';
import {
  listDirectoryTool,
  ConfinedRoot,
  NO_WORKING_DIRECTORY_MESSAGE,
  readFileTool,
  searchTextTool,
  ToolPathError,
} from '../../src/tools';
import { builtinFileTools } from '../../src/worker';

let base: string;
let cwd: string;
let outside: string;

beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), 'file-tools-'));
  cwd = path.join(base, 'work');
  outside = path.join(base, 'outside');
  await fs.mkdir(path.join(cwd, 'src', 'lib'), { recursive: true });
  await fs.mkdir(path.join(cwd, 'empty'));
  await fs.mkdir(path.join(cwd, 'node_modules', 'pkg'), { recursive: true });
  await fs.mkdir(path.join(cwd, '.git'));
  await fs.mkdir(outside);

  await fs.writeFile(path.join(cwd, 'notes.txt'), 'alpha\nbeta\ngamma\ndelta\n');
  await fs.writeFile(
    path.join(cwd, 'src', 'index.ts'),
    "import { helper } from '../lib/util';\nexport const answer = helper(42);\n",
  );
  await fs.writeFile(
    path.join(cwd, 'src', 'lib', 'util.ts'),
    'export function helper(n: number) {\n  return n * 2;\n}\n',
  );
  await fs.writeFile(path.join(cwd, 'node_modules', 'pkg', 'index.js'), 'export const helper = 1;\n');
  await fs.writeFile(path.join(cwd, '.git', 'config'), 'helper = git\n');
  await fs.writeFile(
    path.join(cwd, 'image.bin'),
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72]),
  );
  await fs.writeFile(path.join(cwd, 'big.txt'), `${'x'.repeat(99)}\n`.repeat(1000));
  await fs.writeFile(path.join(cwd, 'no-eol.txt'), 'one\ntwo');
  await fs.writeFile(path.join(cwd, 'empty.txt'), '');
  await fs.writeFile(path.join(cwd, 'wide.txt'), 'é'.repeat(10));
  await fs.writeFile(path.join(outside, 'secret.txt'), 'helper secret\n');

  await fs.symlink(path.join(cwd, 'notes.txt'), path.join(cwd, 'notes-link'));
  await fs.symlink('src', path.join(cwd, 'src-link'));
  await fs.symlink(path.join(outside, 'secret.txt'), path.join(cwd, 'secret-link'));
  await fs.symlink(outside, path.join(cwd, 'outside-dir'));
  await fs.symlink(path.join(cwd, 'missing.txt'), path.join(cwd, 'broken-link'));
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

function context(overrides: Partial<SubagentToolContext> = {}): SubagentToolContext {
  const ids = { runId: 'run-file-tools', callId: 'call-1', callKey: 'run-1/1' };
  return { cwd, signal: new AbortController().signal, ...ids, ...overrides };
}

function textOf(outcome: ToolCallOutcome): string {
  expect(outcome.content).toHaveLength(1);
  const block = outcome.content[0]!;
  if (block.type !== 'text') throw new Error(`expected a text block, got ${block.type}`);
  return block.text;
}

async function expectOk(tool: SubagentTool, args: unknown): Promise<string> {
  const outcome = await tool.execute(args, context());
  expect(outcome.isError).toBe(false);
  return textOf(outcome);
}

async function expectRefused(tool: SubagentTool, args: unknown, ctx: SubagentToolContext = context()): Promise<string> {
  const outcome = await tool.execute(args, ctx);
  expect(outcome.isError).toBe(true);
  return textOf(outcome);
}

const read = readFileTool();
const list = listDirectoryTool();
const search = searchTextTool();

describe('builtinFileTools', () => {
  test('returns read_file, list_directory and search_text with object parameter schemas', () => {
    const tools = builtinFileTools();
    expect(tools.map((tool) => tool.name)).toEqual(['read_file', 'list_directory', 'search_text']);
    for (const tool of tools) {
      expect(tool.parameters.type).toBe('object');
      expect(tool.description.length).toBeGreaterThan(0);
    }
  });

  test('rejects a non-positive limit option at construction', () => {
    expect(() => readFileTool({ maxBytes: 0 })).toThrow(RangeError);
    expect(() => searchTextTool({ maxResults: 1.5 })).toThrow(RangeError);
  });
});

describe('ConfinedRoot', () => {
  const opened = async (requested: string) => {
    const file = await (await ConfinedRoot.open(cwd)).openFile(requested);
    await file.handle.close();
    return file.real;
  };

  test('opens a relative path and knows where the opened file really is', async () => {
    const realCwd = await fs.realpath(cwd);
    await expect(opened('src/../notes.txt')).resolves.toBe(path.join(realCwd, 'notes.txt'));
    const root = await ConfinedRoot.open(cwd);
    const directory = await root.openDirectory('.');
    await directory.close();
    expect(directory.real).toBe(realCwd);
  });

  test('follows a symlink that stays inside to its target', async () => {
    await expect(opened('src-link/lib/util.ts')).resolves.toBe(
      path.join(await fs.realpath(cwd), 'src', 'lib', 'util.ts'),
    );
  });

  test('throws ToolPathError for every escape', async () => {
    await expect(opened('../outside/secret.txt')).rejects.toThrow(ToolPathError);
    await expect(opened('secret-link')).rejects.toThrow(ToolPathError);
    await expect(opened(path.join(cwd, 'notes.txt'))).rejects.toThrow(ToolPathError);
  });

  test('refuses a relative working directory', async () => {
    await expect(ConfinedRoot.open('relative/dir')).rejects.toThrow(
      'the working directory "relative/dir" is not an absolute path',
    );
  });

  test('refuses a working directory that does not exist on this worker', async () => {
    await expect(ConfinedRoot.open(path.join(base, 'gone'))).rejects.toThrow('does not exist on this worker');
  });
});

describe('read_file', () => {
  test('returns the whole file under a header naming the lines', async () => {
    expect(await expectOk(read, { path: 'notes.txt' })).toBe(
      'File notes.txt, lines 1-4 (end of file):\nalpha\nbeta\ngamma\ndelta\n',
    );
  });

  test('reads the line range given by offset and limit', async () => {
    expect(await expectOk(read, { path: 'notes.txt', offset: 2, limit: 2 })).toBe(
      'File notes.txt, lines 2-3:\nbeta\ngamma\n',
    );
    expect(await expectOk(read, { path: 'notes.txt', offset: 3 })).toBe(
      'File notes.txt, lines 3-4 (end of file):\ngamma\ndelta\n',
    );
    expect(await expectOk(read, { path: 'notes.txt', limit: 1 })).toBe('File notes.txt, lines 1-1:\nalpha\n');
  });

  test('reads a last line that has no trailing newline', async () => {
    expect(await expectOk(read, { path: 'no-eol.txt', offset: 2 })).toBe(
      'File no-eol.txt, lines 2-2 (end of file):\ntwo',
    );
  });

  test('refuses an offset past the end of the file', async () => {
    expect(await expectRefused(read, { path: 'notes.txt', offset: 5 })).toBe(
      '"offset" 5 is past the end of "notes.txt" (4 lines)',
    );
    expect(await expectRefused(read, { path: 'notes.txt', offset: 9, limit: 3 })).toBe(
      '"offset" 9 is past the end of "notes.txt" (4 lines)',
    );
  });

  test('says so for an empty file', async () => {
    expect(await expectOk(read, { path: 'empty.txt' })).toBe('File empty.txt is empty.');
  });

  test('truncates at the default 64 KiB on a line end and reports the remaining bytes', async () => {
    const text = await expectOk(read, { path: 'big.txt' });
    const shownLines = Math.floor((64 * 1024) / 100);
    expect(text.startsWith(`File big.txt, lines 1-${shownLines}:\n`)).toBe(true);
    expect(text.endsWith(`\n[truncated: ${100_000 - shownLines * 100} more bytes]`)).toBe(true);
  });

  test('truncates a selection at maxBytes and counts only the unread bytes of that selection', async () => {
    const small = readFileTool({ maxBytes: 250 });
    const text = await expectOk(small, { path: 'big.txt', offset: 11, limit: 5 });
    expect(text).toBe(`File big.txt, lines 11-12:\n${'x'.repeat(99)}\n${'x'.repeat(99)}\n[truncated: 300 more bytes]`);
  });

  test('cuts a single over-long line at a character boundary', async () => {
    const text = await expectOk(readFileTool({ maxBytes: 5 }), { path: 'wide.txt' });
    expect(text).toBe('File wide.txt, lines 1-1:\néé\n[truncated: 16 more bytes]');
  });

  test('reads through a symlink that points inside the working directory', async () => {
    expect(await expectOk(read, { path: 'notes-link', limit: 1 })).toBe('File notes-link, lines 1-1:\nalpha\n');
  });

  test('refuses a directory', async () => {
    expect(await expectRefused(read, { path: 'src' })).toBe('"src" is a directory; use list_directory to list it');
  });

  test('refuses a binary file', async () => {
    expect(await expectRefused(read, { path: 'image.bin' })).toBe(
      '"image.bin" looks like a binary file; read_file reads text only',
    );
  });

  test('refuses an absolute path even when it points inside the working directory', async () => {
    const requested = path.join(cwd, 'notes.txt');
    expect(await expectRefused(read, { path: requested })).toBe(
      `path ${JSON.stringify(requested)} is absolute; use a path relative to the working directory`,
    );
  });

  test('refuses a .. path that leaves the working directory', async () => {
    expect(await expectRefused(read, { path: '../outside/secret.txt' })).toBe(
      'path "../outside/secret.txt" leaves the working directory',
    );
    expect(await expectRefused(read, { path: 'src/../../outside/secret.txt' })).toBe(
      'path "src/../../outside/secret.txt" leaves the working directory',
    );
  });

  test('accepts a .. path that stays inside', async () => {
    expect(await expectOk(read, { path: 'src/lib/../../notes.txt', limit: 1 })).toBe(
      'File notes.txt, lines 1-1:\nalpha\n',
    );
  });

  test('refuses a symlink that points outside the working directory', async () => {
    expect(await expectRefused(read, { path: 'secret-link' })).toBe(
      'path "secret-link" leaves the working directory through a symbolic link',
    );
    expect(await expectRefused(read, { path: 'outside-dir/secret.txt' })).toBe(
      'path "outside-dir/secret.txt" leaves the working directory through a symbolic link',
    );
  });

  test('refuses a path with a NUL byte', async () => {
    expect(await expectRefused(read, { path: 'notes.txt\0.png' })).toBe(
      'path "notes.txt\\u0000.png" contains a NUL byte',
    );
  });

  test('refuses a path that does not exist', async () => {
    expect(await expectRefused(read, { path: 'src/missing.ts' })).toBe('no such file or directory: src/missing.ts');
    expect(await expectRefused(read, { path: 'notes.txt/child' })).toBe('no such file or directory: notes.txt/child');
    expect(await expectRefused(read, { path: 'broken-link' })).toBe('no such file or directory: broken-link');
  });

  test('refuses bad argument types', async () => {
    expect(await expectRefused(read, 'notes.txt')).toBe('invalid arguments: expected a JSON object of named arguments');
    expect(await expectRefused(read, null)).toBe('invalid arguments: expected a JSON object of named arguments');
    expect(await expectRefused(read, ['notes.txt'])).toBe(
      'invalid arguments: expected a JSON object of named arguments',
    );
    expect(await expectRefused(read, {})).toBe('invalid arguments: "path" must be a string');
    expect(await expectRefused(read, { path: 7 })).toBe('invalid arguments: "path" must be a string');
    expect(await expectRefused(read, { path: 'notes.txt', offset: 0 })).toBe(
      'invalid arguments: "offset" must be a positive integer (a 1-based line number)',
    );
    expect(await expectRefused(read, { path: 'notes.txt', offset: '2' })).toContain(
      '"offset" must be a positive integer',
    );
    expect(await expectRefused(read, { path: 'notes.txt', limit: 1.5 })).toBe(
      'invalid arguments: "limit" must be a positive integer (a number of lines)',
    );
  });
});

describe('list_directory', () => {
  test('lists the working directory sorted, directories and inside symlinks to directories with a trailing slash', async () => {
    const text = await expectOk(list, {});
    expect(text.split('\n')).toEqual([
      '.git/',
      'big.txt',
      'broken-link (broken symlink)',
      'empty/',
      'empty.txt',
      'image.bin',
      'no-eol.txt',
      'node_modules/',
      'notes-link',
      'notes.txt',
      'outside-dir (symlink leaving the working directory)',
      'secret-link (symlink leaving the working directory)',
      'src/',
      'src-link/',
      'wide.txt',
    ]);
  });

  test('lists a nested directory', async () => {
    expect(await expectOk(list, { path: 'src' })).toBe('index.ts\nlib/');
    expect(await expectOk(list, { path: 'src-link/lib' })).toBe('util.ts');
  });

  test('says so for an empty directory', async () => {
    expect(await expectOk(list, { path: 'empty' })).toBe('(empty directory)');
  });

  test('caps the listing at maxEntries with a note', async () => {
    const text = await expectOk(listDirectoryTool({ maxEntries: 3 }), { path: '.' });
    expect(text).toBe('.git/\nbig.txt\nbroken-link (broken symlink)\n[truncated: 12 more entries]');
  });

  test('refuses a file', async () => {
    expect(await expectRefused(list, { path: 'notes.txt' })).toBe(
      '"notes.txt" is not a directory; use read_file to read a file',
    );
  });

  test('refuses a symlink to a directory outside the working directory', async () => {
    expect(await expectRefused(list, { path: 'outside-dir' })).toBe(
      'path "outside-dir" leaves the working directory through a symbolic link',
    );
  });

  test('refuses absolute, escaping, NUL and missing paths', async () => {
    expect(await expectRefused(list, { path: cwd })).toContain('use a path relative to the working directory');
    expect(await expectRefused(list, { path: '..' })).toBe('path ".." leaves the working directory');
    expect(await expectRefused(list, { path: 'src\0' })).toBe('path "src\\u0000" contains a NUL byte');
    expect(await expectRefused(list, { path: 'nowhere' })).toBe('no such file or directory: nowhere');
  });

  test('refuses bad argument types', async () => {
    expect(await expectRefused(list, { path: ['src'] })).toBe('invalid arguments: "path" must be a string');
    expect(await expectRefused(list, 42)).toBe('invalid arguments: expected a JSON object of named arguments');
  });
});

describe('search_text', () => {
  test('finds a literal substring case-sensitively, skipping node_modules, .git, binaries and outside symlinks', async () => {
    const text = await expectOk(search, { pattern: 'helper' });
    expect(text).toBe(
      [
        "src/index.ts:1: import { helper } from '../lib/util';",
        'src/index.ts:2: export const answer = helper(42);',
        'src/lib/util.ts:1: export function helper(n: number) {',
        '[skipped: 2 symlinks leaving the working directory]',
      ].join('\n'),
    );
    expect(await expectOk(search, { pattern: 'HELPER' })).toBe(
      'no matches for "HELPER" in .\n[skipped: 2 symlinks leaving the working directory]',
    );
  });

  test('treats regex metacharacters literally unless regex is true', async () => {
    expect(await expectOk(search, { pattern: 'helper(4', path: 'src' })).toBe(
      'src/index.ts:2: export const answer = helper(42);',
    );
    expect(await expectOk(search, { pattern: 'n \\* \\d', path: 'src', regex: true })).toBe(
      'src/lib/util.ts:2:   return n * 2;',
    );
    expect(await expectOk(search, { pattern: '^(alpha|delta)$', path: 'notes.txt', regex: true })).toBe(
      'notes.txt:1: alpha\nnotes.txt:4: delta',
    );
  });

  test('searches under a symlinked directory inside the working directory by its own name', async () => {
    expect(await expectOk(search, { pattern: 'return', path: 'src-link' })).toBe(
      'src-link/lib/util.ts:2:   return n * 2;',
    );
  });

  test('refuses an invalid regular expression, and what RE2 does not do (backreferences, lookaround)', async () => {
    for (const pattern of ['helper(', '(a)\\1', '(?=a)b']) {
      expect(await expectRefused(search, { pattern, regex: true })).toContain(
        'invalid arguments: "pattern" is not a regular expression in RE2 syntax (no backreferences or lookaround):',
      );
    }
  });

  test('matches a pathological pattern in linear time: `^(a|a)+$` over a long line returns', async () => {
    // A backtracking engine takes 2^n steps here; this test would not finish (nor would the worker).
    const own = await fs.mkdtemp(path.join(base, 'pathological-'));
    await fs.writeFile(path.join(own, 'line.txt'), `${'a'.repeat(5000)}b\n`);
    const outcome = await search.execute({ pattern: '^(a|a)+$', regex: true }, context({ cwd: own }));
    expect(textOf(outcome)).toBe('no matches for "^(a|a)+$" in .');
  });

  test('caps the results at maxResults with a note', async () => {
    const text = await expectOk(searchTextTool({ maxResults: 2 }), { pattern: 'a', path: 'notes.txt' });
    expect(text).toBe(
      'notes.txt:1: alpha\nnotes.txt:2: beta\n[truncated: more than 2 matches; narrow the pattern or the path]',
    );
  });

  test('skips files larger than maxFileBytes and says how many', async () => {
    const text = await expectOk(searchTextTool({ maxFileBytes: 1024 }), { pattern: 'xxxx', path: '.' });
    expect(text).toBe(
      'no matches for "xxxx" in .\n[skipped: 1 file over 1024 bytes, 2 symlinks leaving the working directory]',
    );
  });

  test('refuses a start path that leaves the working directory', async () => {
    expect(await expectRefused(search, { pattern: 'secret', path: 'outside-dir' })).toBe(
      'path "outside-dir" leaves the working directory through a symbolic link',
    );
    expect(await expectRefused(search, { pattern: 'secret', path: '../outside' })).toBe(
      'path "../outside" leaves the working directory',
    );
    expect(await expectRefused(search, { pattern: 'secret', path: outside })).toContain('is absolute');
    expect(await expectRefused(search, { pattern: 'secret', path: 'a\0b' })).toBe(
      'path "a\\u0000b" contains a NUL byte',
    );
    expect(await expectRefused(search, { pattern: 'secret', path: 'nowhere' })).toBe(
      'no such file or directory: nowhere',
    );
  });

  test('refuses bad argument types', async () => {
    expect(await expectRefused(search, {})).toBe('invalid arguments: "pattern" must be a string');
    expect(await expectRefused(search, { pattern: 3 })).toBe('invalid arguments: "pattern" must be a string');
    expect(await expectRefused(search, { pattern: '' })).toBe('invalid arguments: "pattern" must not be empty');
    expect(await expectRefused(search, { pattern: 'x', regex: 'yes' })).toBe(
      'invalid arguments: "regex" must be a boolean',
    );
    expect(await expectRefused(search, { pattern: 'x', path: 1 })).toBe('invalid arguments: "path" must be a string');
  });

  test('rejects with the signal reason when the run is already cancelled', async () => {
    const controller = new AbortController();
    const reason = new Error('run cancelled');
    controller.abort(reason);
    await expect(search.execute({ pattern: 'helper' }, context({ signal: controller.signal }))).rejects.toBe(reason);
  });
});

describe('without a working directory', () => {
  test.each([
    ['read_file', read, { path: 'notes.txt' }],
    ['list_directory', list, {}],
    ['search_text', search, { pattern: 'helper' }],
  ] as const)('%s refuses every call', async (_name, tool, args) => {
    expect(await expectRefused(tool, args, context({ cwd: undefined }))).toBe(NO_WORKING_DIRECTORY_MESSAGE);
    expect(NO_WORKING_DIRECTORY_MESSAGE).toBe('this run has no working directory, so file tools are unavailable');
  });
});
