/**
 * Waiting holds nothing: ten thousand WAITING runs take no lease, no worker memory, and no part of the
 * claim query's work. Idempotent creates race safely.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaSql } from '../../src/db/schema.ts';
import { CLAIMABLE, claimParams, claimSql } from '../../src/store/claim-sql.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { apiServer } from '../support/api-server.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const DEFAULTS = { agent: 'test-agent', model: 'default-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 };

let db: TestDatabase;
let app: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  app = apiServer(db, DEFAULTS);
});
afterAll(async () => {
  await app.close();
  await db.close();
});

describe('10,000 WAITING runs', () => {
  it('hold no lease and no worker memory; a worker claims past them with an index scan', async () => {
    // As the engine leaves them: waiting for approval (run_at infinity) or a timer an hour out.
    await db.pool.query(
      `INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, run_at, waiting)
       SELECT gen_random_uuid(), 'WAITING', 'waits ' || i, 'm', 1000, 10, now() + interval '1 hour',
              CASE WHEN i % 2 = 0 THEN 'infinity'::timestamptz ELSE now() + interval '1 hour' END,
              jsonb_build_object('kind', CASE WHEN i % 2 = 0 THEN 'approval' ELSE 'timer' END, 'since', now(), 'toolCalls', '[]'::jsonb)
       FROM generate_series(1, 10000) AS i`,
    );
    await db.pool.query('ANALYZE durable_agent.run');
    expect((await new RunStats(db.pool).countRunsByStatus()).WAITING).toBe(10_000);

    const run = await newRun(db.records, 'the one to drive');
    const worker = testWorker(db.store, new ScriptedLlm().thenText('done'), [], { name: 'W' });
    expect(await worker.runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    expect(await worker.runOnce()).toBeNull();
    expect(worker.activeRuns).toBe(0);
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM durable_agent.run WHERE status = 'WAITING' AND (locked_by IS NOT NULL OR lease_token IS NOT NULL)`,
    );
    expect(rows[0]!.n).toBe(0);

    const { rows: plan } = await db.pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${claimSql(schemaSql()).claim.text}`,
      claimParams('W', 1000, 10, [], ['demo']),
    );
    const text = plan.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/Index Scan using run_agent_claim_idx on run/);
    expect(text).not.toMatch(/Seq Scan on run\b/);
    // The claim stops at the first entry past now(): the waiting runs are never read.
    const { rows: analyzed } = await db.pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id FROM durable_agent.run WHERE ${CLAIMABLE} ORDER BY run_at LIMIT 10`,
    );
    const root = (analyzed[0]!['QUERY PLAN'] as unknown as { Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }[])[0]!
      .Plan;
    expect(root['Shared Hit Blocks'] + root['Shared Read Blocks']).toBeLessThan(20);
    expect(await db.store.nextDueInMs()).toBeGreaterThan(3_000_000); // the nearest timer, an hour out
  });
});

describe('Idempotency-Key on POST /api/runs', () => {
  const create = (key: string, body: unknown) =>
    app.inject({
      method: 'POST',
      url: '/api/runs',
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
    });

  it('creates one run for concurrent duplicates, answers it again (200), and refuses another body with the key (409)', async () => {
    const body = { input: 'close ACME-102', metadata: { a: 1, b: [1, 2] } };
    const answers = await Promise.all(Array.from({ length: 8 }, () => create('key-1', body)));
    const ids = new Set(answers.map((r) => r.json().id));
    expect(ids.size).toBe(1);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM durable_agent.run WHERE idempotency_key = 'key-1'`);
    expect(rows[0]!.n).toBe(1);

    const reordered = await create('key-1', { metadata: { b: [1, 2], a: 1 }, input: 'close ACME-102' });
    expect(reordered.statusCode).toBe(200);
    expect(reordered.json().id).toBe([...ids][0]);
    const other = await create('key-1', { input: 'close ACME-103' });
    expect(other.statusCode).toBe(409);
    expect(other.json().error.code).toBe('conflict');
    expect((await create('key-2', body)).statusCode).toBe(201); // another key: another run
  });

  it('frees a key after 24 hours', async () => {
    const first = (await create('key-old', { input: 'x' })).json().id;
    await db.pool.query(`UPDATE durable_agent.run SET created_at = now() - interval '25 hours' WHERE id = $1`, [first]);
    const again = await create('key-old', { input: 'another body is fine now' });
    expect(again.statusCode).toBe(201);
    expect(again.json().id).not.toBe(first);
  });

  it('refuses a startAt more than a year ahead, and shows a delayed run as QUEUED with its nextAttemptAt', async () => {
    const far = await app.inject({
      method: 'POST',
      url: '/api/runs',
      payload: { input: 'x', startAt: new Date(Date.now() + 400 * 86_400_000).toISOString() },
    });
    expect(far.statusCode).toBe(400);
    const startAt = new Date(Date.now() + 3_600_000).toISOString();
    const later = await app.inject({ method: 'POST', url: '/api/runs', payload: { input: 'x', startAt } });
    expect(later.statusCode).toBe(201);
    const run = (await app.inject({ method: 'GET', url: `/api/runs/${later.json().id}` })).json();
    expect(run).toMatchObject({ status: 'QUEUED', nextAttemptAt: startAt, waiting: null });
  });
});
