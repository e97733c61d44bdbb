/**
 * The renewal of every lease one worker holds, in ONE statement: liveness costs a statement per worker
 * per interval, whatever the number of runs in flight. Shared by the in-process keeper (through
 * RunStore) and the keeper thread, which runs the same text on its own connection.
 */
import type pg from 'pg';
import type { RunId } from '../domain.ts';
import type { HeldLease, LeaseOwner, RenewedLease } from './ports.ts';
import { FOLLOWED } from './fenced-sql.ts';

/**
 * $1 worker, $2 lease ms, $3 run ids, $4 their lease tokens (same order). Fenced like every engine
 * write: a run claimed again since (new token), or no longer RUNNING, is not renewed, and its absence
 * from the answer tells the keeper the lease is lost.
 */
// The rows are locked in id order, as the batched step writes lock theirs (step-batch-sql.ts): two
// statements that each hold several runs never wait for each other in a cycle.
export const RENEW_LEASES = `WITH locked AS (
    SELECT run.id FROM durable_agent.run JOIN unnest($3::uuid[], $4::uuid[]) AS held (id, token) ON run.id = held.id
    WHERE run.locked_by = $1 AND run.lease_token = held.token AND run.status = 'RUNNING'
    ORDER BY run.id
    FOR NO KEY UPDATE OF run)
  UPDATE durable_agent.run SET locked_until = now() + $2::float8 * interval '1 millisecond', updated_at = now()
  FROM locked WHERE run.id = locked.id
  RETURNING run.id, run.lease_token, run.cancel_requested,
            ${FOLLOWED('run.id')} AS followed`;

export const RENEW_LEASES_NAME = 'durable_agent_renew_leases';

export interface RenewedRow {
  id: string;
  lease_token: string;
  cancel_requested: boolean;
  /** An event hub follows the run: its streamed text is to be written as it comes. */
  followed: boolean;
}

export function renewParams(owner: LeaseOwner, held: readonly HeldLease[]): unknown[] {
  return [owner.worker, owner.leaseMs, held.map((h) => h.runId), held.map((h) => h.token)];
}

export async function renewLeases(db: Pick<pg.Pool, 'query'>, owner: LeaseOwner, held: readonly HeldLease[]): Promise<RenewedLease[]> {
  if (held.length === 0) return [];
  const { rows } = await db.query<RenewedRow>({ name: RENEW_LEASES_NAME, text: RENEW_LEASES, values: renewParams(owner, held) });
  return rows.map((r) => ({ runId: r.id as RunId, token: r.lease_token, cancelRequested: r.cancel_requested, followed: r.followed }));
}
