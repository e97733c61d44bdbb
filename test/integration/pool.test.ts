/** The project's connections and an embedding application's connections, side by side in one process. */
import v8 from 'node:v8';
import vm from 'node:vm';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPool } from '../../src/db/pool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const BIG = '9007199254740993'; // 2^53 + 1: exact as text, rounded as a JS number
const VALUES = `SELECT ${BIG}::int8 AS big, 12.5::numeric AS money`;

/**
 * A pool as an embedding application makes it, one connection, listened to for errors: pg-pool's end()
 * lets go of a connection before the server has closed it, the drop of the test database then
 * terminates it, and a pool nobody listens to throws that out of the socket's callback.
 */
const hostPool = (url: string) => new pg.Pool({ connectionString: url, max: 1 }).on('error', () => {});

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

it('parses int8 and numeric as numbers on its own pools, while a host pool in the same process keeps them as strings', async () => {
  const ours = createPool(db.url, 1);
  const host = hostPool(db.url);
  const hostClient = new pg.Client({ connectionString: db.url });
  try {
    await hostClient.connect();
    expect((await ours.query(VALUES)).rows[0]).toEqual({ big: Number(BIG), money: 12.5 });
    expect((await host.query(VALUES)).rows[0]).toEqual({ big: BIG, money: '12.5' });
    expect((await hostClient.query(VALUES)).rows[0]).toEqual({ big: BIG, money: '12.5' });
    expect(pg.types.getTypeParser(pg.types.builtins.INT8)(BIG)).toBe(BIG);
  } finally {
    await Promise.all([ours.end(), host.end(), hostClient.end()]);
  }
});

it('survives the backend of a checked-out connection being terminated between two statements: the next one fails, the pool goes on', async () => {
  const ours = createPool(db.url, 1);
  try {
    const client = await ours.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const ended = new Promise((r) => client.once('end', r));
    await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    // The connection's end arrives while no statement runs on it: an 'error' nobody listened to
    // would have ended the process here (pg emits it just before 'end').
    await ended;
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release();
    expect((await ours.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  } finally {
    await ours.end();
  }
});

/** How the statement `name` was planned on the connection that asks. */
const PLANS = `SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name = $1`;

it('with genericPlans, plans a named statement once for every execution; without, with its values on each of the first five', async () => {
  const statement = (name: string) => ({ name, text: 'SELECT count(*)::int AS n FROM pg_class WHERE relpages > $1', values: [0] });
  for (const [genericPlans, expected] of [
    [true, { generic: 7, custom: 0 }],
    [false, { generic: 2, custom: 5 }],
  ] as const) {
    // One connection: the statement and the question about it meet on the same backend.
    const ours = createPool(db.url, 1, { genericPlans });
    try {
      for (let i = 0; i < 7; i++) await ours.query(statement('plan_count'));
      expect((await ours.query(PLANS, ['plan_count'])).rows[0]).toEqual(expected);
      // The setting is the connection's: an unnamed statement sent there would get a generic plan too
      // (which is why the stores send only NamedStatements to such a pool).
      expect((await ours.query(`SELECT current_setting('plan_cache_mode') AS mode`)).rows[0]).toEqual({
        mode: genericPlans ? 'force_generic_plan' : 'auto',
      });
    } finally {
      await ours.end();
    }
  }
});

/** A full collection, from V8 itself (the test process is not started with --expose-gc). */
const collect: () => void = (() => {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
})();

/** Whether the rows of the query that made `pool` open its connection are still reachable once it is idle. */
async function keepsFirstResult(pool: pg.Pool): Promise<boolean> {
  const rows = await (async () => new WeakRef((await pool.query(`SELECT repeat('x', 1000) AS text FROM generate_series(1, 100)`)).rows))();
  await pool.query('SELECT 1'); // the same connection, still open and idle
  await new Promise((r) => setImmediate(r));
  collect();
  return rows.deref() !== undefined;
}

it("lets go of the result of the query a connection was opened for, while plain pg's pool keeps it as long as the connection lives", async () => {
  const ours = createPool(db.url, 1);
  const unprepared = createPool(db.url, 1, { prepared: false });
  const plain = hostPool(db.url);
  try {
    expect(await keepsFirstResult(ours)).toBe(false);
    expect(await keepsFirstResult(unprepared)).toBe(false);
    // What the pool's client works around: should this ever be false, pg no longer keeps it either.
    expect(await keepsFirstResult(plain)).toBe(true);
  } finally {
    await Promise.all([ours.end(), unprepared.end(), plain.end()]);
  }
});
