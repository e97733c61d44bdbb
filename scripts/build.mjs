#!/usr/bin/env node
/**
 * `npm run build`: src/ → dist/ (JavaScript, declarations, source maps with their sources inlined),
 * then the dashboard (dashboard/build.ts → dist/dashboard/).
 * After tsc: relative `.ts` specifiers in the declarations become `.js` (tsc rewrites them in the
 * JavaScript only, and tools other than tsc do not follow `.ts` in a .d.ts), every file under src/
 * that is not TypeScript (the SQL migrations) is copied beside the code that reads it, and outputs
 * whose source is gone are deleted, so a renamed module never ships twice.
 *
 * `--if-changed` (`npm start`, `npm run migrate`) builds only when an input of the build differs from
 * the last successful build's: even with nothing to emit, tsc reads and hashes every source (seconds),
 * where a look at the inputs takes milliseconds. The inputs are every file under src/ and dashboard/,
 * the build's own script and configuration, and node_modules/.package-lock.json (npm rewrites it on
 * every install, so new dependencies rebuild too); each counts by its path, size and modification
 * time, so an edit, a `git pull`, a new file and a deleted one all differ. Their digest, taken before
 * the build starts, is written to dist/.build-inputs once the build has succeeded: a file saved during
 * a build, or a build that failed, leaves the next one to run.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const dist = path.join(root, 'dist');

const STAMP = path.join(dist, '.build-inputs');
const INPUTS = [
  'src',
  'dashboard',
  'scripts/build.mjs',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'node_modules/.package-lock.json',
];
/** Outputs whose absence means dist/ was cleared by hand, whatever the stamp says. */
const OUTPUTS = ['index.js', 'cli/main.js', '.tsbuildinfo', 'dashboard/index.html'];

/** Every file under `dir`, as paths relative to it. */
function files(dir) {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

function inputsDigest() {
  const hash = createHash('sha256');
  for (const input of INPUTS) {
    const full = path.join(root, input);
    const stat = fs.statSync(full, { throwIfNoEntry: false });
    const entries = !stat
      ? []
      : stat.isDirectory()
        ? files(full)
            .sort()
            .map((f) => path.join(input, f))
        : [input];
    hash.update(`${input}:${entries.length}\n`);
    for (const file of entries) {
      const { size, mtimeMs } = fs.statSync(path.join(root, file));
      hash.update(`${file}\0${size}\0${mtimeMs}\n`);
    }
  }
  return hash.digest('hex');
}

const digest = inputsDigest();
if (process.argv.includes('--if-changed')) {
  const recorded = fs.existsSync(STAMP) ? fs.readFileSync(STAMP, 'utf8') : null;
  if (recorded === digest && OUTPUTS.every((f) => fs.existsSync(path.join(dist, f)))) process.exit(0);
}
fs.rmSync(STAMP, { force: true });

const require = createRequire(import.meta.url);
const compiled = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

const RELATIVE_TS = /(\bfrom\s*|\bimport\s*\(\s*)(['"])(\.\.?\/[^'"]*)\.ts\2/g;
const OUTPUT = /\.(d\.ts|js\.map|js)$/;
const isAsset = (file) => !file.endsWith('.ts');

const sources = new Set(files(src));
for (const file of files(dist)) {
  // dist/dashboard/ is the dashboard's build (dashboard/build.ts), not an output of src/.
  if (file === '.tsbuildinfo' || file.startsWith(`dashboard${path.sep}`)) continue;
  const target = path.join(dist, file);
  const source = OUTPUT.test(file) ? file.replace(OUTPUT, '.ts') : file;
  if (!sources.has(source)) {
    fs.rmSync(target);
  } else if (file.endsWith('.d.ts')) {
    const text = fs.readFileSync(target, 'utf8');
    const rewritten = text.replace(RELATIVE_TS, '$1$2$3.js$2');
    if (rewritten !== text) fs.writeFileSync(target, rewritten);
  }
}
for (const file of [...sources].filter(isAsset)) {
  fs.mkdirSync(path.dirname(path.join(dist, file)), { recursive: true });
  fs.copyFileSync(path.join(src, file), path.join(dist, file));
}
// The build's time stamp, even when tsc found nothing to emit: the tests that start the compiled CLI
// compare it with src/ to refuse testing a stale build.
const now = new Date();
fs.utimesSync(path.join(dist, '.tsbuildinfo'), now, now);

// The dashboard skips its own build when its sources are older than it (`npm run build:dashboard`).
const dashboard = spawnSync(process.execPath, [require.resolve('tsx/cli'), path.join(root, 'dashboard/build.ts')], { stdio: 'inherit' });
if (dashboard.status !== 0) process.exit(dashboard.status ?? 1);
fs.writeFileSync(STAMP, digest);
