/**
 * Builds the dashboard into dist/dashboard/ (`npm run build`): the browser modules compiled by tsc
 * (which also type-checks them against the DOM), the static files, the Inter font with its licence, and
 * index.html with a modulepreload link for every module, so the browser fetches them all at once
 * instead of discovering them import by import.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_OUT = path.resolve(HERE, '../dist/dashboard');
const require = createRequire(import.meta.url);

function modules(dir: string, base = dir): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return modules(full, base);
    return e.name.endsWith('.js') ? [path.relative(base, full).split(path.sep).join('/')] : [];
  });
}

export function buildDashboard(): string {
  fs.rmSync(DASHBOARD_OUT, { recursive: true, force: true });
  const tsc = require.resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(HERE, 'tsconfig.json')], { stdio: 'inherit' });

  for (const file of fs.readdirSync(path.join(HERE, 'static'))) {
    if (file !== 'index.html') fs.copyFileSync(path.join(HERE, 'static', file), path.join(DASHBOARD_OUT, file));
  }
  const font = path.dirname(require.resolve('@fontsource-variable/inter/package.json'));
  fs.mkdirSync(path.join(DASHBOARD_OUT, 'fonts'), { recursive: true });
  fs.copyFileSync(path.join(font, 'files', 'inter-latin-wght-normal.woff2'), path.join(DASHBOARD_OUT, 'fonts', 'inter-latin-wght-normal.woff2'));
  fs.copyFileSync(path.join(font, 'LICENSE'), path.join(DASHBOARD_OUT, 'fonts', 'inter-LICENSE.txt'));

  // A module of types only compiles to `export {};` and is never imported at run time.
  const preloads = modules(DASHBOARD_OUT)
    .filter((m) => fs.readFileSync(path.join(DASHBOARD_OUT, m), 'utf8').trim() !== 'export {};')
    .sort()
    .map((m) => `<link rel="modulepreload" href="/assets/${m}">`)
    .join('\n    ');
  const shell = fs.readFileSync(path.join(HERE, 'static', 'index.html'), 'utf8').replace('<!-- modulepreload -->', preloads);
  fs.writeFileSync(path.join(DASHBOARD_OUT, 'index.html'), shell);
  return DASHBOARD_OUT;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.stdout.write(`dashboard built in ${path.relative(process.cwd(), buildDashboard())}\n`);
  } catch (e) {
    process.stderr.write(`dashboard build failed: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
