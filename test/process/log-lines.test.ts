/**
 * The default log destination writes each line when it is logged: a worker killed with SIGKILL (the
 * crash the runtime is built for) has its last lines in its log file, and a busy process holds no queue
 * of unwritten lines in memory.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';

const LINES = 2_000;

it('every line logged before a SIGKILL is in the file stdout goes to', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-log-lines-'));
  const file = path.join(dir, 'worker.log');
  const out = fs.openSync(file, 'w');
  // The lines are logged in one turn of the event loop, then the process kills itself in the same turn:
  // a destination that queues lines for a later write would have written at most the first.
  const script = `
    const { createLogger } = await import(${JSON.stringify(path.resolve('src/observability/logger.ts'))});
    const logger = createLogger();
    for (let i = 0; i < ${LINES}; i++) logger.info({ i, run_id: 'r-' + i }, 'step finished');
    process.kill(process.pid, 'SIGKILL');
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', out, 'pipe'] });
  fs.closeSync(out);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once('close', (_code, s) => resolve(s)));
  expect(err).toBe('');
  expect(signal).toBe('SIGKILL');
  const lines = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { i: number; msg: string });
  expect(lines).toHaveLength(LINES);
  expect(lines.map((l) => l.i)).toEqual(Array.from({ length: LINES }, (_, i) => i));
  expect(lines[LINES - 1]!.msg).toBe('step finished');
  fs.rmSync(dir, { recursive: true, force: true });
});
