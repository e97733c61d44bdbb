/**
 * Exactly one run per slot, whatever the number of processes: three `durable-agent worker` processes and
 * one `serve --no-worker`, all making the slots of a schedule that fires every second, for 30 seconds.
 * Every slot has its run, no slot has two.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, freePort, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const procs = new CliProcesses();
let db: TestDatabase;
let base: string;

beforeAll(async () => {
  db = await testDatabase();
  const port = await freePort();
  const env = (name: string) =>
    cleanEnv({
      DATABASE_URL: db.url,
      PORT: String(port),
      LLM_PROVIDER: 'demo',
      DEMO_LATENCY_MS: '0',
      WORKER_NAME: name,
      LOG_LEVEL: 'info',
    });
  const api = procs.start('api', ['serve', '--no-worker'], env('api'));
  const workers = [1, 2, 3].map((i) => procs.start(`worker-${i}`, ['worker'], env(`worker-${i}`)));
  await waitForOutput(api, /Then: curl/, 60_000);
  for (const w of workers) await waitForOutput(w, /worker worker-\d started/, 60_000);
  base = `http://127.0.0.1:${port}`;
}, 120_000);
afterAll(async () => {
  await procs.killAll();
  await db?.close();
});

it('three workers and an API process make one run for every slot of a schedule firing every second for 30 s', async ({ onTestFailed }) => {
  onTestFailed(() => console.error(procs.transcript()));
  const res = await fetch(`${base}/api/schedules`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'every-second', cron: '* * * * * *', input: 'Which tickets are overdue?', overlap: 'allow' }),
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  await new Promise((r) => setTimeout(r, 30_000)); // the schedule fires for 30 s: the scenario
  await fetch(`${base}/api/schedules/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"paused":true}' });
  // One run per slot is the slot key's to keep (a unique index); what the fleet must do is miss none.
  const { rows } = await db.pool.query<{ scheduled_for: Date }>(
    `SELECT scheduled_for FROM durable_agent.run WHERE schedule_id = $1 ORDER BY scheduled_for`,
    [id],
  );
  const times = rows.map((r) => r.scheduled_for.getTime());
  expect(times.length).toBeGreaterThanOrEqual(29);
  // None missed: every second from the first slot to the last has its run.
  expect(times.every((t, i) => i === 0 || t - times[i - 1]! === 1000)).toBe(true);
  const skipped = (await (await fetch(`${base}/api/schedules/${id}`)).json()) as { skipped: { missed: number; overlap: number } };
  expect(skipped.skipped).toMatchObject({ missed: 0, overlap: 0 });
}, 90_000);
