/**
 * Which runs a worker may claim, defined once: the claim statement and the queue-depth gauge both use
 * it, so "depth > 0 and no worker claims" means workers are missing. The `status IN (…)` term lets
 * PostgreSQL use the partial index run_claim_idx, which holds only live runs.
 */

/** QUEUED and due, or RUNNING with a lapsed lease (its worker died or stalled). */
export const CLAIMABLE = `status IN ('QUEUED', 'RUNNING') AND run_at <= now()
  AND (status = 'QUEUED' OR locked_until < now())`;

/**
 * Takes up to $3 claimable runs for worker $1 with a lease of $2 ms, skipping the runs in $4 (those
 * the worker drives already) and rows another claim has locked; one statement, one commit. $5 is the
 * claiming worker's owner lock (null: lease only); RUNNING runs whose owner lock is among $6 (locks
 * nobody holds: their worker is gone) are taken over whatever their lease says.
 */
export const CLAIM_SQL = `WITH next AS (
    SELECT id FROM durable_agent.run
    WHERE status IN ('QUEUED', 'RUNNING') AND (${CLAIMABLE} OR (status = 'RUNNING' AND owner_lock = ANY ($6::int[])))
      AND id <> ALL ($4::uuid[])
    ORDER BY run_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
  UPDATE durable_agent.run r SET status = 'RUNNING', locked_by = $1, lease_token = gen_random_uuid(),
         locked_until = now() + $2 * interval '1 millisecond',
         attempts = r.attempts + 1, updated_at = now(), owner_lock = $5::int,
         -- A take-over remembers the lease it ended, so a stalled (not dead) owner can give the attempt back.
         lapsed_lease_token = CASE WHEN r.status = 'RUNNING' THEN r.lease_token END
  FROM next WHERE r.id = next.id
  RETURNING r.*, EXISTS (SELECT 1 FROM durable_agent.run_step s WHERE s.run_id = r.id) AS has_steps`;

export const claimParams = (worker: string, leaseMs: number, limit: number, holding: readonly string[], ownerLock: number | null = null, orphaned: readonly number[] = []) => [
  worker, leaseMs, limit, holding, ownerLock, orphaned,
];
