/**
 * `npm run bench:dashboard`: what the dashboard's reads cost with 100,000 runs of 11 steps each in the
 * database (on DATABASE_URL's server, or the embedded one under ./.data, in a scratch database that is
 * dropped after). Each figure is the p50/p95 of a route answered in-process (SQL, JSON and all), with
 * the runs' creation spread over 30 days (a month of history) and then all within the last day (the
 * overview's worst case: every step is in its window). The overview is also timed without the step
 * start-time index, to show what the index buys. Prints a table; writes bench/results/dashboard.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { createServer } from '../src/api/server.ts';
import { loadConfig } from '../src/config/environment.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool, resolveDatabase } from '../src/db/pool.ts';
import { encodeCursor, RunListing } from '../src/store/run-listing.ts';
import { RunOverview } from '../src/store/run-overview.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { seedRuns } from './seed-runs.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 100_000);
const STEPS = 11;
const ROUNDS = 25;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const round = (x: number) => Number(x.toFixed(2));

async function time(app: FastifyInstance, url: string): Promise<{ p50: number; p95: number }> {
  for (let i = 0; i < 3; i++) await app.inject(url); // warm: plans and caches
  const xs: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t = performance.now();
    const res = await app.inject(url);
    xs.push(performance.now() - t);
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body.slice(0, 200)}`);
  }
  return { p50: round(pct(xs, 0.5)), p95: round(pct(xs, 0.95)) };
}

/** The index names an EXPLAIN of `sql` mentions: proof that a figure comes from an index. */
async function indexesUsed(pool: pg.Pool, sql: string, params: unknown[]): Promise<string[]> {
  const { rows } = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
  return [...new Set(rows.flatMap((r) => [...r['QUERY PLAN'].matchAll(/using (\w+)/gi)].map((m) => m[1]!)))];
}

/** As autovacuum would leave the tables: statistics current, visibility map set (index-only scans). */
async function vacuum(pool: pg.Pool): Promise<void> {
  await pool.query('VACUUM ANALYZE durable_agent.run');
  await pool.query('VACUUM ANALYZE durable_agent.run_step');
}

async function measure(pool: pg.Pool, app: FastifyInstance, label: string): Promise<Record<string, unknown>> {
  const { rows: picks } = await pool.query<{ id: string; created: string }>(
    `SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created
     FROM durable_agent.run ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1`,
    [Math.floor(RUNS / 2)],
  );
  const deep = encodeCursor({ createdAt: picks[0]!.created, id: picks[0]!.id });
  const figures: Record<string, unknown> = {
    'list, first page (50)': await time(app, '/api/runs?limit=50'),
    [`list, page at run ${Math.floor(RUNS / 2).toLocaleString('en-US')} (cursor)`]: await time(app, `/api/runs?limit=50&cursor=${deep}`),
    'list, FAILED only (50)': await time(app, '/api/runs?status=FAILED&limit=50'),
    'one run': await time(app, `/api/runs/${picks[0]!.id}`),
    'its timeline (11 steps)': await time(app, `/api/runs/${picks[0]!.id}/timeline`),
    overview: await time(app, '/api/overview'),
  };
  // Wall-clock figures on a shared machine mean little without its load beside them.
  figures.loadAverage = round(os.loadavg()[0]!);
  process.stdout.write(`\n${label} (load average ${figures.loadAverage} on ${os.cpus().length} cores)\n`);
  for (const [k, v] of Object.entries(figures)) {
    if (typeof v !== 'object') continue;
    const { p50, p95 } = v as { p50: number; p95: number };
    process.stdout.write(`  ${k.padEnd(40)} p50 ${String(p50).padStart(8)} ms   p95 ${String(p95).padStart(8)} ms\n`);
  }
  return figures;
}

async function main(): Promise<void> {
  const database = await resolveDatabase(loadConfig());
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const scratch = `durable_agent_bench_dash_${process.pid}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(scratch)}`);
  const url = new URL(database.url);
  url.pathname = `/${scratch}`;
  const pool = createPool(url.toString(), 8);
  const results: Record<string, unknown> = { database: database.description, runs: RUNS, stepsPerRun: STEPS, at: new Date().toISOString() };
  try {
    await migrate(pool);
    const app = createServer({
      store: new RunRecords(pool),
      listing: new RunListing(pool),
      overview: new RunOverview(pool),
      defaults: { agent: 'bench', model: 'bench', tokenBudget: 1, timeoutSeconds: 1, maxSteps: 1 },
      checkDatabase: async () => {},
      logger: false,
    });

    let t = performance.now();
    await seedRuns(pool, { runs: RUNS, steps: STEPS, spanMs: 30 * 86_400_000 });
    await vacuum(pool);
    process.stdout.write(
      `seeded ${RUNS.toLocaleString('en-US')} runs × ${STEPS} steps over 30 days in ${((performance.now() - t) / 1000).toFixed(1)} s\n`,
    );
    const day = [new Date(Date.now() - 86_400_000), new Date(Date.now() - 3_600_000), new Date()];
    results.indexes = {
      overviewSteps: await indexesUsed(
        pool,
        'SELECT count(*) FROM durable_agent.run_step WHERE started_at >= $1 AND started_at < $3 AND $2::timestamptz IS NOT NULL',
        day,
      ),
      overviewRuns: await indexesUsed(
        pool,
        'SELECT status, count(*) FROM durable_agent.run WHERE created_at >= $1 AND created_at < $2 GROUP BY status',
        [day[0], day[2]],
      ),
      runsByStatus: await indexesUsed(pool, 'SELECT status, count(*) FROM durable_agent.run GROUP BY status', []),
    };
    process.stdout.write(`indexes used: ${JSON.stringify(results.indexes)}\n`);
    const lastDay = Math.round(RUNS / 30);
    results.month = await measure(
      pool,
      app,
      `runs created over 30 days (about ${lastDay.toLocaleString('en-US')} runs and ${(lastDay * STEPS).toLocaleString('en-US')} steps in the last day)`,
    );

    await pool.query('DROP INDEX run_step_started_idx');
    await pool.query('ANALYZE durable_agent.run_step');
    results.monthWithoutStepIndex = { overview: await time(app, '/api/overview') };
    process.stdout.write(
      `  ${'overview without run_step_started_idx'.padEnd(40)} p50 ${String((results.monthWithoutStepIndex as { overview: { p50: number } }).overview.p50).padStart(8)} ms\n`,
    );
    await pool.query('CREATE INDEX run_step_started_idx ON run_step (started_at)');

    // The worst case for the overview: every run, and so every step, within the last day.
    t = performance.now();
    await pool.query('TRUNCATE durable_agent.run_step, run');
    await seedRuns(pool, { runs: RUNS, steps: STEPS, spanMs: 86_000_000 });
    await vacuum(pool);
    process.stdout.write(`\nseeded again within one day in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    results.day = await measure(
      pool,
      app,
      `all ${RUNS.toLocaleString('en-US')} runs (${(RUNS * STEPS).toLocaleString('en-US')} steps) within the last day`,
    );
    await app.close();
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(scratch)} WITH (FORCE)`);
    await admin.end();
    await database.release();
  }
  const out = path.join(path.dirname(new URL(import.meta.url).pathname), 'results', 'dashboard.json');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`\nwritten to ${path.relative(process.cwd(), out)}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
