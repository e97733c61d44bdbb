/**
 * A worker whose liveness session drops stops driving: no step starts until the session is back under
 * the same lock. The step in flight finishes (its writes are fenced as ever); the next one waits.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { heldTool, newRun, testWorker, waitFor } from '../support/engine.ts';
import { livenessSession } from '../../src/leases/liveness-session.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

const LIVENESS_LOCK = `hashtext('durable_agent.worker_liveness')`;

it('starts no step while its liveness session is down, and goes on with the same run once it is back under the same lock', async () => {
  const { tool: work, started, release } = heldTool();
  const calls: number[] = [];
  const llm = new ScriptedLlm()
    .then(() => {
      calls.push(Date.now());
      return response([{ type: 'tool_use', id: 'toolu_pause', name: 'work', input: {} }], 'tool_use', usage(100, 20));
    })
    .then(() => {
      calls.push(Date.now());
      return response([{ type: 'text', text: 'done' }], 'end_turn', usage(150, 5));
    });
  const run = await newRun(db.records, 'pause while the liveness session is away');
  // A grace of 10 s for an old session to go away: the lock held below looks like one, however slow the machine.
  const w = testWorker(db.store, llm, [work], {
    name: 'paused-A',
    databaseUrl: db.url,
    liveness: livenessSession(db.url, { graceMs: 10_000 }),
  });
  await w.start();
  const holder = await db.pool.connect();
  try {
    await waitFor('the tool to start', async () => started(), 10_000);
    const { rows } = await db.pool.query<{ owner_lock: number }>('SELECT owner_lock FROM durable_agent.run WHERE id = $1', [run.id]);
    const key = rows[0]!.owner_lock;
    // Cut the worker's liveness session and keep its lock from it for a while (less than the grace it
    // gives an old session to go away, so it takes the same lock back).
    await holder.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks
        WHERE locktype = 'advisory' AND objsubid = 2 AND objid = $1::int::oid AND classid = ${LIVENESS_LOCK}::oid
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [key],
    );
    await holder.query(`SELECT pg_advisory_lock(${LIVENESS_LOCK}, $1)`, [key]);
    release(); // the step in flight ends meanwhile; the model call after it must wait
    await waitFor('the tool step to be recorded', async () => (await db.store.steps(run.id)).length === 2, 10_000);
    // Kept: that no model call starts while the lock is held elsewhere is the test.
    await new Promise((r) => setTimeout(r, 500));
    expect(calls).toHaveLength(1);
    const releasedAt = Date.now();
    await holder.query(`SELECT pg_advisory_unlock(${LIVENESS_LOCK}, $1)`, [key]);
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    expect(calls).toHaveLength(2);
    expect(calls[1]!).toBeGreaterThanOrEqual(releasedAt);
    // The same claim, the same lock: nothing was taken over, nothing repeated.
    const steps = await db.store.steps(run.id);
    expect(steps.map((s) => [s.kind, s.worker])).toEqual([
      ['MODEL', 'paused-A'],
      ['TOOL', 'paused-A'],
      ['MODEL', 'paused-A'],
    ]);
    expect(await db.records.state(run.id)).toMatchObject({ attempts: 1 });
    const { rows: after } = await db.pool.query<{ owner_lock: number }>('SELECT owner_lock FROM durable_agent.run WHERE id = $1', [run.id]);
    expect(after[0]!.owner_lock).toBe(key);
  } finally {
    holder.release();
    await w.stop();
  }
});
