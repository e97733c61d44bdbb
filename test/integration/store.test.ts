import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { listMigrations, migrate } from '../../src/db/migrate.ts';
import { createPool } from '../../src/db/pool.ts';
import { StepNotStartedError } from '../../src/domain/errors.ts';
import { schemaSql } from '../../src/db/schema.ts';
import { claimParams, claimSql } from '../../src/store/claim-sql.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun } from '../support/engine.ts';
import { distinctInHeap } from '../support/heap-snapshot.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

describe('store', () => {
  it('claims with an index scan when 100k finished runs and 20k queued runs of another agent share the table', async () => {
    await db.pool.query(
      `INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, finished_at, agent)
       SELECT gen_random_uuid(), 'SUCCEEDED', 'old', 'm', 100, 10, now(), now(), 'demo' FROM generate_series(1, 100000)`,
    );
    // Queued before ours, for an agent this worker does not serve: the claim must not walk through them.
    await db.pool.query(
      `INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, run_at, agent)
       SELECT gen_random_uuid(), 'QUEUED', 'other', 'm', 100, 10, now() + interval '1 hour', now() - interval '1 hour', 'other'
       FROM generate_series(1, 20000)`,
    );
    const live = await newRun(db.records, 'live');
    await db.pool.query('ANALYZE durable_agent.run');
    // The plan of the claim statement itself, with the parameters a worker passes.
    const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${claimSql(schemaSql()).claim.text}`,
      claimParams('W', 1000, 10, [], ['demo']),
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Scan using run_agent_claim_idx on run/);
    expect(plan).not.toMatch(/Seq Scan on run\b/);
    const claimed = await db.store.claim({ worker: 'W', leaseMs: 1000 }, 10);
    expect(claimed.map((r) => r.id)).toEqual([live.id]);
    expect(claimed[0]).toMatchObject({ status: 'RUNNING', lockedBy: 'W', attempts: 1, hasSteps: false });
    await db.pool.query(`DELETE FROM durable_agent.run WHERE agent = 'other' OR id = $1`, [live.id]);
  });

  it('keeps one copy of the names the runs it claims repeat: they are held for their whole attempt', async () => {
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED' WHERE status IN ('QUEUED', 'RUNNING')`);
    await Promise.all([newRun(db.records, 'first'), newRun(db.records, 'second')]);
    const [a, b] = await db.store.claim({ worker: 'interning-worker', leaseMs: 10_000 }, 2);
    const names = (r: typeof a) => [r!.agent, r!.tenant, r!.status, r!.model, r!.lockedBy];
    expect(names(a)).toEqual(names(b));
    expect(await distinctInHeap([...names(a), ...names(b)])).toBe(5);
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED' WHERE id = ANY($1)`, [[a!.id, b!.id]]);
  });

  it('records a tool call once per tool_use id, whoever starts it again', async () => {
    const run = await newRun(db.records);
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1);
    expect(claimed?.id).toBe(run.id);
    const owner = claimed!.lease;
    const first = await db.store.startTool(run.id, owner, { seq: 1, toolUseId: 'toolu_x', toolName: 'lookup' });
    const again = await db.store.startTool(run.id, owner, { seq: 2, toolUseId: 'toolu_x', toolName: 'lookup' });
    expect(first).toMatchObject({ seq: 1, created: true });
    expect(again).toMatchObject({ seq: 1, created: false });
    await db.store.finishTool(run.id, owner, { toolUseId: 'toolu_x', status: 'DONE', result: 'ok', latencyMs: 3 });
    await expect(
      db.store.finishTool(run.id, owner, { toolUseId: 'toolu_x', status: 'DONE', result: 'twice', latencyMs: 3 }),
    ).rejects.toThrow(StepNotStartedError);
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.status, s.response])).toEqual([[1, 'DONE', 'ok']]);
  });

  it('counts in the queue depth exactly the runs a claim would take', async () => {
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED' WHERE status IN ('QUEUED', 'RUNNING')`);
    const [due, later, leased, lapsed] = await Promise.all([1, 2, 3, 4].map((i) => newRun(db.records, `run ${i}`)));
    await db.pool.query(`UPDATE durable_agent.run SET run_at = now() + interval '1 hour' WHERE id = $1`, [later!.id]);
    await db.pool.query(
      `UPDATE durable_agent.run SET status = 'RUNNING', locked_by = 'w', locked_until = now() + interval '1 minute' WHERE id = ANY($1)`,
      [[leased!.id, lapsed!.id]],
    );
    await expireLease(db.pool, lapsed!.id);

    expect(await new RunStats(db.pool).queueDepth()).toEqual({ demo: 2 });
    const claimed = await db.store.claim({ worker: 'W', leaseMs: 1000 }, 10);
    expect(claimed.map((r) => r.id).sort()).toEqual([due!.id, lapsed!.id].sort());
    expect(await new RunStats(db.pool).queueDepth()).toEqual({});
  });

  it('finishes a tool step only if it is STARTED, and otherwise commits nothing (no renewal, no next STARTED row)', async () => {
    const run = await newRun(db.records);
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1);
    const owner = claimed!.lease;
    await db.store.startTool(run.id, owner, { seq: 1, toolUseId: 'toolu_a', toolName: 'lookup' });
    await db.store.finishTool(run.id, owner, { toolUseId: 'toolu_a', status: 'DONE', result: 'ok', latencyMs: 1 });
    const before = await db.records.state(run.id);

    const again = db.store.finishTool(
      run.id,
      { ...owner, leaseMs: 600_000 },
      { toolUseId: 'toolu_a', status: 'DONE', result: 'twice', latencyMs: 1 },
      { seq: 2, toolUseId: 'toolu_b', toolName: 'lookup' },
    );
    await expect(again).rejects.toBeInstanceOf(StepNotStartedError);
    await expect(again).rejects.toThrow('tool step toolu_a of run ' + run.id + ' is not STARTED (it is DONE)');
    await expect(
      db.store.finishTool(run.id, owner, { toolUseId: 'toolu_never', status: 'DONE', result: 'x', latencyMs: 1 }),
    ).rejects.toThrow(/toolu_never .* is not STARTED \(no such step\)/);

    expect((await db.records.state(run.id)).lockedUntil).toEqual(before.lockedUntil);
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.toolUseId, s.status, s.response])).toEqual([[1, 'toolu_a', 'DONE', 'ok']]);
  });

  it('reads a timeline without the bodies of the steps', async () => {
    const run = await newRun(db.records);
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1);
    const owner = claimed!.lease;
    await db.store.startTool(run.id, owner, { seq: 1, toolUseId: 'toolu_big', toolName: 'fetch' });
    await db.store.finishTool(run.id, owner, { toolUseId: 'toolu_big', status: 'DONE', result: 'x'.repeat(1_000_000), latencyMs: 1 });

    const timeline = await db.records.timeline(run.id);

    expect(timeline).toHaveLength(1);
    expect(timeline[0]).toMatchObject({ seq: 1, kind: 'TOOL', status: 'DONE', toolUseId: 'toolu_big', worker: 'W' });
    expect(Object.keys(timeline[0]!)).not.toContain('response');
    expect(Object.keys(timeline[0]!)).not.toContain('request');
  });

  it('stores a shared text once, by digest', async () => {
    const a = await db.store.putBlob('You are helpful.');
    const b = await db.store.putBlob('You are helpful.');
    expect(a).toBe(b);
    expect(await db.store.blob(a)).toBe('You are helpful.');
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM durable_agent.content_blob WHERE digest = $1', [a]);
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
      const { rows } = await pools[0]!.query('SELECT name FROM durable_agent.schema_migration ORDER BY version');
      expect(rows.map((r) => r.name)).toEqual(all);
      expect(await migrate(pools[0]!)).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await admin.query(`DROP DATABASE ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      await admin.end();
    }
  });
});
