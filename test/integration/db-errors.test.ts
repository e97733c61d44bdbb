/** Transient or permanent, decided on errors real PostgreSQL and node-postgres produce. */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { isTransientDatabaseError } from '../../src/core/transient-errors.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

/** The error `fn` rejects with (the test fails when it resolves). */
async function failure(fn: () => Promise<unknown>): Promise<unknown> {
  return fn().then(
    () => expect.unreachable('expected a failure'),
    (e: unknown) => e,
  );
}

describe('transient: the same statement may succeed a moment later', () => {
  it('a server that refuses connections', async () => {
    const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/x` });
    const e = await failure(() => pool.query('SELECT 1'));
    await pool.end();
    expect(isTransientDatabaseError(e)).toBe(true);
  });

  it('a connection terminated under a query, and the next query on it', async () => {
    const client = new pg.Client({ connectionString: db.url });
    client.on('error', () => {});
    await client.connect();
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const sleeping = failure(() => client.query('SELECT pg_sleep(30)'));
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(isTransientDatabaseError(await sleeping)).toBe(true);
    expect(isTransientDatabaseError(await failure(() => client.query('SELECT 1')))).toBe(true);
    await client.end().catch(() => {});
  });

  it('no connection free within the pool timeout', async () => {
    // Listened to for errors: its connection may still be closing when the file's database is dropped.
    const pool = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 1000 }).on('error', () => {});
    const held = await pool.connect();
    const e = await failure(() => pool.query('SELECT 1'));
    held.release();
    await pool.end();
    expect((e as Error).message).toBe('timeout exceeded when trying to connect');
    expect(isTransientDatabaseError(e)).toBe(true);
  });

  it('a serialization failure', async () => {
    await db.pool.query('CREATE TABLE serial_race (v int)');
    const [a, b] = [await db.pool.connect(), await db.pool.connect()];
    try {
      for (const c of [a, b]) await c.query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM serial_race');
      await a.query('INSERT INTO serial_race VALUES (1)');
      await b.query('INSERT INTO serial_race VALUES (2)');
      await a.query('COMMIT');
      const e = await failure(() => b.query('COMMIT'));
      expect((e as { code?: string }).code).toBe('40001');
      expect(isTransientDatabaseError(e)).toBe(true);
    } finally {
      for (const c of [a, b]) {
        await c.query('ROLLBACK').catch(() => {});
        c.release();
      }
    }
  });
});

describe('permanent: it fails the same way every time', () => {
  it.each([
    ['a value jsonb cannot hold', `SELECT '{"a":"\\ud800"}'::jsonb`, '22P02'],
    ['a NUL in text', `SELECT convert_from('\\x00'::bytea, 'UTF8')`, '22021'],
    ['an integer out of range', 'SELECT 2147483648::int4', '22003'],
    ['a syntax error', 'SELEC 1', '42601'],
    ['a missing table', 'SELECT * FROM no_such_table', '42P01'],
  ])('%s', async (_what, sql, sqlstate) => {
    const e = await failure(() => db.pool.query(sql));
    expect((e as { code?: string }).code).toBe(sqlstate);
    expect(isTransientDatabaseError(e)).toBe(false);
  });

  it('a duplicate key, and errors that are not the database at all', async () => {
    await db.pool.query('CREATE TABLE unique_once (k int PRIMARY KEY); INSERT INTO unique_once VALUES (1)');
    const e = await failure(() => db.pool.query('INSERT INTO unique_once VALUES (1)'));
    expect((e as { code?: string }).code).toBe('23505');
    expect(isTransientDatabaseError(e)).toBe(false);
    for (const other of [new Error('boom'), new TypeError('x is undefined'), null, 'ECONNREFUSED', { code: 42 }]) {
      expect(isTransientDatabaseError(other)).toBe(false);
    }
  });
});
