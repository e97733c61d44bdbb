import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { withDirectoryLock } from '../../src/db/dir-lock.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-lock-'));
const lock = path.join(dir, 'start.lock');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it('lets one holder in at a time', async () => {
  const trace: string[] = [];
  const hold = (name: string) =>
    withDirectoryLock(lock, async () => {
      trace.push(`${name} in`);
      await new Promise((r) => setTimeout(r, 100));
      trace.push(`${name} out`);
    });
  await Promise.all([hold('a'), hold('b'), hold('c')]);
  for (let i = 0; i < trace.length; i += 2) expect(trace[i + 1]).toBe(trace[i]!.replace(' in', ' out'));
});

it('is free the moment its holder is killed with SIGKILL', async () => {
  const script = `import { withDirectoryLock } from ${JSON.stringify(path.resolve('src/db/dir-lock.ts'))};
    await withDirectoryLock(${JSON.stringify(lock)}, async () => { console.log('held'); await new Promise(() => setInterval(() => {}, 1000)); });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
  await expect(withDirectoryLock(lock, async () => 'got it', 300)).rejects.toThrow(/held by a live process/);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  expect(await withDirectoryLock(lock, async () => 'got it', 2_000)).toBe('got it');
});
