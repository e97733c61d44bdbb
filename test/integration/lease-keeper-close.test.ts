/**
 * A worker that stops closes its lease keeper; a renewal in flight at that moment has its connection
 * hung up under it. That is the keeper's own doing, not a failure to tell: the worker would log a lease
 * renewal failure after it had stopped.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { leaseKeeperThread } from '../../src/leases/lease-keeper-thread.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

it('tells no failure of the renewal its own close cut off', async () => {
  const run = await newRun(db.records, 'a renewal cut off by close');
  const owner = { worker: 'closing-keeper', leaseMs: 1_000 };
  const [claimed] = await db.store.claim(owner, 1);
  const failures: string[] = [];
  const keeper = leaseKeeperThread(db.url)(owner, 300, {
    lost: () => {},
    cancelRequested: () => {},
    failed: (e) => void failures.push(e.message),
  });
  // The run table locked elsewhere: the keeper's next renewal waits for it (a row lock it would skip).
  const blocker = await db.pool.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE durable_agent.run IN ACCESS EXCLUSIVE MODE');
    keeper.hold({ runId: run.id, token: claimed!.lease.token });
    await waitFor('the renewal to wait on the lock', async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'durable-agent-lease-keeper' AND wait_event_type = 'Lock'`,
      );
      return rows[0]!.n > 0;
    });
    await keeper.close();
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }
  // A message the thread sent as it ended arrives by now.
  await new Promise((r) => setTimeout(r, 200));
  expect(failures).toEqual([]);
});
