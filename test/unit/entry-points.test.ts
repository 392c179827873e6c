// The entry points by process: a process that only starts and watches runs (the caller's entry)
// never loads the Temporal worker's native runtime; the worker entry does. Each is loaded in a
// fresh Node process, which reports every module it loaded.
import { execFile } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const TSX = pathToFileURL(require.resolve('tsx')).href;

/** The modules a fresh Node process has loaded once it has required `entry`. */
async function modulesLoadedBy(entry: string): Promise<string[]> {
  const script = `require(${JSON.stringify(entry)}); console.log(JSON.stringify(Object.keys(require.cache)));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', TSX, '-e', script], { cwd: ROOT });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as string[];
}

const fromPackage = (name: string) => (module: string) => module.includes(`/node_modules/${name}/`);

describe('entry points', () => {
  it('the caller entry (durable-subagents) loads neither @temporalio/worker nor the native core bridge', async () => {
    const loaded = await modulesLoadedBy(join(ROOT, 'src', 'index.ts'));
    expect(loaded.some(fromPackage('@temporalio/client'))).toBe(true);
    expect(loaded.filter(fromPackage('@temporalio/worker'))).toEqual([]);
    expect(loaded.filter(fromPackage('@temporalio/core-bridge'))).toEqual([]);
  });

  it('the worker entry (durable-subagents/worker) does load @temporalio/worker, so the check above can fail', async () => {
    const loaded = await modulesLoadedBy(join(ROOT, 'src', 'worker', 'index.ts'));
    expect(loaded.some(fromPackage('@temporalio/worker'))).toBe(true);
  });

  it('maps every package export to the build of a source entry point', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, string | { types: string; default: string }>;
      bin: Record<string, string>;
    };
    const targets = Object.entries(pkg.exports)
      .filter(([subpath]) => subpath !== './package.json')
      .flatMap(([, target]) => (typeof target === 'string' ? [target] : [target.types, target.default]));
    expect(Object.keys(pkg.exports)).toEqual(['.', './worker', './testing', './package.json']);
    for (const target of [...targets, ...Object.values(pkg.bin)]) {
      const source = join(ROOT, target.replace(/^\.?\/?dist\//, '').replace(/\.d\.ts$|\.js$/, '.ts'));
      expect(existsSync(source)).toBe(true);
    }
  });
});
