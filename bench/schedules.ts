/**
 * What schedules cost: 10,000 schedules firing every minute. How long the minute's 10,000 slots take to
 * be made (the runs created, the schedules moved on), by one scheduler; the idle cost (one read of the
 * next due slot, whatever the number of schedules); and the claim latency of ordinary runs while the
 * slots are made, next to the same claims with nothing firing.
 */
import type pg from 'pg';
import { createLogger } from '../src/observability/logger.ts';
import type { RunDefaults } from '../src/runs/new-run.ts';
import { startScheduler } from '../src/runtime/scheduler.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { RunStore } from '../src/store/run-store.ts';
import { Schedules } from '../src/store/schedules.ts';

const SCHEDULES = 10_000;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const round = (x: number, d = 2) => Number(x.toFixed(d));

export async function benchSchedules(pool: pg.Pool): Promise<{ results: Record<string, number>; rows: [string, string, string][] }> {
  const store = new Schedules(pool);
  const records = new RunRecords(pool);
  const engine = new RunStore(pool);
  const defaults: RunDefaults = {
    agent: 'scheduled',
    model: 'bench',
    agents: new Map([
      ['scheduled', { model: 'bench', version: null }],
      ['bench', { model: 'bench', version: null }],
    ]),
    tokenBudget: 1_000_000,
    timeoutSeconds: 3600,
    maxSteps: 100,
  };
  // 10,000 schedules whose next slot is the next whole minute at least 5 s away, by the database's clock.
  const { rows } = await pool.query<{ at: Date }>(`SELECT date_trunc('minute', now() + interval '65 seconds') AS at`);
  const slot = rows[0]!.at;
  await pool.query(
    `INSERT INTO durable_agent.schedule (tenant, name, cron, timezone, agent, run_options, next_run_at)
     SELECT 'default', 'bench-' || g, '* * * * *', 'UTC', 'scheduled', '{"input":"bench"}', $1 FROM generate_series(1, $2) g`,
    [slot, SCHEDULES],
  );
  await pool.query('ANALYZE durable_agent.schedule');
  const results: Record<string, number> = {};
  const idle: number[] = [];
  for (let i = 0; i < 50; i++) {
    const t = performance.now();
    await store.nextDueInMs(['scheduled']);
    idle.push(performance.now() - t);
  }
  results.scheduleNextDueP50Ms = round(pct(idle, 0.5), 3);

  // Ordinary runs of another agent, created and claimed one at a time: the claim's latency.
  const owner = { worker: 'bench', leaseMs: 60_000 };
  const claims = async (until: () => boolean): Promise<number[]> => {
    const ms: number[] = [];
    while (!until()) {
      await records.create({ agent: 'bench', input: 'x', model: 'bench', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 5 });
      const t = performance.now();
      const [claimed] = await engine.claim(owner, 1, [], ['bench']);
      ms.push(performance.now() - t);
      if (claimed) await engine.finish(claimed.id, claimed.lease, { status: 'SUCCEEDED', output: 'x' });
    }
    return ms;
  };
  const quietUntil = Date.now() + 3000;
  const quiet = await claims(() => Date.now() > quietUntil);

  const scheduler = startScheduler({ store, records, defaults, agents: ['scheduled'], logger: createLogger({ level: 'silent' }) });
  const made = async () =>
    Number((await pool.query(`SELECT count(*) AS n FROM durable_agent.run WHERE scheduled_for = $1`, [slot])).rows[0].n);
  let done = false;
  let doneAt = 0;
  const watcher = (async () => {
    for (const giveUp = slot.getTime() + 300_000; ;) {
      if (Date.now() > giveUp) throw new Error(`the scheduler made ${await made()} of ${SCHEDULES} slots in 5 minutes`);
      if ((await made()) >= SCHEDULES) {
        doneAt = Date.now();
        done = true;
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await new Promise((r) => setTimeout(r, Math.max(0, slot.getTime() - Date.now() - 100)));
  const failed = watcher.catch((e: unknown) => e);
  const firing = await claims(() => done || Date.now() > slot.getTime() + 300_000);
  const e = await failed;
  if (e instanceof Error) throw e;
  await scheduler.close();
  results.scheduleMinuteOf10000Ms = doneAt - slot.getTime();
  results.scheduleSlotCostMs = round(results.scheduleMinuteOf10000Ms / SCHEDULES, 3);
  results.claimP50MsQuiet = round(pct(quiet, 0.5));
  results.claimP99MsQuiet = round(pct(quiet, 0.99));
  results.claimP50MsWhileFiring = round(pct(firing, 0.5));
  results.claimP99MsWhileFiring = round(pct(firing, 0.99));
  const out: [string, string, string][] = [
    [
      'a minute of 10,000 schedules',
      `${results.scheduleMinuteOf10000Ms} ms`,
      `from the slot to its 10,000th run, one scheduler (${results.scheduleSlotCostMs} ms a slot)`,
    ],
    ['next due slot, 10,000 schedules', `${results.scheduleNextDueP50Ms} ms`, 'what an idle process reads to know when to wake'],
    [
      'claim p50 / p99, quiet',
      `${results.claimP50MsQuiet} / ${results.claimP99MsQuiet} ms`,
      `while the slots are made: ${results.claimP50MsWhileFiring} / ${results.claimP99MsWhileFiring} ms`,
    ],
  ];
  return { results, rows: out };
}

// `npm run bench:schedules`: these figures alone, in a scratch database.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { withScratchDatabase } = await import('./scratch-database.ts');
  await withScratchDatabase(async (_url, pool, description) => {
    const { rows } = await benchSchedules(pool);
    console.log(`schedules bench on ${description}\n`);
    for (const [k, v, note] of rows) console.log(`${k.padEnd(34)} ${v.padStart(18)}   ${note}`);
  });
  process.exit(0);
}
