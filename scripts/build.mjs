#!/usr/bin/env node
/**
 * `npm run build`: src/ → dist/ (JavaScript, declarations, source maps with their sources inlined).
 * After tsc: relative `.ts` specifiers in the declarations become `.js` (tsc rewrites them in the
 * JavaScript only, and tools other than tsc do not follow `.ts` in a .d.ts), every file under src/
 * that is not TypeScript (the SQL migrations) is copied beside the code that reads it, and outputs
 * whose source is gone are deleted, so a renamed module never ships twice. tsc is incremental
 * (dist/.tsbuildinfo): a build with nothing changed takes a few seconds.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const dist = path.join(root, 'dist');

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

/** Every file under `dir`, as paths relative to it. */
function files(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

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
