// jemalloc for figure 6's allocator setting (a worker run with it as LD_PRELOAD): the system's
// libjemalloc.so.2 if it has one, else Debian's package, pinned, unpacked under .tools/ (apt-get
// download and dpkg-deb need no root). On a machine with neither, the reason instead.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PACKAGE = 'libjemalloc2=5.3.0-1';
const LIBRARY = 'libjemalloc.so.2';
const LIB_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];
const unpacked = join(__dirname, '..', '.tools', PACKAGE.replace('=', '-'));

/** Where a library is under `root`'s lib directories, if anywhere. */
function findUnder(root: string): string | undefined {
  return LIB_DIRS.map((dir) => join(root, dir, LIBRARY)).find((path) => existsSync(path));
}

export function jemalloc(): { path: string } | { missing: string } {
  const found = findUnder('/') ?? findUnder(unpacked);
  if (found) return { path: found };
  const scratch = mkdtempSync(join(tmpdir(), 'jemalloc-'));
  try {
    execFileSync('apt-get', ['download', '-q', PACKAGE], { cwd: scratch, stdio: 'ignore' });
    const deb = readdirSync(scratch).find((name) => name.endsWith('.deb'));
    if (!deb) return { missing: `apt-get download ${PACKAGE} gave no package` };
    mkdirSync(unpacked, { recursive: true });
    execFileSync('dpkg-deb', ['-x', join(scratch, deb), unpacked]);
    const path = findUnder(unpacked);
    return path ? { path } : { missing: `${PACKAGE} holds no ${LIBRARY}` };
  } catch (err) {
    return { missing: `neither ${LIBRARY} nor apt-get download ${PACKAGE}: ${(err as Error).message.split('\n')[0]}` };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
