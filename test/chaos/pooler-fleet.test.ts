/**
 * A fleet within a server's connection limit: 50 `durable-agent worker` processes and 2 `serve
 * --no-worker` processes, all through one PgBouncer in transaction mode, against a PostgreSQL of the
 * test's own started with `max_connections = 100`. Their pools add up to several hundred client
 * connections; the server sees only PgBouncer's few dozen. 1,000 runs, every one SUCCEEDED.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { ensureEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.ts';
import { CliProcesses, cleanEnv, freePort, type Proc, runCli, until, waitForOutput } from '../support/cli-process.ts';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.ts';

const WORKERS = 50;
const RUNS = 1000;
/** PgBouncer's server connections: what the whole fleet shares, well under the server's 100. */
const SERVER_POOL = 40;

const procs = new CliProcesses();
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-fleet-'));
fs.chmodSync(dataDir, 0o755);
let bouncer: PgBouncer | undefined;
let admin: pg.Client | undefined;

afterAll(async () => {
  await procs.killAll();
  await admin?.end().catch(() => {});
  await bouncer?.stop();
  await stopEmbeddedPostgres(dataDir);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

it(`${WORKERS} workers and 2 API processes through one PgBouncer, against max_connections = 100: ${RUNS} runs, all SUCCEEDED`, async ({
  onTestFailed,
}) => {
  onTestFailed(() => console.error(procs.transcript().slice(-20_000)));
  const cluster = await ensureEmbeddedPostgres(dataDir);
  const setup = new pg.Client({ connectionString: cluster.adminUrl });
  await setup.connect();
  await setup.query('ALTER SYSTEM SET max_connections = 100');
  await setup.end();
  await stopEmbeddedPostgres(dataDir);
  await ensureEmbeddedPostgres(dataDir);
  admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  expect((await admin.query<{ max_connections: string }>('SHOW max_connections')).rows[0]!.max_connections).toBe('100');

  bouncer = await startPgBouncer(cluster.adminUrl, { mode: 'transaction', poolSize: SERVER_POOL, maxClients: 5000 });
  const env = (extra: Record<string, string>) =>
    cleanEnv({
      DATABASE_URL: bouncer!.url,
      LLM_PROVIDER: 'demo',
      DEMO_LATENCY_MS: '50',
      WORKER_CONCURRENCY: '4',
      LOG_LEVEL: 'info',
      ...extra,
    });
  const migrated = await runCli(['migrate'], env({}));
  expect(migrated.code, migrated.err).toBe(0);

  const started = Date.now();
  const ports = [await freePort(), await freePort()];
  const apis = ports.map((port, i) => procs.start(`api-${i + 1}`, ['serve', '--no-worker'], env({ PORT: String(port) })));
  const workers: Proc[] = [];
  for (let i = 1; i <= WORKERS; i++) workers.push(procs.start(`worker-${i}`, ['worker'], env({ WORKER_NAME: `worker-${i}` })));
  for (const a of apis) await waitForOutput(a, /Then: curl/, 300_000);
  for (const w of workers) await waitForOutput(w, /worker worker-\d+ started/, 300_000);

  // The fleet's budget, as each process told it: far more than the server could take directly.
  const budget = [...apis, ...workers].map((p) => Number(/up to (\d+) connections/.exec(p.out)?.[1])).reduce((a, b) => a + b, 0);
  expect(budget).toBeGreaterThan(100);

  const startedInS = (Date.now() - started) / 1000;
  const created = Date.now();
  const bases = ports.map((p) => `http://127.0.0.1:${p}`);
  let made = 0;
  while (made < RUNS) {
    const batch = Array.from({ length: Math.min(50, RUNS - made) }, (_, i) => made + i);
    const statuses = await Promise.all(
      batch.map(async (n) => {
        const res = await fetch(`${bases[n % 2]}/api/runs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ input: `Which acme tickets are overdue? (${n})` }),
        });
        return res.status;
      }),
    );
    expect(statuses).toEqual(batch.map(() => 201));
    made += batch.length;
  }

  const ended = async () =>
    (
      await admin!.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status ORDER BY status`,
      )
    ).rows;
  let peak = 0;
  await until(
    'every run to end',
    async () => {
      const { rows: now } = await admin!.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = $1', [
        'client backend',
      ]);
      peak = Math.max(peak, now[0]!.n);
      const rows = await ended();
      return rows.every((r) => ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(r.status)) && rows;
    },
    400_000,
  );
  console.log(
    `fleet started in ${startedInS} s; ${RUNS} runs ended ${(Date.now() - created) / 1000} s after the first was created; ` +
      `the processes' budgets add up to ${budget} connections, the server's client backends peaked at ${peak} (PgBouncer's pool: ${SERVER_POOL})`,
  );
  expect(await ended()).toEqual([{ status: 'SUCCEEDED', n: RUNS }]);
  expect(peak).toBeLessThanOrEqual(SERVER_POOL + 1);
  // The work was spread over the fleet.
  const { rows } = await admin.query<{ n: number }>(`SELECT count(DISTINCT worker)::int AS n FROM durable_agent.run_step`);
  expect(rows[0]!.n).toBeGreaterThan(WORKERS / 2);
  const logs = procs.transcript();
  expect(logs).not.toMatch(/prepared statement|too many clients|remaining connection slots/);
  expect(logs).not.toMatch(/"level":(5|6)0/);
}, 900_000);
