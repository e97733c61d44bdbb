/**
 * Owner liveness at the store: a run remembers its claimer's lock; the probe finds the lock gone the
 * moment that session ends; the claim takes such a run over whatever its lease says, and no other.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { livenessSession } from '../../src/leases/liveness-session.ts';
import { schemaSql } from '../../src/db/schema.ts';
import { livenessSql, type ProbeRow } from '../../src/store/liveness-sql.ts';

const { PROBE, TAKE_NEW_KEY } = livenessSql(schemaSql());
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

async function session(): Promise<{ client: pg.Client; key: number }> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query<{ key: number }>(TAKE_NEW_KEY);
  return { client, key: rows[0]!.key };
}

it('a run whose owner session ended is found orphaned and taken over before its lease lapses', async () => {
  const a = await session();
  const b = await session();
  expect(b.key).not.toBe(a.key); // keys come from a sequence

  const run = await newRun(db.records, 'orphan me');
  const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 60_000 }, 1, [], undefined, { ownerLock: a.key, orphaned: [] });
  expect(claimed!.id).toBe(run.id);

  const probe = async () => (await b.client.query<ProbeRow>(PROBE, [b.key])).rows[0]!;
  expect(await probe()).toEqual({ mine: true, orphaned: [] }); // A lives

  // Not claimable while A lives: its lease holds.
  expect(await db.store.claim({ worker: 'B', leaseMs: 60_000 }, 1, [], undefined, { ownerLock: b.key, orphaned: [] })).toEqual([]);

  await a.client.end(); // A's process dies: PostgreSQL drops its lock with its session
  const found = await waitFor(
    "A's lock to be gone",
    async () => {
      const row = await probe();
      return row.orphaned.length > 0 && row;
    },
    5_000,
  );
  expect(found.orphaned).toEqual([a.key]);

  const [taken] = await db.store.claim({ worker: 'B', leaseMs: 60_000 }, 1, [], undefined, { ownerLock: b.key, orphaned: found.orphaned });
  expect(taken).toMatchObject({ id: run.id, attempts: 2 });
  expect(taken!.lease.token).not.toBe(claimed!.lease.token); // the old claim is fenced off
  expect((await probe()).orphaned).toEqual([]); // now B's, and B lives
  await db.store.finish(run.id, taken!.lease, { status: 'SUCCEEDED', output: 'done' });
  await b.client.end();
});

it('runs claimed with no owner lock (the lease alone) are never reported orphaned', async () => {
  const b = await session();
  await newRun(db.records, 'lease only');
  await db.store.claim({ worker: 'C', leaseMs: 60_000 }, 1, [], undefined, { ownerLock: null, orphaned: [] });
  expect((await b.client.query<ProbeRow>(PROBE, [b.key])).rows[0]!.orphaned).toEqual([]);
  await b.client.end();
});

it("a session that comes back takes its own lock again and takes nobody's runs over until the others could come back too", async () => {
  const events: { what: string; at: number; keys?: number[] }[] = [];
  const factory = livenessSession(db.url, { intervalMs: 50, confirmMs: 200, rejoinMs: 1_500 });
  const live = factory({
    orphaned: (keys) => events.push({ what: 'orphaned', at: Date.now(), keys }),
    lost: () => events.push({ what: 'lost', at: Date.now() }),
    regained: () => events.push({ what: 'regained', at: Date.now() }),
  });
  try {
    await live.ready;
    const key = live.ownerLock() as number;
    expect(key).toEqual(expect.any(Number));
    // A dead worker's run: RUNNING under a lock nobody holds.
    const dead = await session();
    const run = await newRun(db.records, 'owned by a worker that dies with the server');
    await db.store.claim({ worker: 'D', leaseMs: 60_000 }, 1, [], undefined, { ownerLock: dead.key, orphaned: [] });

    // The server "restarts" for both: the dead worker's session and ours end in one statement.
    const { rows } = await dead.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    dead.client.on('error', () => {}); // its connection is about to be cut
    const terminatedAt = Date.now();
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND (application_name = 'durable-agent-liveness' OR pid = $1)`,
      [rows[0]!.pid],
    );
    await dead.client.end().catch(() => {});
    await waitFor('the session to take its lock back', async () => events.some((e) => e.what === 'regained'), 10_000);
    const back = events.find((e) => e.what === 'regained')!.at;
    expect(live.ownerLock()).toBe(key); // the same lock: nothing of its own was taken over

    await waitFor("the dead worker's lock to be reported", async () => events.some((e) => e.what === 'orphaned'), 10_000);
    const reported = events.find((e) => e.what === 'orphaned')!;
    expect(reported.keys).toEqual([dead.key]);
    // Not while the others could still be on their way back: rejoinMs after our own return (the
    // session sets its pause a moment before the listener hears it is back).
    expect(reported.at - back).toBeGreaterThanOrEqual(1_490);
    expect(reported.at).toBeGreaterThan(terminatedAt);
    expect(events.some((e) => e.what === 'lost')).toBe(false);
    await db.records.cancel(run.id);
  } finally {
    await live.close();
  }
});
