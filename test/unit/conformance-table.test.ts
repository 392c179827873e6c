// docs/conformance.md maps each clause of the seam spec's conformance list to the test that shows
// it. This keeps the table true: every test it names («title», after its file) exists there.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const table = readFileSync(join(ROOT, 'docs', 'conformance.md'), 'utf8');

/** Each row's named tests, as [file, title] pairs: a title belongs to the last file named before it. */
function namedTests(): [string, string][] {
  const named: [string, string][] = [];
  for (const row of table.split('\n').filter((line) => line.startsWith('| ') && line.includes('«'))) {
    let file: string | undefined;
    for (const match of row.matchAll(/`([^`]+\.test\.ts)`|«([^»]+)»/g)) {
      if (match[1]) file = match[1];
      else named.push([file!, match[2]!]);
    }
  }
  return named;
}

describe('the conformance table', () => {
  const named = namedTests();

  it('names tests for the clauses of §7.1 to §7.9 and §5.5', () => {
    for (const section of ['§7.1', '§7.2', '§7.3', '§7.4', '§7.6', '§7.8', '§7.9', '§5.5']) {
      expect(table).toContain(`## ${section}`);
    }
    expect(named.length).toBeGreaterThan(80);
  });

  it.each(named)('names a test that exists: %s › %s', (file, title) => {
    expect(existsSync(join(ROOT, file))).toBe(true);
    const source = readFileSync(join(ROOT, file), 'utf8').replaceAll("\\'", "'");
    expect(source.includes(`'${title}'`) || source.includes(`"${title}"`)).toBe(true);
  });
});
