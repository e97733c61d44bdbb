/**
 * One PostgreSQL for the whole suite: DATABASE_URL when set (CI's second pass), otherwise a throwaway
 * embedded cluster in a temporary directory. A template database is migrated once; every test file
 * clones it (see db.ts), which takes milliseconds and isolates the files from each other.
 *
 * The integration and process projects both name this file; vitest loads it once per project, so the
 * cluster lives on globalThis and the last project to tear down stops it. Unit tests name no setup and
 * never start PostgreSQL.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { ensureEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.ts';
import { DEMO_MIGRATIONS_DIR } from '../../src/demo/migrations-dir.ts';
import { createPool } from '../../src/db/pool.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    templateDb: string;
    dbPrefix: string;
  }
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

interface SharedDatabase {
  adminUrl: string;
  templateDb: string;
  dbPrefix: string;
  users: number;
  stop(): Promise<void>;
}

const SHARED = Symbol.for('durable-agent.test.database');
type WithShared = typeof globalThis & { [SHARED]?: Promise<SharedDatabase> };

async function startDatabase(): Promise<SharedDatabase> {
  let dataDir: string | null = null;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-test-'));
    fs.chmodSync(dataDir, 0o755);
    adminUrl = (await ensureEmbeddedPostgres(dataDir)).adminUrl;
  }
  const dbPrefix = `da_test_${process.pid}_${Date.now().toString(36)}`;
  const templateDb = `${dbPrefix}_tpl`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(templateDb)}`);
  const pool = createPool(withDatabase(adminUrl, templateDb), 2);
  await migrate(pool, { dirs: [MIGRATIONS_DIR, DEMO_MIGRATIONS_DIR] });
  await pool.end();
  return {
    adminUrl,
    templateDb,
    dbPrefix,
    users: 0,
    async stop() {
      const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${dbPrefix}%`]);
      for (const { datname } of rows) {
        await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`).catch(() => {});
      }
      await admin.end();
      if (dataDir) {
        await stopEmbeddedPostgres(dataDir);
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

export default async function setup(project: TestProject) {
  const shared = globalThis as WithShared;
  shared[SHARED] ??= startDatabase();
  const db = await shared[SHARED];
  db.users++;
  project.provide('adminUrl', db.adminUrl);
  project.provide('templateDb', db.templateDb);
  project.provide('dbPrefix', db.dbPrefix);

  return async () => {
    if (--db.users > 0) return;
    delete shared[SHARED];
    await db.stop();
  };
}
