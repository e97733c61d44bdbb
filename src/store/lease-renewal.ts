/**
 * The renewal of every lease one worker holds, in ONE statement: liveness costs a statement per worker
 * per interval, whatever the number of runs in flight. Shared by the in-process keeper (through
 * RunStore) and the keeper off the main thread (lease-keeper-thread.ts), which runs the same text on
 * its own connection.
 */
import type pg from 'pg';
import type { RunId } from '../domain/types.ts';
import type { HeldLease, LeaseOwner, RenewedLease } from '../ports/engine-store.ts';
import { named, type NamedStatement, type SchemaSql } from '../db/schema.ts';
import { fencedSql, STATUS_IS } from './fenced-sql.ts';

/** The renewal's statement, its tables in `schema`. */
export const leaseRenewalSql = (schema: SchemaSql) => ({
  /**
   * $1 worker, $2 lease ms, $3 run ids, $4 their lease tokens (same order), $5 how soon a lease must run
   * out to be renewed (ms; null: renew every one). Answers the runs still held as the statement starts:
   * a run claimed again since (new token), or no longer RUNNING, is not in the answer, and its absence
   * tells the keeper the lease is lost.
   *
   * Every step write renews its run's lease already (step-batch-sql.ts), so a run that took a step lately
   * is only checked, not written: with thousands of runs in flight, each taking a step every second or
   * so, a renewal updates the few runs that sit in a long tool call, instead of a row per run every
   * interval (each a dead row to vacuum).
   *
   * A renewal never waits for a row. A row locked is almost always a step's write, which renews the lease
   * itself (or ends the run); else (a cancel request, a write rolled back) the next round renews it, the
   * lease having the room renewWithinMs leaves; a takeover in progress is found lost at the next round
   * (and the fence refuses the old driver's writes meanwhile). Waiting made it a convoy: with thousands of
   * rows to renew it queued behind one step write after another, holding the rows it had locked, and
   * every later step write of those runs queued behind it — seconds, tens of seconds under load.
   */
  RENEW_LEASES: named(
    schema,
    'durable_agent_renew_leases',
    `WITH held AS (
    SELECT run.id, run.lease_token, run.cancel_requested,
           coalesce($5::float8 IS NULL OR run.locked_until < now() + $5::float8 * interval '1 millisecond', true) AS due
    FROM ${schema}.run JOIN unnest($3::uuid[], $4::uuid[]) AS held (id, token) ON run.id = held.id
    WHERE run.locked_by = $1 AND run.lease_token = held.token AND ${STATUS_IS('RUNNING', 'run')}),
  -- The lock re-checks the fence on the row's latest version: a run taken over since is not renewed.
  locked AS (
    SELECT run.id FROM ${schema}.run JOIN held ON run.id = held.id
    WHERE held.due AND run.locked_by = $1 AND run.lease_token = held.lease_token AND ${STATUS_IS('RUNNING', 'run')}
    FOR NO KEY UPDATE OF run SKIP LOCKED),
  renewed AS (
    UPDATE ${schema}.run SET locked_until = now() + $2::float8 * interval '1 millisecond', updated_at = now()
    FROM locked WHERE run.id = locked.id)
  SELECT id, lease_token, cancel_requested, ${fencedSql(schema).FOLLOWED('id')} AS followed FROM held`,
  ),
});

export interface RenewedRow {
  id: string;
  lease_token: string;
  cancel_requested: boolean;
  /** An event hub follows the run: its streamed text is to be written as it comes. */
  followed: boolean;
}

export async function renewLeases(
  db: Pick<pg.Pool, 'query'>,
  statement: NamedStatement,
  owner: LeaseOwner,
  held: readonly HeldLease[],
  withinMs: number | null,
): Promise<RenewedLease[]> {
  if (held.length === 0) return [];
  const values = [owner.worker, owner.leaseMs, held.map((h) => h.runId), held.map((h) => h.token), withinMs];
  const { rows } = await db.query<RenewedRow>({ name: statement.name, text: statement.text, values });
  return rows.map((r) => ({ runId: r.id as RunId, token: r.lease_token, cancelRequested: r.cancel_requested, followed: r.followed }));
}
