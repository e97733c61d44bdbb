/**
 * The reads behind the system-wide gauges (`agent_runs`, `agent_queue_depth`). They run at scrape time,
 * so every process reports the database's truth rather than its own share of it.
 */
import type pg from 'pg';

type Queryable = Pick<pg.Pool, 'query'>;

/** Runs per status. Statuses with no runs are absent; the caller fills in zeros. */
export async function countRunsByStatus(db: Queryable): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM run GROUP BY status');
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/**
 * Runs a worker could claim right now: QUEUED and due, or RUNNING with a lapsed lease. The same
 * predicate as the claim, so "depth > 0 and no worker claims" means workers are missing; the
 * `status IN (…)` term lets PostgreSQL use the partial index run_claim_idx, which holds only live runs.
 */
export async function queueDepth(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM run
     WHERE status IN ('QUEUED', 'RUNNING') AND run_at <= now()
       AND (status = 'QUEUED' OR locked_until < now())`,
  );
  return rows[0]?.n ?? 0;
}
