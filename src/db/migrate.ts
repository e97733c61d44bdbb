/**
 * The migration runner. Migrations are numbered `.sql` files; each runs once, in its own transaction,
 * with the project's schema as the transaction's search_path, so the files name tables bare and
 * everything they create lands in that schema. Several directories can be applied together (the demo
 * agent's tables are a set of their own, applied only where the demo agent is served); they share one
 * version space and one record, `<schema>.schema_migration`.
 *
 * Databases from before the project had its own schema kept its tables in `public`; the first
 * migration run adopts them (moved, not copied, in one transaction), so no run is lost.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { DEFAULT_SCHEMA } from './schema.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
export const MIGRATIONS_DIR = path.join(here, 'migrations');
/** Arbitrary, fixed: every migrator of this project takes the same advisory lock. */
const MIGRATION_LOCK_KEY = 7_391_204_117;

/** What the releases before the project's own schema created in `public` (migrations 0001 and 0002). */
const PUBLIC_TABLES = ['schema_migration', 'run', 'run_step', 'content_blob', 'demo_ticket', 'demo_ticket_comment'];
const PUBLIC_FUNCTIONS = ['run_notify_queued()'];

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export interface MigrateOptions {
  /** The migration sets to apply; the project's own when absent. */
  dirs?: readonly string[];
  /** The schema of the project's tables; `durable_agent` when absent. */
  schema?: string;
  /**
   * The agent that served this database before runs recorded their agent (the runtime's first
   * agent): the runs already there become its runs. `demo` when absent.
   */
  legacyAgent?: string;
}

export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f.replace(/\.sql$/, ''), sql: fs.readFileSync(path.join(dir, f), 'utf8') }));
}

function migrationsOf(dirs: readonly string[]): Migration[] {
  const all = dirs.flatMap((d) => listMigrations(d)).sort((a, b) => a.version - b.version);
  const clash = all.find((m, i) => i > 0 && all[i - 1]!.version === m.version);
  if (clash) throw new Error(`two migrations share version ${clash.version}`);
  return all;
}

/**
 * Applies the migrations not yet recorded, in order, each in its own transaction: one that fails
 * leaves nothing behind and is not recorded, and the ones after it are not tried. Each transaction
 * takes a transaction-level advisory lock and looks again at what is recorded, so a second migrator
 * waits and then finds nothing left to do. (A session-level lock would stay behind, held by whichever
 * server connection a pooler in transaction mode gave the statement, and stop every later migrator.)
 * Returns the names of the migrations this call applied.
 */
export async function migrate(pool: pg.Pool, opts: MigrateOptions = {}): Promise<string[]> {
  const schema = opts.schema ?? DEFAULT_SCHEMA;
  const s = pg.escapeIdentifier(schema);
  const migrations = migrationsOf(opts.dirs ?? [MIGRATIONS_DIR]);
  const client = await pool.connect();
  const locked = async <T>(work: () => Promise<T>): Promise<T> => {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const result = await work();
      await client.query('COMMIT');
      return result;
    } catch (e) {
      // A connection that broke would fail the rollback too; the work's own error is the one to tell.
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    }
  };
  const recorded = async (version: number | null) =>
    (
      await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_migration WHERE $1::int IS NULL OR version = $1`, [version])
    ).rows.map((r) => r.version);
  const applied: string[] = [];
  try {
    const done = await locked(async () => {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
      await adoptPublicTables(client, schema);
      await client.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_migration (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      return new Set(await recorded(null));
    });
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      const ran = await locked(async () => {
        if ((await recorded(m.version)).length) return false; // applied by another migrator meanwhile
        await client.query(`SET LOCAL search_path TO ${s}`);
        if (opts.legacyAgent) await client.query(`SELECT set_config('durable_agent_migration.legacy_agent', $1, true)`, [opts.legacyAgent]);
        await client.query(m.sql);
        await client.query(`INSERT INTO ${s}.schema_migration (version, name) VALUES ($1, $2)`, [m.version, m.name]);
        return true;
      }).catch((e: Error) => {
        throw new Error(`migration ${m.name} failed: ${e.message}`, { cause: e });
      });
      if (ran) applied.push(m.name);
    }
  } finally {
    client.release();
  }
  return applied;
}

/**
 * Moves the tables of a database set up before the project had its own schema from `public` into
 * `schema`, once, in the caller's transaction: only when `public.schema_migration` is ours (it
 * records 0001_runs) and the schema has no record yet. Indexes, constraints, triggers and identity sequences move with their tables.
 */
async function adoptPublicTables(client: pg.PoolClient, schema: string): Promise<void> {
  const { rows } = await client.query<{ ours: string | null; legacy: string | null }>(
    `SELECT to_regclass($1) AS ours, to_regclass('public.schema_migration') AS legacy`,
    [`${pg.escapeIdentifier(schema)}.schema_migration`],
  );
  if (rows[0]!.ours || !rows[0]!.legacy) return;
  // Somebody else's table of that name may have no such column: its error must not end the transaction.
  await client.query('SAVEPOINT legacy_check');
  const first = await client
    .query<{ name: string }>('SELECT name FROM public.schema_migration WHERE version = 1')
    .catch(async () => void (await client.query('ROLLBACK TO SAVEPOINT legacy_check')));
  if (first?.rows[0]?.name !== '0001_runs') return; // somebody else's table of that name
  const s = pg.escapeIdentifier(schema);
  try {
    for (const table of PUBLIC_TABLES) {
      const { rows: found } = await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [`public.${table}`]);
      if (found[0]!.t) await client.query(`ALTER TABLE public.${pg.escapeIdentifier(table)} SET SCHEMA ${s}`);
    }
    for (const fn of PUBLIC_FUNCTIONS) {
      const { rows: found } = await client.query<{ f: string | null }>('SELECT to_regprocedure($1) AS f', [`public.${fn}`]);
      if (found[0]!.f) await client.query(`ALTER FUNCTION public.${fn} SET SCHEMA ${s}`);
    }
  } catch (e) {
    throw new Error(`moving the tables of an earlier release from public into ${schema} failed: ${(e as Error).message}`, { cause: e });
  }
}
