/**
 * Where the project's tables live: one PostgreSQL schema (`durable_agent` unless DATABASE_SCHEMA says
 * otherwise), so the user's `public` is never touched.
 *
 * Every statement names its tables in full, `<schema>.run`, so it works whatever the connection's
 * search_path is (a pooler in transaction mode included). The schema is a parameter of the statements:
 * each module that holds SQL builds its texts with `<module>Sql(schema)` (claimSql, runEventsSql, …),
 * and each store calls that once, in its constructor, with the schema of its options. What is spliced
 * in is a SchemaSql, made here only (schemaSql escapes the name once), and the builders take nothing
 * else: a name that was not escaped cannot reach a statement. Migrations are the exception: their
 * files name tables bare and run with the schema as the transaction's search_path (migrate.ts).
 */
import { createHash } from 'node:crypto';
import pg from 'pg';

export const DEFAULT_SCHEMA = 'durable_agent';

/** A schema name escaped as an SQL identifier, ready to be spliced into a statement. */
export type SchemaSql = string & { readonly __brand: 'SchemaSql' };

/** What a store that issues SQL takes in its options. */
export interface SchemaOption {
  /** The schema of the project's tables (DATABASE_SCHEMA); `durable_agent` when absent. */
  schema?: string;
}

/**
 * `schema` as statements splice it. The default is written bare, as the statements always named it:
 * their texts stay what they were, and so does the liveness lock namespace hashed from one
 * (liveness-sql.ts), which processes of an earlier release sharing the database must agree on.
 */
export function schemaSql(schema: string = DEFAULT_SCHEMA): SchemaSql {
  return (schema === DEFAULT_SCHEMA ? DEFAULT_SCHEMA : pg.escapeIdentifier(schema)) as SchemaSql;
}

/**
 * The name of a prepared statement of `schema`: a connection keeps one plan per name, so another
 * schema's version of a statement must never answer to the same one (a pool may serve stores of
 * several schemas). PostgreSQL tells names apart by their first 63 bytes only, so the suffix is a
 * short digest of the schema rather than its name, which may be that long by itself.
 */
export function statementName(name: string, schema: SchemaSql): string {
  return schema === DEFAULT_SCHEMA ? name : `${name}__${createHash('sha256').update(schema).digest('hex').slice(0, 12)}`;
}

/** A prepared statement: its name (per schema) and its text. */
export interface NamedStatement {
  name: string;
  text: string;
}

/**
 * Where only statements prepared by name are sent: a pool opened with `genericPlans` (pool.ts), whose
 * plans are made without the values, so what goes there must be a statement whose plan does not depend
 * on them, and named (an unnamed statement would be given a generic plan there too).
 */
export interface NamedStatements {
  query<R extends pg.QueryResultRow>(statement: NamedStatement & { values: unknown[] }): Promise<pg.QueryResult<R>>;
}

/** The statement `text` of `schema`, prepared under `name` made that schema's own. */
export const named = (schema: SchemaSql, name: string, text: string): NamedStatement => ({ name: statementName(name, schema), text });
