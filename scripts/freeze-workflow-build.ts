// Freezes the workflow code as it is now into a bundle under test/fixtures/builds/, for the test
// that deploys one build over another (test/faults/deploy.test.ts). Run it on a clean checkout of
// the commit to freeze (`npx tsx scripts/freeze-workflow-build.ts`); like recorded histories, a
// frozen build is never rewritten.
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleSubagentWorkflows } from '../src/worker';

async function main(): Promise<void> {
  const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8' }).trim();
  if (git('status', '--porcelain', '--', 'workflows', 'src', 'activities') !== '') {
    throw new Error('the workflow code has uncommitted changes: freeze a commit, not a work tree');
  }
  const commit = git('rev-parse', '--short', 'HEAD');
  const path = join(__dirname, '..', 'test', 'fixtures', 'builds', `workflows-${commit}.js`);
  if (existsSync(path)) throw new Error(`${path} exists: frozen builds are never rewritten`);
  const { code } = await bundleSubagentWorkflows();
  const header = `// The run workflow as built at commit ${commit}: frozen by scripts/freeze-workflow-build.ts, never edited.\n`;
  writeFileSync(path, header + code);
  console.log(path);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
