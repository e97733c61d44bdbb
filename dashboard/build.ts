/**
 * Builds the dashboard into dist/dashboard/ (`npm run build`, after src/; skipped when nothing changed,
 * `--force` to build anyway): the browser modules compiled by tsc
 * (which also type-checks them against the DOM) together with the modules of src/ they share with the
 * server (tsconfig's rootDirs lets `./events/fold.ts` name src/events/fold.ts, so the browser folds run
 * events with the server's own code, served from the same directory), the static files, the Inter font with its licence, and
 * index.html with a modulepreload link for every module, so the browser fetches them all at once
 * instead of discovering them import by import.
 *
 * The page's types are the API schemas' (types.ts imports them, as types only): tsc compiles those
 * server modules too, but only the modules of src/ that the page imports at run time are shipped, and
 * a shipped module that imports a package (zod, say) fails the build.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_OUT = path.resolve(HERE, '../dist/dashboard');
const require = createRequire(import.meta.url);
/** The server's modules the dashboard imports (through tsconfig's rootDirs): a change to them rebuilds it. */
const SHARED = path.resolve(HERE, '../src/events');
/** Where the page's types come from (types.ts): a change to them checks it again. */
const TYPE_SOURCES = ['../src/api/schemas.ts', '../src/api/schemas-overview.ts', '../src/runs/requests.ts', '../src/domain/types.ts'].map(
  (f) => path.resolve(HERE, f),
);

function modules(dir: string, base = dir): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return modules(full, base);
    return e.name.endsWith('.js') ? [path.relative(base, full).split(path.sep).join('/')] : [];
  });
}

function newest(dir: string): number {
  return Math.max(
    0,
    ...fs
      .readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => fs.statSync(path.join(e.parentPath, e.name)).mtimeMs),
  );
}

/** Why the built dashboard cannot be trusted to match its sources, or null when it can. */
export function dashboardStaleness(): string | null {
  const shell = path.join(DASHBOARD_OUT, 'index.html');
  if (!fs.existsSync(shell)) return `the dashboard is not built (${shell} is missing): run npm run build`;
  const built = fs.statSync(shell).mtimeMs;
  const types = TYPE_SOURCES.map((f) => fs.statSync(f, { throwIfNoEntry: false })?.mtimeMs ?? Infinity);
  const sources = Math.max(
    newest(path.join(HERE, 'src')),
    newest(path.join(HERE, 'static')),
    newest(SHARED),
    ...types,
    fs.statSync(fileURLToPath(import.meta.url)).mtimeMs,
  );
  if (sources > built) {
    return 'the dashboard was built before its last change: run npm run build';
  }
  return null;
}

/** The static imports of a compiled module: relative ones (`./x.js`) and packages (`zod`). */
function importsOf(code: string): string[] {
  return [...code.matchAll(/(?:^|[;\s])(?:import|export)\s*(?:[\w*${}\s,]*?\s*from\s*)?(['"])([^'"]+)\1/g)].map((m) => m[2]!);
}

/**
 * Copies into `out` the modules of `server` (the compiled src/) that the modules in `out` import, and
 * theirs in turn; nothing else of the server is shipped. Throws on an import of a package, which the
 * browser could not load, and on one that names no module.
 */
function shipImported(out: string, server: string): void {
  const pending = modules(out);
  const seen = new Set(pending);
  while (pending.length) {
    const module = pending.pop()!;
    const from = fs.existsSync(path.join(out, module)) ? out : server;
    for (const specifier of importsOf(fs.readFileSync(path.join(from, module), 'utf8'))) {
      if (!specifier.startsWith('.'))
        throw new Error(`${module} imports "${specifier}": the browser gets no packages (import its types with \`import type\`)`);
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(module), specifier));
      if (seen.has(target)) continue;
      seen.add(target);
      if (fs.existsSync(path.join(out, target))) {
        pending.push(target);
        continue;
      }
      if (!fs.existsSync(path.join(server, target)))
        throw new Error(`${module} imports ${specifier}, which is neither the page's nor the server's`);
      fs.mkdirSync(path.dirname(path.join(out, target)), { recursive: true });
      fs.copyFileSync(path.join(server, target), path.join(out, target));
      pending.push(target);
    }
  }
}

export function buildDashboard(): string {
  // Built aside and moved into place, so a server starting meanwhile finds the old build or the new one.
  const out = `${DASHBOARD_OUT}.building-${process.pid}`;
  const compiled = `${out}.tsc`;
  fs.rmSync(out, { recursive: true, force: true });
  fs.rmSync(compiled, { recursive: true, force: true });
  try {
    const tsc = require.resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', path.join(HERE, 'tsconfig.json'), '--outDir', compiled], { stdio: 'inherit' });
    // tsc lays the output out like the repository; the browser sees dashboard/src and src/ as one directory.
    fs.renameSync(path.join(compiled, 'dashboard', 'src'), out);
    shipImported(out, path.join(compiled, 'src'));

    for (const file of fs.readdirSync(path.join(HERE, 'static'))) {
      if (file !== 'index.html') fs.copyFileSync(path.join(HERE, 'static', file), path.join(out, file));
    }
    const font = path.dirname(require.resolve('@fontsource-variable/inter/package.json'));
    fs.mkdirSync(path.join(out, 'fonts'), { recursive: true });
    fs.copyFileSync(path.join(font, 'files', 'inter-latin-wght-normal.woff2'), path.join(out, 'fonts', 'inter-latin-wght-normal.woff2'));
    fs.copyFileSync(path.join(font, 'LICENSE'), path.join(out, 'fonts', 'inter-LICENSE.txt'));

    // A module of types only compiles to `export {};` and is never imported at run time.
    const preloads = modules(out)
      .filter((m) => fs.readFileSync(path.join(out, m), 'utf8').trim() !== 'export {};')
      .sort()
      .map((m) => `<link rel="modulepreload" href="/assets/${m}">`)
      .join('\n    ');
    const shell = fs.readFileSync(path.join(HERE, 'static', 'index.html'), 'utf8').replace('<!-- modulepreload -->', preloads);
    fs.writeFileSync(path.join(out, 'index.html'), shell);

    fs.rmSync(DASHBOARD_OUT, { recursive: true, force: true });
    fs.renameSync(out, DASHBOARD_OUT);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(compiled, { recursive: true, force: true });
  }
  return DASHBOARD_OUT;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    // `npm run build` runs before the tests and `npm start`: an unchanged dashboard is not compiled again.
    if (!process.argv.includes('--force') && dashboardStaleness() === null) process.exit(0);
    process.stdout.write(`dashboard built in ${path.relative(process.cwd(), buildDashboard())}\n`);
  } catch (e) {
    process.stderr.write(`dashboard build failed: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
