import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { withDirectoryLock } from '../../src/db/dir-lock.ts';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-lock-'));
const lock = path.join(dir, 'start.lock');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it('lets one holder in at a time', async () => {
  const trace: string[] = [];
  const hold = (name: string) =>
    withDirectoryLock(lock, async () => {
      trace.push(`${name} in`);
      // Kept: holding the lock a while, so the others contend for it, is the scenario.
      await new Promise((r) => setTimeout(r, 100));
      trace.push(`${name} out`);
    });
  await Promise.all([hold('a'), hold('b'), hold('c')]);
  expect(trace).toHaveLength(6);
  for (let i = 0; i < trace.length; i += 2) expect(trace[i + 1]).toBe(trace[i]!.replace(' in', ' out'));
});

it('lets one process in at a time when several contend for it over and over', async () => {
  const trace = path.join(dir, 'trace');
  fs.writeFileSync(trace, '');
  const script = `import fs from 'node:fs';
    import { withDirectoryLock } from ${JSON.stringify(path.resolve('src/db/dir-lock.ts'))};
    for (let i = 0; i < 8; i++) {
      await withDirectoryLock(${JSON.stringify(lock)}, async () => {
        fs.appendFileSync(${JSON.stringify(trace)}, process.pid + ' in\\n');
        await new Promise((r) => setTimeout(r, 5));
        fs.appendFileSync(${JSON.stringify(trace)}, process.pid + ' out\\n');
      });
    }`;
  await Promise.all(
    [1, 2, 3].map(() => run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 60_000 })),
  );
  const lines = fs.readFileSync(trace, 'utf8').trim().split('\n');
  expect(lines).toHaveLength(3 * 8 * 2);
  for (let i = 0; i < lines.length; i += 2) {
    expect(lines[i]).toMatch(/ in$/);
    expect(lines[i + 1]).toBe(lines[i]!.replace(' in', ' out'));
  }
  expect(fs.readdirSync(lock)).toEqual([]); // every holder took its socket with it
});

it('is free the moment its holder is killed with SIGKILL', async () => {
  const script = `import { withDirectoryLock } from ${JSON.stringify(path.resolve('src/db/dir-lock.ts'))};
    await withDirectoryLock(${JSON.stringify(lock)}, async () => { console.log('held'); await new Promise(() => setInterval(() => {}, 1000)); });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((r) => child.once('exit', r));
  try {
    await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
    await expect(withDirectoryLock(lock, async () => 'got it', 300)).rejects.toThrow(/held by a live process/);
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
  expect(await withDirectoryLock(lock, async () => 'got it', 2_000)).toBe('got it');
});

it('cannot be blocked by another process listening on a name derived from the directory', async () => {
  // The abstract socket name a lock derived from its path once used: any local user could listen on it first.
  const real = path.join(fs.realpathSync(path.dirname(lock)), path.basename(lock));
  const squatter = net.createServer();
  await new Promise<void>((resolve) =>
    squatter.listen(`\0durable-agent-lock-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`, resolve),
  );
  try {
    expect(await withDirectoryLock(lock, async () => 'got it', 2_000)).toBe('got it');
  } finally {
    squatter.close();
  }
});

it('keeps its directory to its owner', async () => {
  fs.mkdirSync(lock, { recursive: true });
  fs.chmodSync(lock, 0o777); // as a careless hand may have left it
  await withDirectoryLock(lock, async () => {
    const st = fs.statSync(lock);
    expect(st.mode & 0o777).toBe(0o700);
    expect(st.uid).toBe(process.getuid!());
  });
});
