/**
 * The reads behind the system-wide gauges (`agent_runs`, `agent_queue_depth`). They run at scrape time,
 * so every process reports the database's truth rather than its own share of it.
 */
import type pg from 'pg';
import { CLAIMABLE } from './claim-sql.ts';

type Queryable = Pick<pg.Pool, 'query'>;

/** Runs per status, of one tenant or of all. Statuses with no runs are absent; the caller fills in zeros. */
export async function countRunsByStatus(db: Queryable, tenant: string | null = null): Promise<Record<string, number>> {
  const { rows } =
    tenant === null
      ? await db.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status')
      : await db.query<{ status: string; n: number }>(
          'SELECT status, count(*)::int AS n FROM durable_agent.run WHERE tenant = $1 GROUP BY status',
          [tenant],
        );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/**
 * Runs a worker could claim right now, by the claim's own predicate, per agent. An agent whose depth
 * only grows is one no worker serves. Agents with none are absent; the caller fills in zeros.
 */
export async function queueDepth(db: Queryable): Promise<Record<string, number>> {
  const { rows } = await db.query<{ agent: string; n: number }>(
    `SELECT agent, count(*)::int AS n FROM durable_agent.run WHERE ${CLAIMABLE} GROUP BY agent`,
  );
  return Object.fromEntries(rows.map((r) => [r.agent, r.n]));
}
