/**
 * `npm start` builds only when something changed: in a copy of the repository (its node_modules linked,
 * never written), the first `npm start` builds (a fresh clone), the next one builds nothing, and an edit
 * to src/ or to the dashboard, or a module deleted, builds again.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = path.resolve('.');
const COPIED = ['src', 'dashboard', 'scripts', 'bin', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

let copy: string;
const inCopy = (...p: string[]) => path.join(copy, ...p);
const mtime = (file: string) => fs.statSync(inCopy(file)).mtimeMs;

/** The step `npm start` runs before the server: its own `prestart` script, from the copy's package.json. */
async function prestart(): Promise<string> {
  const { stdout, stderr } = await run('npm', ['run', 'prestart', '--silent'], { cwd: copy, timeout: 240_000 });
  return stdout + stderr;
}

beforeAll(() => {
  copy = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-build-'));
  for (const entry of COPIED) fs.cpSync(path.join(REPO, entry), inCopy(entry), { recursive: true });
  fs.symlinkSync(path.join(REPO, 'node_modules'), inCopy('node_modules'), 'dir');
});

afterAll(() => {
  if (copy) fs.rmSync(copy, { recursive: true, force: true });
});

describe('npm start on a clone', () => {
  it('builds on the first start, not on the next, and again after an edit, a deleted module or a dashboard change', async () => {
    fs.writeFileSync(inCopy('src/build-probe.ts'), "export const probe = 'a module deleted later';\n");
    await prestart();
    expect(fs.existsSync(inCopy('dist/cli/main.js'))).toBe(true);
    expect(fs.existsSync(inCopy('dist/build-probe.js'))).toBe(true);
    expect(fs.existsSync(inCopy('dist/dashboard/index.html'))).toBe(true);

    // Nothing changed: neither tsc (which stamps .tsbuildinfo on every build) nor the dashboard ran.
    const built = { tsc: mtime('dist/.tsbuildinfo'), dashboard: mtime('dist/dashboard/index.html') };
    expect(await prestart()).toBe('');
    expect({ tsc: mtime('dist/.tsbuildinfo'), dashboard: mtime('dist/dashboard/index.html') }).toEqual(built);

    // An edit (as `git pull` leaves it), a module deleted, and a static file of the dashboard changed.
    fs.appendFileSync(inCopy('src/domain/errors.ts'), "\nexport const BUILD_PROBE = 'edited';\n");
    fs.rmSync(inCopy('src/build-probe.ts'));
    fs.appendFileSync(inCopy('dashboard/static/app.css'), '\n/* probe */\n');
    await prestart();
    expect(fs.readFileSync(inCopy('dist/domain/errors.js'), 'utf8')).toContain("BUILD_PROBE = 'edited'");
    expect(fs.existsSync(inCopy('dist/build-probe.js'))).toBe(false);
    expect(fs.readFileSync(inCopy('dist/dashboard/app.css'), 'utf8')).toContain('/* probe */');
    expect(mtime('dist/.tsbuildinfo')).toBeGreaterThan(built.tsc);
  }, 600_000);
});
