/**
 * Behind a real PgBouncer in transaction mode: the pooler is told from a direct connection and from a
 * session pooler; migrations leave no lock behind on a pooled server; and a whole runtime (API, worker,
 * scheduler, live events) drives runs with tools, an approval, a sleep, a cancel and a fork to the end
 * with no statement prepared by name, warning once at start of what is slower without a direct URL.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/environment.ts';
import { ConfigError } from '../../src/domain/errors.ts';
import { listMigrations, migrate } from '../../src/db/migrate.ts';
import { createPool, resolveDatabase } from '../../src/db/pool.ts';
import { behindTransactionPooler } from '../../src/db/transaction-pooler.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { type Runtime, startRuntime } from '../../src/runtime/start-runtime.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { freePort } from '../support/cli-process.ts';
import { readSse } from '../support/events-api.ts';
import { runApi } from '../support/run-api.ts';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
let bouncer: PgBouncer;
beforeAll(async () => {
  db = await testDatabase();
  bouncer = await startPgBouncer(db.url);
});
afterAll(async () => {
  await bouncer?.stop();
  await db?.close();
});

describe('a transaction pooler', () => {
  it('is told from a direct connection and from a pooler in session mode, every time', async () => {
    const session = await startPgBouncer(db.url, { mode: 'session' });
    try {
      for (let i = 0; i < 5; i++) {
        expect(await behindTransactionPooler(db.url)).toBe(false);
        expect(await behindTransactionPooler(session.url)).toBe(false);
        expect(await behindTransactionPooler(bouncer.url)).toBe(true);
      }
    } finally {
      await session.stop();
    }
    const found = await resolveDatabase(loadConfig({ DATABASE_URL: bouncer.url }));
    expect(found).toMatchObject({ transactionPooler: true, sessionUrl: null });
    const direct = await resolveDatabase(loadConfig({ DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: db.url }));
    expect(direct).toMatchObject({ transactionPooler: true, sessionUrl: db.url });
    const told = await resolveDatabase(loadConfig({ DATABASE_URL: db.url, DATABASE_POOLER: 'transaction' }));
    expect(told).toMatchObject({ transactionPooler: true, sessionUrl: null });
  });

  it('through a pooler in session mode, which passes no startup options on (this one drops them), a pool of generic plans still gets its generic plans', async () => {
    const session = await startPgBouncer(db.url, { mode: 'session' });
    const generic = createPool(session.url, 1, { genericPlans: true });
    try {
      const plan = { name: 'session_plans', text: 'SELECT $1::int + 1 AS n', values: [1] };
      for (let i = 0; i < 3; i++) expect((await generic.query(plan)).rows).toEqual([{ n: 2 }]);
      const { rows } = await generic.query(
        `SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name = $1`,
        ['session_plans'],
      );
      expect(rows).toEqual([{ generic: 3, custom: 0 }]);
    } finally {
      await generic.end();
      await session.stop();
    }
  });

  it('with a pooler of one server, is found at once (the probe does not wait on itself)', async () => {
    const single = await startPgBouncer(db.url, { poolSize: 1 });
    try {
      expect(await behindTransactionPooler(single.url)).toBe(true);
    } finally {
      await single.stop();
    }
  });

  it('refuses at start a DATABASE_DIRECT_URL that cannot be reached or reaches another database, in one line without its password', async () => {
    const unreachable = new URL(db.url);
    unreachable.port = String(await freePort());
    unreachable.password = 'secret-of-the-direct-url';
    await expect(resolveDatabase(loadConfig({ DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: unreachable.toString() }))).rejects.toThrow(
      /^cannot use the DATABASE_DIRECT_URL postgres:\/\/[^ ]*\*\*\*@127\.0\.0\.1:\d+\/[^ ]+: connect ECONNREFUSED/,
    );
    const other = new URL(db.url);
    other.pathname = '/postgres';
    const refused = resolveDatabase(loadConfig({ DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: other.toString() }));
    await expect(refused).rejects.toBeInstanceOf(ConfigError);
    await expect(refused).rejects.toThrow(/reaches another database than DATABASE_URL/);
    await expect(refused).rejects.not.toThrow(/secret-of-the-direct-url/);
  });

  it('migrates from several processes at once and leaves no lock held on a pooled server', async () => {
    const fresh = await testDatabase();
    const pooled = await startPgBouncer(fresh.url, { poolSize: 3 });
    const pools = [1, 2, 3].map(() => createPool(pooled.url, 2, { prepared: false }));
    try {
      await fresh.pool.query('DROP SCHEMA durable_agent CASCADE');
      const applied = await Promise.all(pools.map((p) => migrate(p, { schema: 'durable_agent' })));
      expect(applied.flat().length).toBe(new Set(applied.flat()).size); // each migration applied once
      expect(applied.flat().length).toBe(listMigrations().length);
      const { rows } = await fresh.pool.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      expect(rows[0].n).toBe(0);
      // A later migrator is not stopped by a lock a server connection kept.
      expect(await migrate(pools[0]!, { schema: 'durable_agent' })).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await pooled.stop();
      await fresh.close();
    }
  });
});

describe('a runtime behind PgBouncer in transaction mode, without a direct URL', () => {
  const lines: Record<string, unknown>[] = [];
  let rt: Runtime;
  let base: string;
  beforeAll(async () => {
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    rt = await startRuntime(
      loadConfig({ DATABASE_URL: bouncer.url, PORT: '0', LLM_PROVIDER: 'demo', DEMO_LATENCY_MS: '0', WORKER_CONCURRENCY: '16' }),
      { api: true, worker: true, logger: createLogger({ level: 'info', destination }) },
    );
    base = rt.url!;
  });
  afterAll(async () => {
    await rt?.close();
  });

  const api = () => runApi(base);
  const post = (path: string, body: unknown) => api().post(path, body);
  const until = (id: string, wanted: string, timeoutMs = 20_000) => api().status(id, wanted, timeoutMs);

  it('says once that it polls and relies on leases, and how many connections it may open', () => {
    expect(rt.database).toMatchObject({ transactionPooler: true, sessionUrl: null });
    const warned = lines.filter((l) => /transaction mode and DATABASE_DIRECT_URL is unset/.test(String(l.msg)));
    expect(warned).toHaveLength(1);
    expect(rt.connections).toEqual({ pool: 26, batches: 0, leaseKeeper: 1, sessions: 0 });
  });

  it('drives runs with tools, an approval, a sleep, a cancel and a fork to the end, with live events, and no prepared statement', async () => {
    const many = await Promise.all(Array.from({ length: 30 }, () => post('/api/runs', { input: 'Which acme tickets are overdue?' })));
    expect(many.every((r) => r.status === 201)).toBe(true);
    const watched = await post('/api/runs', { input: 'Which acme tickets are overdue?' });
    const events = await readSse(`${base}/api/runs/${watched.body.id}/events`);
    expect(events.events.map((e) => e.type)).toEqual(expect.arrayContaining(['tool.started', 'tool.finished', 'run.finished']));

    const approval = await post('/api/runs', { input: 'Close ticket ACME-104 because the fix shipped' });
    const waiting = await until(approval.body.id, 'WAITING');
    const toolUseId = waiting.waiting.toolCalls[0].toolUseId as string;
    expect((await post(`/api/runs/${approval.body.id}/tool-calls/${toolUseId}/decision`, { decision: 'approve' })).status).toBe(202);

    const sleeper = await post('/api/runs', { input: 'Check back in 2 seconds' });
    const cancelled = await post('/api/runs', { input: 'Wait 1 hour, then check again' });
    await until(cancelled.body.id, 'WAITING');
    expect((await post(`/api/runs/${cancelled.body.id}/cancel`, {})).status).toBe(202);

    for (const r of [...many, watched, approval, sleeper]) await until(r.body.id, 'SUCCEEDED', 30_000);
    await until(cancelled.body.id, 'CANCELLED');
    const fork = await post(`/api/runs/${watched.body.id}/fork`, { afterSeq: 2 });
    expect(fork.status).toBe(201);
    await until(fork.body.id, 'SUCCEEDED');

    const { rows } = await db.pool.query(`SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status ORDER BY status`);
    expect(rows).toEqual([
      { status: 'CANCELLED', n: 1 },
      { status: 'SUCCEEDED', n: 34 },
    ]);
    const problems = lines.filter((l) => Number(l.level) >= 40 && !/DATABASE_DIRECT_URL is unset/.test(String(l.msg)));
    expect(problems).toEqual([]);
    expect(JSON.stringify(lines)).not.toMatch(/prepared statement/);
  }, 90_000);
});

describe('a worker behind PgBouncer in transaction mode, without a direct URL', () => {
  it('stops a RUNNING run soon after it is cancelled, with no NOTIFY to tell it (its lease renewal every second does)', async () => {
    // Each model call takes 15 s, so the run is RUNNING, mid-call, when it is cancelled.
    const rt = await startRuntime(
      loadConfig({ DATABASE_URL: bouncer.url, LLM_PROVIDER: 'demo', DEMO_LATENCY_MS: '15000', WORKER_NAME: 'slow-worker' }),
      { api: false, worker: true, logger: createLogger({ level: 'silent' }) },
    );
    try {
      const run = await rt.runs.create({ input: 'Which acme tickets are overdue?' });
      await waitFor('the run to be RUNNING', async () => (await rt.runs.get(run.id))?.status === 'RUNNING', 20_000);
      const cancelledAt = Date.now();
      await rt.runs.cancel(run.id);
      const ended = await rt.runs.wait(run.id, { timeoutMs: 20_000 });
      expect(ended.status).toBe('CANCELLED');
      // Well within the model call it interrupted, and sooner than the default renewal (a third of the 30 s lease).
      expect(Date.now() - cancelledAt).toBeLessThan(6_000);
    } finally {
      await rt.close();
    }
  }, 60_000);
});
