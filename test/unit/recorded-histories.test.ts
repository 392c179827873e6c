// Recorded workflow histories and frozen workflow builds are append-only: each directory's
// manifest names every file with its SHA-256, and the manifest itself only ever grows, commit
// after commit. So a recording that is modified or deleted fails here, whether or not its line
// was edited to match.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const RECORDS = [
  { dir: join(ROOT, 'test', 'histories'), manifest: 'RECORDED.sha256', ext: '.json' },
  { dir: join(ROOT, 'test', 'fixtures', 'builds'), manifest: 'FROZEN.sha256', ext: '.js' },
];

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26 });

/** `name -> sha256` from a manifest's text (`sha256sum` lines; `#` lines are comments). */
function entries(text: string): Map<string, string> {
  const lines = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
  return new Map(
    lines.map((line) => {
      const [hash, name] = line.split(/\s+\*?/, 2) as [string, string];
      return [name, hash];
    }),
  );
}

describe.each(RECORDS)('$manifest', ({ dir, manifest, ext }) => {
  const path = join(dir, manifest);
  const current = readFileSync(path, 'utf8');

  it('names every file in its directory, each with the SHA-256 it has', () => {
    const listed = entries(current);
    const files = readdirSync(dir).filter((name) => name.endsWith(ext));
    expect([...listed.keys()].sort()).toEqual(files.sort());
    const changed = files.filter(
      (name) =>
        createHash('sha256')
          .update(readFileSync(join(dir, name)))
          .digest('hex') !== listed.get(name),
    );
    expect(changed).toEqual([]);
  });

  it('only grows: every committed version of it is a beginning of the current one', () => {
    const manifestPath = relative(ROOT, path);
    const commits = git('log', '--format=%H', '--', manifestPath).split('\n').filter(Boolean);
    const rewritten = commits.filter((commit) => !current.startsWith(git('show', `${commit}:${manifestPath}`)));
    expect(rewritten).toEqual([]);
  });
});
