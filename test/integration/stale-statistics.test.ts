/**
 * The step path's statements find their runs by id, whatever the planner believes about run statuses.
 * Its statistics come from the last ANALYZE: a queue analyzed while its runs waited says "no run is
 * RUNNING" until the next one, after thousands were claimed. A statement that tested `status =
 * 'RUNNING'` as an index condition then read every run in flight through run_status_idx for each run it
 * looked up (at 10,000 in flight: seconds per batch, a minute per lease renewal, measured).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RENEW_LEASES } from '../../src/store/lease-renewal.ts';
import { CLAIMS, FINAL_MODEL_STEPS, MODEL_STEPS, TOOL_RESULTS } from '../../src/store/step-batch-sql.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query('ALTER TABLE durable_agent.run SET (autovacuum_enabled = false)');
  for (let i = 0; i < 300; i++) await newRun(db.store);
  await db.pool.query('ANALYZE durable_agent.run'); // every run QUEUED
  await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 300); // every run RUNNING, unknown to the planner
});
afterAll(async () => {
  await db.close();
});

/** The indexes a plan reads table `run` through (EXPLAIN, the statement planned with `values`). */
async function runIndexes(text: string, values: unknown[]): Promise<string[]> {
  const { rows } = await db.pool.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
  const found: string[] = [];
  // A bitmap index scan names no table: its parent, the bitmap heap scan, does.
  const walk = (node: Record<string, unknown>, parentTable?: unknown) => {
    const table = node['Relation Name'] ?? (node['Node Type'] === 'Bitmap Index Scan' ? parentTable : undefined);
    if (table === 'run' && typeof node['Index Name'] === 'string') found.push(node['Index Name']);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child, table);
  };
  walk(rows[0]['QUERY PLAN'][0].Plan);
  return found;
}

describe('with statistics that say no run is RUNNING', () => {
  it('the planner believes it (the premise of these tests)', async () => {
    expect(await runIndexes(`SELECT id FROM durable_agent.run WHERE id = $1 AND status = 'RUNNING'`, ['00000000-0000-0000-0000-000000000000'])).toEqual(['run_status_idx']);
  });

  it.each([
    ['a model step', MODEL_STEPS],
    ['a final model step', FINAL_MODEL_STEPS],
    ['a tool result', TOOL_RESULTS],
    ['a claim', CLAIMS],
  ])('%s, alone and in a batch, reads runs through their primary key, if through any index', async (_what, statement) => {
    // (On a table this small a plan may also read it whole, which costs what the table holds, once.)
    for (const text of [statement.one, statement.many]) {
      expect((await runIndexes(text, ['[]'])).filter((index) => index !== 'run_pkey')).toEqual([]);
    }
  });

  it('a lease renewal of every run held reads no run through the status index', async () => {
    const { rows } = await db.pool.query<{ id: string; lease_token: string }>('SELECT id, lease_token FROM durable_agent.run');
    const indexes = await runIndexes(RENEW_LEASES, ['A', 30_000, rows.map((r) => r.id), rows.map((r) => r.lease_token), 25_000]);
    expect(indexes).not.toContain('run_status_idx');
    expect(indexes).not.toContain('run_status_created_idx');
    // …and renews what it must, answering every run.
    const held = rows.map((r) => ({ runId: r.id as never, token: r.lease_token }));
    expect(await db.store.renewLeases({ worker: 'A', leaseMs: 30_000 }, held, 25_000)).toHaveLength(300);
  });
});
