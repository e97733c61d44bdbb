/** The migration runner on an empty database of its own, with migrations written for the test. */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { createPool } from '../../src/db/pool.ts';

let admin: pg.Client;
let name: string;
let pool: pg.Pool;
let dir: string;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: inject('adminUrl') });
  await admin.connect();
  name = `${inject('dbPrefix')}_migrate_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  const url = new URL(inject('adminUrl'));
  url.pathname = `/${name}`;
  pool = createPool(url.toString(), 2);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-migrations-'));
});
afterAll(async () => {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  await admin.end();
  fs.rmSync(dir, { recursive: true, force: true });
});

const tables = async () =>
  (await pool.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)).rows.map((r) => r.t);
const recorded = async () => (await pool.query<{ name: string }>('SELECT name FROM schema_migration ORDER BY version')).rows.map((r) => r.name);

it('rolls a failing migration back whole, records nothing of it, stops there, and applies it once it is fixed', async () => {
  fs.writeFileSync(path.join(dir, '0001_first.sql'), 'CREATE TABLE first_table (id int PRIMARY KEY);');
  // The table is created, then the second statement fails: the table must not survive.
  fs.writeFileSync(path.join(dir, '0002_broken.sql'), `CREATE TABLE broken_table (n int);\nINSERT INTO broken_table VALUES ('not a number');`);
  fs.writeFileSync(path.join(dir, '0003_after.sql'), 'CREATE TABLE after_table (id int);');

  await expect(migrate(pool, dir)).rejects.toThrow(/^migration 0002_broken failed: invalid input syntax for type integer/);
  expect(await tables()).toEqual(['first_table', 'schema_migration']);
  expect(await recorded()).toEqual(['0001_first']);

  fs.writeFileSync(path.join(dir, '0002_broken.sql'), `CREATE TABLE broken_table (n int);\nINSERT INTO broken_table VALUES (1);`);
  expect(await migrate(pool, dir)).toEqual(['0002_broken', '0003_after']);
  expect(await tables()).toEqual(['after_table', 'broken_table', 'first_table', 'schema_migration']);
  expect(await recorded()).toEqual(['0001_first', '0002_broken', '0003_after']);
  expect(await migrate(pool, dir)).toEqual([]);
});
