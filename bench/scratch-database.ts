/**
 * The benches' database: a scratch database on the PostgreSQL the project would use (DATABASE_URL, or
 * the embedded one under ./.data), migrated, dropped afterwards; and bench/results/latest.json, where
 * each bench merges its figures into those already there.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/config/environment.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool, poolSizeFor, resolveDatabase } from '../src/db/pool.ts';
import { BATCH_CONNECTIONS } from '../src/runtime/connection-budget.ts';

export const LATEST = path.resolve('bench/results/latest.json');

export async function withScratchDatabase<T>(
  work: (url: string, pool: pg.Pool, description: string, batches: pg.Pool) => Promise<T>,
): Promise<T> {
  const database = await resolveDatabase(loadConfig());
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const scratch = `durable_agent_bench_${process.pid}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(scratch)}`);
  const url = new URL(database.url);
  url.pathname = `/${scratch}`;
  const pool = createPool(url.toString(), poolSizeFor(100));
  // A worker's connections for its step writes and claims (start-runtime.ts), for the stores that write as a worker does.
  const batches = createPool(url.toString(), BATCH_CONNECTIONS, { genericPlans: true });
  try {
    await migrate(pool);
    return await work(url.toString(), pool, database.description, batches);
  } finally {
    await Promise.all([pool.end(), batches.end()]);
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(scratch)} WITH (FORCE)`);
    await admin.end();
    await database.release();
  }
}

/** Writes `figures` over the same keys of bench/results/latest.json, keeping the others. */
export function mergeIntoLatest(figures: Record<string, unknown>): void {
  let kept: Record<string, unknown> = {};
  try {
    kept = JSON.parse(fs.readFileSync(LATEST, 'utf8'));
  } catch {
    // No figures yet (or unreadable ones): start afresh.
  }
  fs.mkdirSync(path.dirname(LATEST), { recursive: true });
  fs.writeFileSync(LATEST, JSON.stringify({ ...kept, ...figures }, null, 2) + '\n');
  console.log(`\nwrote ${path.relative(process.cwd(), LATEST)}`);
}
