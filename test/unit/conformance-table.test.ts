// docs/conformance.md maps each clause of the seam spec's conformance list to the test that shows
// it, and docs/hostile-inputs.md each hostile input to its. This keeps both tables true: every
// test they name («title», after its file) exists there.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const read = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');
const table = read('conformance.md');

/** Each row's named tests, as [file, title] pairs: a title belongs to the last file named before it. */
function namedTests(text: string): [string, string][] {
  const named: [string, string][] = [];
  for (const row of text.split('\n').filter((line) => line.startsWith('| ') && line.includes('«'))) {
    let file: string | undefined;
    for (const match of row.matchAll(/`([^`]+\.test\.ts)`|«([^»]+)»/g)) {
      if (match[1]) file = match[1];
      else named.push([file!, match[2]!]);
    }
  }
  return named;
}

const exists = ([file, title]: [string, string]) => {
  expect(existsSync(join(ROOT, file))).toBe(true);
  const source = readFileSync(join(ROOT, file), 'utf8').replaceAll("\\'", "'");
  expect(source.includes(`'${title}'`) || source.includes(`"${title}"`)).toBe(true);
};

describe('the hostile-input table', () => {
  const named = namedTests(read('hostile-inputs.md'));

  it('names a test for each kind of input', () => {
    expect(named.length).toBeGreaterThan(30);
  });

  it.each(named)('names a test that exists: %s › %s', (file, title) => exists([file, title]));
});

describe('the conformance table', () => {
  const named = namedTests(table);

  it('names tests for the clauses of §7.1 to §7.9 and §5.5', () => {
    for (const section of ['§7.1', '§7.2', '§7.3', '§7.4', '§7.6', '§7.8', '§7.9', '§5.5']) {
      expect(table).toContain(`## ${section}`);
    }
    expect(named.length).toBeGreaterThan(80);
  });

  it.each(named)('names a test that exists: %s › %s', (file, title) => exists([file, title]));
});
