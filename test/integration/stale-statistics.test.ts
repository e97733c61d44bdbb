/**
 * The step path's statements find their runs by id, whatever the planner believes about run statuses.
 * Its statistics come from the last ANALYZE: a queue analyzed while its runs waited says "no run is
 * RUNNING" until the next one, after thousands were claimed. A statement that tested `status =
 * 'RUNNING'` as an index condition then read every run in flight through run_status_idx for each run it
 * looked up (at 10,000 in flight: seconds per batch, a minute per lease renewal, measured).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaSql } from '../../src/db/schema.ts';
import { claimSql } from '../../src/store/claim-sql.ts';
import { leaseRenewalSql } from '../../src/store/lease-renewal.ts';
import { type BatchStatement, stepBatchSql } from '../../src/store/step-batch-sql.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

const { CLAIMS, MODEL_STEP_FORMS, TOOL_RESULTS } = stepBatchSql(schemaSql());
const { RENEW_LEASES } = leaseRenewalSql(schemaSql());
const { claim: CLAIM } = claimSql(schemaSql());

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query('ALTER TABLE durable_agent.run SET (autovacuum_enabled = false)');
  for (let i = 0; i < 300; i++) await newRun(db.records);
  await db.pool.query('ANALYZE durable_agent.run'); // every run QUEUED
  await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 300); // every run RUNNING, unknown to the planner
});
afterAll(async () => {
  await db.close();
});

interface PlanReads {
  /** The indexes the plan reads table `run` through. */
  runIndexes: string[];
  /** Nested loops that scan a CTE once per outer row: rows × rows, the shape that cost seconds. */
  cteLoops: number;
  /** Scans of the whole of table `run`. */
  runSeqScans: number;
}

/** What the plan of `text` (EXPLAIN, planned with `values`) reads, and how. */
async function planOf(text: string, values: unknown[]): Promise<PlanReads> {
  const { rows } = await db.pool.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
  return readsOf(rows[0]['QUERY PLAN'][0].Plan);
}

/**
 * What the generic plan of `text` reads: the plan a worker's step-write connections run it with
 * (pool.ts, `genericPlans`), made without its values. `types` are its parameters' types.
 */
async function genericPlanOf(on: TestDatabase, text: string, types: string[], values: unknown[]): Promise<PlanReads> {
  const client = await on.pool.connect();
  try {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE generic_plan_of (${types.join(', ')}) AS ${text}`);
    const literals = values.map((v) => (v === null ? 'NULL' : client.escapeLiteral(String(v))));
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE generic_plan_of (${literals.join(', ')})`);
    return readsOf(rows[0]['QUERY PLAN'][0].Plan);
  } finally {
    await client.query('DEALLOCATE ALL; RESET plan_cache_mode');
    client.release();
  }
}

function readsOf(plan: Record<string, unknown>): PlanReads {
  const reads: PlanReads = { runIndexes: [], cteLoops: 0, runSeqScans: 0 };
  // A bitmap index scan names no table: its parent, the bitmap heap scan, does.
  const walk = (node: Record<string, unknown>, parentTable?: unknown) => {
    const table = node['Relation Name'] ?? (node['Node Type'] === 'Bitmap Index Scan' ? parentTable : undefined);
    if (table === 'run' && typeof node['Index Name'] === 'string') reads.runIndexes.push(node['Index Name']);
    const children = (node.Plans as Record<string, unknown>[] | undefined) ?? [];
    if (node['Node Type'] === 'Nested Loop' && children[1]?.['Node Type'] === 'CTE Scan') reads.cteLoops++;
    if (node['Node Type'] === 'Seq Scan' && table === 'run') reads.runSeqScans++;
    for (const child of children) walk(child, table);
  };
  walk(plan);
  return reads;
}

describe('with statistics that say no run is RUNNING', () => {
  it('the planner believes it (the premise of these tests)', async () => {
    const plain = await planOf(`SELECT id FROM durable_agent.run WHERE id = $1 AND status = 'RUNNING'`, [
      '00000000-0000-0000-0000-000000000000',
    ]);
    expect(plain.runIndexes).toEqual(['run_status_idx']);
  });

  it.each<[string, BatchStatement]>([
    ...[...MODEL_STEP_FORMS].map(([name, statement]): [string, BatchStatement] => [`a model step (${name})`, statement]),
    ['a tool result', TOOL_RESULTS],
    ['a claim', CLAIMS],
  ])('%s, alone and in a batch, reads runs through their primary key, if through any index', async (_what, statement) => {
    // (On a table this small a plan may also read it whole, which costs what the table holds, once.)
    for (const { text } of [statement.one, statement.many]) {
      const plan = await planOf(text, ['[]']);
      expect(plan.runIndexes.filter((index) => index !== 'run_pkey')).toEqual([]);
      expect(plan.cteLoops).toBe(0);
    }
  });

  it('a lease renewal of every run held reads runs through their primary key, if through any index', async () => {
    const { rows } = await db.pool.query<{ id: string; lease_token: string }>('SELECT id, lease_token FROM durable_agent.run');
    const plan = await planOf(RENEW_LEASES.text, ['A', 30_000, rows.map((r) => r.id), rows.map((r) => r.lease_token), 25_000]);
    expect(plan.runIndexes.filter((index) => index !== 'run_pkey')).toEqual([]);
    expect(plan.cteLoops).toBe(0);
    // …and renews what it must, answering every run.
    const held = rows.map((r) => ({ runId: r.id as never, token: r.lease_token }));
    expect(await db.store.renewLeases({ worker: 'A', leaseMs: 30_000 }, held, 25_000)).toHaveLength(300);
  });
});

describe('on a table of many runs', () => {
  let many: TestDatabase;
  beforeAll(async () => {
    many = await testDatabase();
    // Finished runs, and a few queued and running: a table the planner would rather not read whole.
    await many.pool
      .query(`INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, run_at, locked_until)
      SELECT gen_random_uuid(), CASE WHEN g % 110 < 100 THEN 'SUCCEEDED' WHEN g % 110 < 105 THEN 'RUNNING' ELSE 'QUEUED' END,
             'x', 'm', 1000, 10, now() + interval '1 hour', now() - interval '1 second', now() + interval '30 seconds'
      FROM generate_series(1, 20000) AS g`);
    await many.pool.query('ANALYZE durable_agent.run');
  });
  afterAll(async () => {
    await many?.close();
  });

  it.each<[string, BatchStatement]>([
    ...[...MODEL_STEP_FORMS].map(([name, statement]): [string, BatchStatement] => [`a model step (${name})`, statement]),
    ['a tool result', TOOL_RESULTS],
    ['a claim', CLAIMS],
  ])(
    '%s, with the generic plan it runs with, alone and in a batch, reads runs through their primary key only',
    async (_what, statement) => {
      for (const { text } of [statement.one, statement.many]) {
        const plan = await genericPlanOf(many, text, ['json'], ['[]']);
        expect(plan.runIndexes.filter((index) => index !== 'run_pkey')).toEqual([]);
        expect(plan.runSeqScans).toBe(0);
        expect(plan.cteLoops).toBe(0);
      }
    },
  );

  it('a claim, with the generic plan it runs with, updates the runs it takes through their primary key, never reading the table whole', async () => {
    const types = ['text', 'int', 'int', 'uuid[]', 'text[]', 'int', 'int[]'];
    const plan = await genericPlanOf(many, CLAIM.text, types, ['B', 30_000, 10, '{}', '{demo}', null, '{}']);
    expect(plan.runIndexes).toContain('run_pkey');
    expect(plan.runSeqScans).toBe(0);
  });
});
