import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { listMigrations, migrate } from '../../src/db/migrate.ts';
import { createPool } from '../../src/db/pool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

describe('store', () => {
  it('claims with an index scan when 100k finished runs share the table', async () => {
    await db.pool.query(
      `INSERT INTO run (id, status, input, model, token_budget, max_steps, deadline_at, finished_at)
       SELECT gen_random_uuid(), 'SUCCEEDED', 'old', 'm', 100, 10, now(), now() FROM generate_series(1, 100000)`,
    );
    const live = await newRun(db.store, 'live');
    await db.pool.query('ANALYZE run');
    const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT id FROM run
       WHERE status IN ('QUEUED', 'RUNNING') AND run_at <= now() AND (status = 'QUEUED' OR locked_until < now())
       ORDER BY run_at LIMIT 10 FOR UPDATE SKIP LOCKED`,
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Scan using run_claim_idx/);
    expect(plan).not.toMatch(/Seq Scan/);
    const claimed = await db.store.claim({ worker: 'W', leaseMs: 1000 }, 10);
    expect(claimed.map((r) => r.id)).toEqual([live.id]);
    expect(claimed[0]).toMatchObject({ status: 'RUNNING', lockedBy: 'W', attempts: 1, hasSteps: false });
  });

  it('records a tool call once per tool_use id, whoever starts it again', async () => {
    const run = await newRun(db.store);
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1);
    expect(claimed?.id).toBe(run.id);
    const owner = claimed!.lease;
    const first = await db.store.startTool(run.id, owner, { seq: 1, toolUseId: 'toolu_x', toolName: 'lookup' });
    const again = await db.store.startTool(run.id, owner, { seq: 2, toolUseId: 'toolu_x', toolName: 'lookup' });
    expect(first).toMatchObject({ seq: 1, created: true });
    expect(again).toMatchObject({ seq: 1, created: false });
    await db.store.finishTool(run.id, owner, { toolUseId: 'toolu_x', status: 'DONE', result: 'ok', latencyMs: 3 });
    await expect(db.store.finishTool(run.id, owner, { toolUseId: 'toolu_x', status: 'DONE', result: 'twice', latencyMs: 3 })).rejects.toThrow(/not STARTED/);
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.status, s.response])).toEqual([[1, 'DONE', 'ok']]);
  });

  it('stores a shared text once, by digest', async () => {
    const a = await db.store.putBlob('You are helpful.');
    const b = await db.store.putBlob('You are helpful.');
    expect(a).toBe(b);
    expect(await db.store.blob(a)).toBe('You are helpful.');
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM content_blob WHERE digest = $1', [a]);
    expect(rows[0].n).toBe(1);
  });
});

describe('migrations', () => {
  it('are applied once, in order, when two processes migrate an empty database at once', async () => {
    const adminUrl = inject('adminUrl');
    const name = `${inject('dbPrefix')}_mig_${randomBytes(3).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const pools = [createPool(url.toString(), 2), createPool(url.toString(), 2)];
    try {
      const applied = await Promise.all(pools.map((p) => migrate(p)));
      const all = listMigrations().map((m) => m.name);
      expect([...applied[0]!, ...applied[1]!].sort()).toEqual([...all].sort()); // each applied by exactly one
      const { rows } = await pools[0]!.query('SELECT name FROM schema_migration ORDER BY version');
      expect(rows.map((r) => r.name)).toEqual(all);
      expect(await migrate(pools[0]!)).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await admin.query(`DROP DATABASE ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      await admin.end();
    }
  });
});
