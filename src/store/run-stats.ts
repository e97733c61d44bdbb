/**
 * The reads behind the system-wide gauges (`agent_runs`, `agent_queue_depth`). They run at scrape time,
 * so every process reports the database's truth rather than its own share of it.
 */
import type pg from 'pg';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';
import { CLAIMABLE } from './claim-sql.ts';

type Queryable = Pick<pg.Pool, 'query'>;

/** The reads, their table in `schema`. */
export const runStatsSql = (schema: SchemaSql) => ({
  BY_STATUS: `SELECT status, count(*)::int AS n FROM ${schema}.run GROUP BY status`,
  BY_STATUS_OF_TENANT: `SELECT status, count(*)::int AS n FROM ${schema}.run WHERE tenant = $1 GROUP BY status`,
  QUEUE_DEPTH: `SELECT agent, count(*)::int AS n FROM ${schema}.run WHERE ${CLAIMABLE} GROUP BY agent`,
});

export type RunStatsSql = ReturnType<typeof runStatsSql>;

/** Runs per status, of one tenant or of all. Statuses with no runs are absent; the caller fills in zeros. */
export async function countRunsByStatus(db: Queryable, sql: RunStatsSql, tenant: string | null = null): Promise<Record<string, number>> {
  const { rows } =
    tenant === null
      ? await db.query<{ status: string; n: number }>(sql.BY_STATUS)
      : await db.query<{ status: string; n: number }>(sql.BY_STATUS_OF_TENANT, [tenant]);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** The gauges' reads on a pool. */
export class RunStats extends SchemaStore<Queryable, RunStatsSql> {
  constructor(db: Queryable, opts: SchemaOption = {}) {
    super(db, runStatsSql, opts);
  }

  countRunsByStatus(tenant: string | null = null): Promise<Record<string, number>> {
    return countRunsByStatus(this.db, this.sql, tenant);
  }

  /**
   * Runs a worker could claim right now, by the claim's own predicate, per agent. An agent whose depth
   * only grows is one no worker serves. Agents with none are absent; the caller fills in zeros.
   */
  async queueDepth(): Promise<Record<string, number>> {
    const { rows } = await this.db.query<{ agent: string; n: number }>(this.sql.QUEUE_DEPTH);
    return Object.fromEntries(rows.map((r) => [r.agent, r.n]));
  }
}
