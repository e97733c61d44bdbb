/**
 * Which runs a worker may claim, defined once: the claim statement and the queue-depth gauge both use
 * it, so "depth > 0 and no worker claims" means workers are missing. The `status IN (…)` term lets
 * PostgreSQL use the partial index run_claim_idx, which holds only live runs. A run waiting for a
 * person has run_at 'infinity' (or its approval timeout), so the range scan never reaches it.
 */

import { named, type SchemaSql } from '../db/schema.ts';

/** QUEUED and due, WAITING and due (a timer, an approval timeout), or RUNNING with a lapsed lease. */
export const CLAIMABLE = `status IN ('QUEUED', 'RUNNING', 'WAITING') AND run_at <= now()
  AND (status <> 'RUNNING' OR locked_until < now())`;

/** The claim, its tables in `schema`. */
export const claimSql = (schema: SchemaSql) => ({
  /**
   * Takes up to $3 claimable runs of the agents in $5 for worker $1 with a lease of $2 ms, skipping the
   * runs in $4 (those the worker drives already) and rows another claim has locked; one statement, one
   * commit. A run of an agent the worker does not serve is never taken: its prompt and tools are not
   * this worker's. Each agent's due runs are one range of run_agent_claim_idx (agent, run_at), read in
   * order and cut at $3, so runs of other agents waiting in the queue are not even read; the oldest $3
   * of those few win. (`agent = ANY ($5)` in one scan could not use the index's order.)
   *
   * $6 is the claiming worker's owner lock (null: lease only); RUNNING runs whose owner lock is among $7
   * (locks nobody holds: their worker is gone) are taken over whatever their lease says. They are their
   * own branch (run_owner_lock_idx), so the range scan of due runs keeps its bound on run_at and never
   * reads the runs that wait far in the future.
   *
   * The runs taken are updated by primary key (`id = ANY (ARRAY(…))`), not joined: the plan is then the
   * same whatever the planner guesses of their number, and a generic plan (RunStoreOptions' `batches`)
   * is as good as one made for the values. Joined, a generic plan read the whole table.
   */
  claim: named(
    schema,
    'durable_agent_claim',
    `WITH due AS (
    SELECT due.id, due.run_at FROM unnest($5::text[]) AS served (agent)
    CROSS JOIN LATERAL (
      SELECT id, run_at FROM ${schema}.run
      WHERE agent = served.agent AND ${CLAIMABLE}
        AND id <> ALL ($4::uuid[])
      ORDER BY run_at
      LIMIT $3
      FOR UPDATE SKIP LOCKED) AS due),
  orphaned AS (
    SELECT id, run_at FROM ${schema}.run
    WHERE cardinality($7::int[]) > 0 AND status = 'RUNNING' AND owner_lock = ANY ($7::int[])
      AND agent = ANY ($5::text[]) AND id <> ALL ($4::uuid[])
    LIMIT $3
    FOR UPDATE SKIP LOCKED),
  next AS (
    SELECT id, run_at FROM due UNION SELECT id, run_at FROM orphaned
    ORDER BY run_at
    LIMIT $3)
  UPDATE ${schema}.run r SET status = 'RUNNING', locked_by = $1, lease_token = gen_random_uuid(),
         locked_until = now() + $2 * interval '1 millisecond',
         -- An attempt given back (not counted) is continued by this claim rather than followed by another.
         attempts = r.attempts + CASE WHEN r.attempt_given_back THEN 0 ELSE 1 END, attempt_given_back = false,
         updated_at = now(), owner_lock = $6::int,
         -- Waiting is not active time: the deadline moves on by the time the run waited.
         deadline_at = CASE WHEN r.status = 'WAITING'
                            THEN r.deadline_at + greatest(now() - (r.waiting->>'since')::timestamptz, interval '0') ELSE r.deadline_at END,
         -- A take-over remembers the lease it ended, so a stalled (not dead) owner can give the attempt back.
         lapsed_lease_token = CASE WHEN r.status = 'RUNNING' THEN r.lease_token END
  WHERE r.id = ANY (ARRAY(SELECT id FROM next))
  RETURNING r.*, EXISTS (SELECT 1 FROM ${schema}.run_step s WHERE s.run_id = r.id) AS has_steps`,
  ),
});

export const claimParams = (
  worker: string,
  leaseMs: number,
  limit: number,
  holding: readonly string[],
  agents: readonly string[],
  ownerLock: number | null = null,
  orphaned: readonly number[] = [],
) => [worker, leaseMs, limit, holding, agents, ownerLock, orphaned];
