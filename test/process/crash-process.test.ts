import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { killAll } from '../support/child-processes.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
const children: ChildProcess[] = [];
beforeAll(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await killAll(children);
});
afterAll(async () => {
  await db.close();
});

function startWorker(name: string): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, LEASE_MS: '1500', SLOW_TOOL_MS: '3000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

it('a second worker process finishes the run of one killed with SIGKILL mid-step', async () => {
  const run = await newRun(db.records, 'survive a kill -9');
  const a = startWorker('worker-A');
  await waitFor(
    'worker A to start the tool',
    async () => (await db.store.steps(run.id)).some((s) => s.kind === 'TOOL' && s.status === 'STARTED'),
    30_000,
  );
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));
  expect((await db.records.state(run.id)).status).toBe('RUNNING'); // A died holding the lease

  startWorker('worker-B');
  await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
  const final = await db.records.state(run.id);
  expect(final.attempts).toBe(2);
  expect(final.output).toBe('done');
  const steps = await db.store.steps(run.id);
  expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'worker-A'],
    [2, 'TOOL', 'DONE', 'worker-B'],
    [3, 'MODEL', 'DONE', 'worker-B'],
  ]);
});

it('a worker process stopped (SIGSTOP) past its lease is taken over, writes nothing after SIGCONT, and the attempt is not counted', async () => {
  const run = await newRun(db.records, 'survive a stalled worker');
  const a = startWorker('worker-A');
  await waitFor(
    'worker A to start the tool',
    async () => (await db.store.steps(run.id)).some((s) => s.kind === 'TOOL' && s.status === 'STARTED'),
    30_000,
  );
  a.kill('SIGSTOP');
  startWorker('worker-B');
  await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
  expect((await db.records.state(run.id)).attempts).toBe(2); // A's claim and B's
  a.kill('SIGCONT');
  // A wakes, finds its lease lost (its tool's result is fenced off), and gives the attempt back.
  await waitFor('A to give back the attempt its stall cost', async () => (await db.records.state(run.id)).attempts === 1, 15_000);
  const steps = await db.store.steps(run.id);
  expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'worker-A'],
    [2, 'TOOL', 'DONE', 'worker-B'],
    [3, 'MODEL', 'DONE', 'worker-B'],
  ]);
});
