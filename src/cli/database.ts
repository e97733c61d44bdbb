/**
 * The database for commands that work on it directly (`keys`, `runs purge`): the one the server uses
 * (DATABASE_URL, or the embedded PostgreSQL under DATA_DIR), migrated, for the length of one command.
 */
import type pg from 'pg';

/** What a command works on: the pool, and the schema its stores name (DATABASE_SCHEMA). */
export interface CommandDatabase {
  pool: pg.Pool;
  schema: string;
  description: string;
}

export async function withDatabase<T>(work: (db: CommandDatabase) => Promise<T>): Promise<T> {
  const { loadConfig } = await import('../config/environment.ts');
  const { checkConnection, createPool, resolveDatabase } = await import('../db/pool.ts');
  const { migrate } = await import('../db/migrate.ts');
  const config = loadConfig();
  const database = await resolveDatabase(config);
  const pool = createPool(database.url, 2, { prepared: !database.transactionPooler });
  try {
    await checkConnection(pool, database);
    await migrate(pool, { schema: config.databaseSchema });
    return await work({ pool, schema: config.databaseSchema, description: database.description });
  } finally {
    await pool.end();
    await database.release();
  }
}
