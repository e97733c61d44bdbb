/** The project's connections and an embedding application's connections, side by side in one process. */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPool } from '../../src/db/pool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const BIG = '9007199254740993'; // 2^53 + 1: exact as text, rounded as a JS number
const VALUES = `SELECT ${BIG}::int8 AS big, 12.5::numeric AS money`;

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

it('parses int8 and numeric as numbers on its own pools, while a host pool in the same process keeps them as strings', async () => {
  const ours = createPool(db.url, 1);
  const host = new pg.Pool({ connectionString: db.url, max: 1 });
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
