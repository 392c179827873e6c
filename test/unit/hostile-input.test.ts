// Hostile input, a row per attack: what a model (or a prompt injection) or an ACP agent sends to
// get out of its working directory, freeze its worker or confuse its tools, and what it gets.
// docs/hostile-inputs.md lists every row by its test name (kept true by test/unit/conformance-table.test.ts).
// Property-based tests (fast-check) then throw random paths at the confinement and random values
// at the schema validator.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import type { SubagentToolContext, ToolCallOutcome } from '../../src';
import { snapshotOutputSchema, validateStructuredValue } from '../../src/structured/schema';
import { ConfinedRoot, ToolPathError, listDirectoryTool, readFileTool, searchTextTool } from '../../src/tools';

let base: string;
let cwd: string;
let outside: string;

beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), 'hostile-'));
  cwd = path.join(base, 'work');
  outside = path.join(base, 'outside');
  await fs.mkdir(path.join(cwd, 'inside'), { recursive: true });
  await fs.mkdir(outside);
  await fs.writeFile(path.join(cwd, 'notes.txt'), 'inside\n');
  await fs.writeFile(path.join(outside, 'secret.txt'), 'secret\n');
  await fs.symlink(path.join(outside, 'secret.txt'), path.join(cwd, 'secret-link'));
  await fs.symlink('secret-link', path.join(cwd, 'chain-1'));
  await fs.symlink('chain-1', path.join(cwd, 'chain-2'));
  await fs.symlink(outside, path.join(cwd, 'outside-dir'));
  await fs.symlink('notes.txt', path.join(cwd, 'inside-link'));
  await fs.symlink('/dev/zero', path.join(cwd, 'device-link'));
  await fs.symlink('/proc/self/environ', path.join(cwd, 'proc-link'));
  await fs.link(path.join(outside, 'secret.txt'), path.join(cwd, 'hard-link'));
  execFileSync('mkfifo', [path.join(cwd, 'fifo')]);
  await fs.writeFile(path.join(cwd, 'huge.txt'), Buffer.alloc(8 * 1024 * 1024, 'a'));
});

afterAll(() => fs.rm(base, { recursive: true, force: true }));

const context = (overrides: Partial<SubagentToolContext> = {}): SubagentToolContext => ({
  cwd,
  signal: new AbortController().signal,
  runId: 'run-hostile',
  callId: 'call-1',
  callKey: 'run-hostile/1',
  ...overrides,
});
const text = (outcome: ToolCallOutcome) => (outcome.content[0] as { text: string }).text;
const secretUntouched = async () =>
  expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');

describe('reads: the file tools refuse what leads out, and what is not a regular file', () => {
  it.each([
    ['a path climbing out with ..', '../outside/secret.txt', 'leaves the working directory'],
    ['an absolute path', '/etc/passwd', 'is absolute'],
    [
      'a symlink as the final component, leading out',
      'secret-link',
      'leaves the working directory through a symbolic link',
    ],
    ['a chain of symlinks leading out', 'chain-2', 'leaves the working directory through a symbolic link'],
    [
      'a symlinked directory leading out, then a file in it',
      'outside-dir/secret.txt',
      'leaves the working directory through a symbolic link',
    ],
    ['a symlink to a device', 'device-link', 'leaves the working directory through a symbolic link'],
    ['a symlink into /proc', 'proc-link', 'leaves the working directory through a symbolic link'],
    ['a FIFO (read at once, without blocking)', 'fifo', 'is not a regular file'],
    ['a NUL byte in the path', 'notes.txt\0.png', 'contains a NUL byte'],
  ])('read_file refuses %s', async (_, requested, refusal) => {
    const outcome = await readFileTool().execute({ path: requested }, context());
    expect(outcome.isError).toBe(true);
    expect(text(outcome)).toContain(refusal);
  });

  it('read_file follows a symlink that stays inside', async () => {
    expect(text(await readFileTool().execute({ path: 'inside-link' }, context()))).toContain('inside');
  });

  it('read_file cuts a huge file at its byte limit', async () => {
    const outcome = await readFileTool({ maxBytes: 1024 }).execute({ path: 'huge.txt' }, context());
    expect(text(outcome)).toMatch(/\[truncated: \d+ more bytes\]$/);
    expect(text(outcome).length).toBeLessThan(2048);
  });

  it('list_directory and search_text never show what lies outside', async () => {
    const listing = text(await listDirectoryTool().execute({}, context()));
    expect(listing).toContain('secret-link (symlink leaving the working directory)');
    expect(listing).toContain('outside-dir (symlink leaving the working directory)');
    const found = text(await searchTextTool().execute({ pattern: 'secret' }, context()));
    // (A hard link is a name inside the directory, so it is searched: see docs/threat-model.md.)
    expect(found.split('\n').filter((line) => /^(secret-link|chain-\d|outside-dir)/.test(line))).toEqual([]);
    expect(text(await listDirectoryTool().execute({ path: 'outside-dir' }, context()))).toContain(
      'leaves the working directory',
    );
  });

  it('refuses a working directory on /proc', async () => {
    const outcome = await readFileTool().execute({ path: 'environ' }, context({ cwd: '/proc/self' }));
    expect(text(outcome)).toContain('where file tools are not allowed');
  });

  it('reads from the directory it opened even when a symlink is swapped in for it afterwards', async () => {
    // The check is on the handle, not the path: the opened directory is what is read.
    const swapped = path.join(cwd, 'swapped');
    await fs.mkdir(swapped);
    await fs.writeFile(path.join(swapped, 'secret.txt'), 'mine\n');
    const directory = await (await ConfinedRoot.open(cwd)).openDirectory('swapped');
    await fs.rename(swapped, path.join(cwd, 'swapped-away'));
    await fs.symlink(outside, swapped);
    const file = await directory.openFile('secret.txt');
    expect((await file.handle.readFile()).toString()).toBe('mine\n');
    await file.handle.close();
    await directory.close();
  });
});

describe('writes: ConfinedRoot.writeFile (the ACP file system) refuses what leads out', () => {
  it.each([
    ['a path climbing out with ..', '../outside/secret.txt', 'leaves the working directory'],
    ['a symlink as the final component', 'secret-link', 'is a symbolic link'],
    ['a symlink as the final component, even one that stays inside', 'inside-link', 'is a symbolic link'],
    [
      'a symlinked directory leading out',
      'outside-dir/secret.txt',
      'leaves the working directory through a symbolic link',
    ],
    [
      'a new file under a symlinked directory leading out',
      'outside-dir/new/planted.txt',
      'leaves the working directory through a symbolic link',
    ],
    ['a hard link to a file outside', 'hard-link', 'has another name (a hard link)'],
    ['a FIFO', 'fifo', 'is not a regular file'],
    ['the working directory itself', '.', 'is the working directory'],
  ])('refuses %s, and writes nothing outside', async (_, requested, refusal) => {
    const root = await ConfinedRoot.open(cwd);
    await expect(root.writeFile(requested, 'planted\n')).rejects.toThrow(refusal);
    await secretUntouched();
    await expect(fs.stat(path.join(outside, 'new'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(fs.stat(path.join(outside, 'planted.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('writes a file into new subdirectories inside', async () => {
    const root = await ConfinedRoot.open(cwd);
    await root.writeFile('made/deep/down.txt', 'written\n');
    expect(await fs.readFile(path.join(cwd, 'made', 'deep', 'down.txt'), 'utf8')).toBe('written\n');
    await root.writeFile('made/deep/down.txt', 'again\n');
    expect(await fs.readFile(path.join(cwd, 'made', 'deep', 'down.txt'), 'utf8')).toBe('again\n');
  });
});

describe('pathological regular expressions: search_text matches in linear time', () => {
  it.each([['^(a|a)+$'], ['(a*)*b'], ['(x+x+)+y'], ['^(([a-z])+.)+[A-Z]([a-z])+$']])(
    'returns for %s over a long line',
    async (pattern) => {
      const own = await fs.mkdtemp(path.join(base, 'regex-'));
      await fs.writeFile(path.join(own, 'line.txt'), `${'a'.repeat(4000)}${'x'.repeat(4000)}!\n`);
      const outcome = await searchTextTool().execute({ pattern, regex: true }, context({ cwd: own }));
      expect(outcome.isError).toBe(false);
    },
  );

  it.each([['(a)\\1'], ['(?=a)b'], ['(?<!a)b']])(
    'refuses %s (RE2 has no backreferences or lookaround)',
    async (pattern) => {
      const outcome = await searchTextTool().execute({ pattern, regex: true }, context());
      expect(text(outcome)).toContain('not a regular expression in RE2 syntax');
    },
  );
});

describe('malformed tool arguments: the model reads what was wrong', () => {
  it.each([
    ['a path that is not a string', readFileTool(), { path: 42 }, '"path" must be a string'],
    ['no arguments object', readFileTool(), 'notes.txt', 'expected a JSON object of named arguments'],
    ['an offset of zero', readFileTool(), { path: 'notes.txt', offset: 0 }, '"offset" must be a positive integer'],
    ['an empty pattern', searchTextTool(), { pattern: '' }, '"pattern" must not be empty'],
    [
      'a regex flag that is not a boolean',
      searchTextTool(),
      { pattern: 'x', regex: 'yes' },
      '"regex" must be a boolean',
    ],
  ])('refuses %s', async (_, tool, args, refusal) => {
    const outcome = await tool.execute(args, context());
    expect(outcome.isError).toBe(true);
    expect(text(outcome)).toContain(refusal);
  });
});

describe('properties', () => {
  const segments = fc.constantFrom(
    'inside',
    'notes.txt',
    '..',
    '.',
    'secret-link',
    'outside-dir',
    'chain-2',
    'inside-link',
    'x',
  );

  it('no path of any shape opens anything outside the working directory', async () => {
    const root = await ConfinedRoot.open(cwd);
    const realCwd = await fs.realpath(cwd);
    await fc.assert(
      fc.asyncProperty(fc.array(segments, { minLength: 1, maxLength: 6 }), async (parts) => {
        const requested = parts.join('/');
        try {
          const file = await root.openFile(requested);
          await file.handle.close();
          expect(path.relative(realCwd, file.real).startsWith('..')).toBe(false);
        } catch (error) {
          expect(error).toBeInstanceOf(ToolPathError);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('no write of any shape creates or changes anything outside', async () => {
    const root = await ConfinedRoot.open(cwd);
    await fc.assert(
      fc.asyncProperty(fc.array(segments, { minLength: 1, maxLength: 5 }), async (parts) => {
        await root.writeFile(parts.join('/'), 'planted\n').catch((error: unknown) => {
          expect(error).toBeInstanceOf(ToolPathError);
        });
        expect((await fs.readdir(outside)).sort()).toEqual(['secret.txt']);
        await secretUntouched();
      }),
      { numRuns: 200 },
    );
  });

  it('the schema validator answers every value with a list of violations, and never throws', () => {
    const schema = snapshotOutputSchema({
      type: 'object',
      properties: {
        name: { type: 'string' },
        tags: { type: 'array', items: { type: 'string' } },
        n: { type: 'integer' },
      },
      required: ['name'],
      additionalProperties: false,
    });
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const violations = validateStructuredValue(schema, value);
        expect(Array.isArray(violations)).toBe(true);
        const conforming =
          typeof value === 'object' &&
          value !== null &&
          !Array.isArray(value) &&
          typeof (value as { name?: unknown }).name === 'string';
        if (!conforming) expect(violations.length).toBeGreaterThan(0);
      }),
      { numRuns: 500 },
    );
  });

  it('the schema validator accepts every value built to match', () => {
    const schema = snapshotOutputSchema({
      type: 'object',
      properties: {
        name: { type: 'string' },
        tags: { type: 'array', items: { type: 'string' } },
        n: { type: 'integer' },
      },
      required: ['name'],
      additionalProperties: false,
    });
    const matching = fc.record(
      { name: fc.string(), tags: fc.array(fc.string()), n: fc.integer() },
      { requiredKeys: ['name'] },
    );
    fc.assert(
      fc.property(matching, (value) => expect(validateStructuredValue(schema, value)).toEqual([])),
      { numRuns: 500 },
    );
  });
});
