import pg from 'pg';
import type { Config } from '../config/environment.ts';
import { ConfigError } from '../domain/errors.ts';
import { PG_TYPES } from './pg-types.ts';
import { PoolClient } from './pool-client.ts';
import { behindTransactionPooler, UnpreparedClient } from './transaction-pooler.ts';

export const APPLICATION_NAME = 'durable-agent';
const EMBEDDED_DATABASE = 'durable_agent';

export interface Database {
  url: string;
  /** Where the data lives, safe to print: the URL without its password, or the embedded data directory. */
  description: string;
  embedded: boolean;
  /** `url` goes through a pooler in transaction mode: nothing is prepared by name on it, and no session is kept there. */
  transactionPooler: boolean;
  /**
   * Where a session connects (LISTEN, the liveness lock): DATABASE_DIRECT_URL when set (checked to reach
   * the same database), else `url` unless it is a transaction pooler; null: nowhere, so wake-ups are
   * polled and liveness is the lease. The embedded server is always its own session URL.
   */
  sessionUrl: string | null;
  /** Done with the database: the last process to leave the embedded server stops it. */
  release(): Promise<void>;
}

type DatabaseSettings = Pick<Config, 'databaseUrl' | 'databaseDirectUrl' | 'databasePooler' | 'dataDir'>;

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

/**
 * DATABASE_URL when set (and whether it is a transaction pooler, found out unless DATABASE_POOLER
 * says); otherwise the embedded PostgreSQL under DATA_DIR, started or found.
 */
export async function resolveDatabase(config: DatabaseSettings): Promise<Database> {
  if (config.databaseUrl) {
    const url = config.databaseUrl;
    const description = redactUrl(url);
    let transactionPooler = config.databasePooler === 'transaction';
    if (config.databasePooler === 'auto') {
      try {
        transactionPooler = await behindTransactionPooler(url);
      } catch (e) {
        throw new ConfigError(`cannot use the database ${description}: ${(e as Error).message}`);
      }
    }
    if (config.databaseDirectUrl) await sameDatabase(url, config.databaseDirectUrl);
    const sessionUrl = config.databaseDirectUrl ?? (transactionPooler ? null : url);
    return { url, description, embedded: false, transactionPooler, sessionUrl, release: async () => {} };
  }
  // Loaded only when used: a process given DATABASE_URL never carries the embedded server's package.
  const [{ attachEmbeddedPostgres }, { ensureDatabase }] = await Promise.all([import('./embedded-sharing.ts'), import('./embedded.ts')]);
  const cluster = await attachEmbeddedPostgres(config.dataDir);
  try {
    const url = await ensureDatabase(cluster.adminUrl, EMBEDDED_DATABASE);
    const description = `embedded PostgreSQL in ${cluster.dataDir} (port ${cluster.port})`;
    return {
      url,
      description,
      embedded: true,
      transactionPooler: false,
      sessionUrl: url,
      release: async () => void (await cluster.detach()),
    };
  } catch (e) {
    await cluster.detach();
    throw e;
  }
}

/**
 * Refuses a DATABASE_DIRECT_URL that cannot be reached or reaches another database than DATABASE_URL
 * (its LISTENs would hear nothing and its liveness lock would guard nothing): the same database name on
 * a server started at the same moment.
 */
async function sameDatabase(url: string, directUrl: string): Promise<void> {
  const identity = async (u: string, name: string) => {
    const c = new pg.Client({ connectionString: u, application_name: APPLICATION_NAME });
    c.on('error', () => {});
    try {
      await c.connect();
      const { rows } = await c.query<{ id: string }>(`SELECT current_database() || ' ' || pg_postmaster_start_time()::text AS id`);
      return rows[0]!.id;
    } catch (e) {
      throw new ConfigError(`cannot use the ${name} ${redactUrl(u)}: ${(e as Error).message}`);
    } finally {
      await c.end().catch(() => {});
    }
  };
  const [pooled, direct] = await Promise.all([identity(url, 'database'), identity(directUrl, 'DATABASE_DIRECT_URL')]);
  if (pooled !== direct) {
    throw new ConfigError(
      `DATABASE_DIRECT_URL ${redactUrl(directUrl)} reaches another database than DATABASE_URL ${redactUrl(url)}: it must be a direct connection to the same one`,
    );
  }
}

/**
 * Connections for a process driving `concurrency` runs at once. Steps mostly wait on the model, and a
 * step's write is one short statement, so a few connections serve many runs; more only adds backends
 * for the two cores to switch between (measured: 24 connections drive 100 runs faster than 40).
 */
export function poolSizeFor(concurrency: number): number {
  return Math.min(concurrency, 20) + 4;
}

export interface PoolOptions {
  /** Whether statements are prepared by name (kept per connection); false behind a transaction pooler. Default true. */
  prepared?: boolean;
  /**
   * A statement prepared by name gets its generic plan at once (plan_cache_mode=force_generic_plan),
   * instead of being planned with its values on each of its first five executions and on every one
   * after that whose generic plan costs more: for a pool that runs only statements whose plan does not
   * depend on their values (NamedStatements, schema.ts). The setting is the connection's: an unnamed
   * statement, and the queries of a function or trigger a statement runs, get generic plans there too.
   * Set on each connection as it opens (a SET, which a pooler in session mode keeps, where it may refuse
   * the `options` startup parameter); never with `prepared: false`, where every statement is unnamed.
   */
  genericPlans?: boolean;
}

/** pg-pool awaits what its onConnect hook returns, though its types say void. */
const setGenericPlans = ((client: pg.ClientBase) => client.query('SET plan_cache_mode = force_generic_plan')) as unknown as (
  client: pg.ClientBase,
) => void;

/**
 * A pool of up to `max` connections. It knows nothing of the schema: the statements name it
 * (schema.ts), so one pool could serve stores of several schemas.
 */
export function createPool(url: string, max = 10, opts: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: APPLICATION_NAME,
    types: PG_TYPES,
    Client: opts.prepared === false ? UnpreparedClient : PoolClient,
    // Before the connection is first handed out; should it fail, the connection is closed and the query fails.
    ...(opts.genericPlans && opts.prepared !== false ? { onConnect: setGenericPlans } : {}),
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // Nor must a checked-out one (a migration, a transaction) whose backend is terminated between two of
  // its statements: the pool listens only to idle clients. The next statement on it fails ("not
  // queryable", a transient error to the retrying writes), and the pool drops it when it is released.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** The oldest PostgreSQL major the runtime is tested on (14 to 18 are). */
export const OLDEST_POSTGRES = 14;

/**
 * Fails with one readable line naming the database (never its password) when it cannot be reached, or
 * is older than OLDEST_POSTGRES.
 */
export async function checkConnection(pool: pg.Pool, db: Pick<Database, 'description'>): Promise<void> {
  let version: number;
  try {
    const { rows } = await pool.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
    version = Number(rows[0]!.v);
  } catch (e) {
    throw new ConfigError(`cannot use the database ${db.description}: ${(e as Error).message}`);
  }
  refuseOldServer(version, db.description);
}

/** Throws a ConfigError for a `server_version_num` older than OLDEST_POSTGRES. */
export function refuseOldServer(versionNum: number, description: string): void {
  const major = Math.floor(versionNum / 10_000);
  if (major < OLDEST_POSTGRES) {
    throw new ConfigError(
      `the database ${description} is PostgreSQL ${major}: durable-agent needs PostgreSQL ${OLDEST_POSTGRES} or newer (14 to 18 are tested)`,
    );
  }
}
