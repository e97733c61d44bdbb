/**
 * DURABLE_AGENT_CRASH_AT, with real `durable-agent worker` processes: worker A kills itself with SIGKILL
 * right after the first model step's checkpoint committed; worker B resumes the run and repeats
 * nothing that was recorded.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, exitWithin, until } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease } from '../support/engine.ts';

const procs = new CliProcesses();
let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await procs.killAll();
  await db.close();
});
beforeEach(({ onTestFailed }) => onTestFailed(() => console.error(procs.transcript())));

it('kills the worker with SIGKILL at the named point; another worker resumes without repeating the recorded step', async () => {
  const run = await db.records.create({
    input: 'Which acme tickets are overdue?',
    model: 'demo',
    tokenBudget: 50_000,
    timeoutSeconds: 300,
    maxSteps: 20,
  });
  const env = (name: string, extra: Record<string, string> = {}) =>
    cleanEnv({ DATABASE_URL: db.url, LLM_PROVIDER: 'demo', DEMO_LATENCY_MS: '0', WORKER_NAME: name, LOG_LEVEL: 'warn', ...extra });

  const a = procs.start('worker-A', ['worker'], env('worker-A', { DURABLE_AGENT_CRASH_AT: 'after-checkpoint' }));
  expect(await exitWithin(a, 60_000)).toEqual({ code: null, signal: 'SIGKILL' });
  const afterCrash = await db.store.steps(run.id);
  expect(afterCrash.map((s) => [s.seq, s.kind, s.worker])[0]).toEqual([1, 'MODEL', 'worker-A']);
  expect(afterCrash.filter((s) => s.kind === 'MODEL')).toHaveLength(1);
  expect(await db.records.state(run.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'worker-A' }); // died holding the lease

  await expireLease(db.pool, run.id);
  const b = procs.start('worker-B', ['worker'], env('worker-B'));
  await until('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 60_000);
  b.child.kill('SIGTERM');
  expect((await exitWithin(b, 30_000)).code).toBe(0);

  const steps = await db.store.steps(run.id);
  const models = steps.filter((s) => s.kind === 'MODEL');
  expect(models[0]).toMatchObject({ seq: 1, worker: 'worker-A' }); // the first model call was not made again
  expect(models.slice(1).every((s) => s.worker === 'worker-B')).toBe(true);
  expect(steps.map((s) => s.seq)).toEqual(steps.map((_, i) => i + 1));
}, 180_000); // two process start-ups, slow on a loaded machine
