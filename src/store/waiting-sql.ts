/**
 * The statements of waiting: a run that starts to wait (fenced, like every engine write: it gives its
 * lease up in the same statement), the decisions recorded for its tool calls, and the nearest time a
 * run not yet claimable becomes due (an idle worker's one timer).
 */
import type pg from 'pg';
import type { DecisionRecord, RunId } from '../domain/types.ts';
import { LeaseLostError } from '../domain/errors.ts';
import { named, type SchemaSql } from '../db/schema.ts';
import { FENCE, fencedSql, progress, type ProgressRow, startParams } from './fenced-sql.ts';
import type { Lease, WaitStart, Waited } from '../ports/engine-store.ts';
import type { Sealer } from './encryption.ts';
import { sealToolCalls } from './sealed-columns.ts';
import { withFields } from '../util/with-fields.ts';

/**
 * The run's side of a wait: $w the waiting JSON (its `since` set here), $r when it is claimable again
 * (null: never, until every decision is made). The attempt is given back, as a hand-back's is (the
 * claim that wakes the run continues it): waiting is not a failure, and a run that waits many times
 * must not reach the abandon limit. A cancel requested meanwhile ends the run instead (nobody would
 * be driving it to its next guard).
 */
export const WAIT_SET = (w: number, r: number) => `status = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'WAITING' END,
  waiting = CASE WHEN cancel_requested THEN waiting ELSE jsonb_set($${w}::jsonb, '{since}', to_jsonb(now())) END,
  run_at = CASE WHEN cancel_requested THEN run_at ELSE coalesce($${r}::timestamptz, 'infinity'::timestamptz) END,
  finished_at = CASE WHEN cancel_requested THEN now() END,
  error = CASE WHEN cancel_requested THEN 'cancelled on request' ELSE error END,
  attempt_given_back = NOT cancel_requested,
  locked_by = NULL, locked_until = NULL, lease_token = NULL, updated_at = now()`;

/** The parameters of a wait: waiting JSON, claimable-again time, decision rows. */
export function waitParams(start: WaitStart, sealer: Sealer): [string, Date | null, string] {
  const w = start.waiting;
  const waiting = {
    kind: w.kind,
    since: null,
    toolCalls: sealToolCalls(sealer, w.toolCalls),
    wakeAt: w.wakeAt?.toISOString() ?? null,
    expiresAt: w.expiresAt?.toISOString() ?? null,
  };
  const decisions = (start.decisions ?? []).map((d) => ({
    tool_use_id: d.toolUseId,
    kind: d.kind,
    expires_at: d.expiresAt?.toISOString() ?? null,
  }));
  return [JSON.stringify(waiting), w.wakeAt ?? w.expiresAt ?? null, JSON.stringify(decisions)];
}

/** The statements of waiting, their tables in `schema`. */
export function waitingSql(schema: SchemaSql) {
  const { OWNED, START_NEXT } = fencedSql(schema);
  /** The pending decision rows of a wait ($d: JSON array), written only when the run did go WAITING. */
  const DECISION_ROWS = (d: number) => `decided AS (
  INSERT INTO ${schema}.tool_decision (run_id, tool_use_id, kind, expires_at)
  SELECT owner.id, d.tool_use_id, d.kind, d.expires_at
  FROM owner, jsonb_to_recordset($${d}::jsonb) AS d(tool_use_id text, kind text, expires_at timestamptz)
  WHERE owner.status = 'WAITING'
  ON CONFLICT (run_id, tool_use_id, kind) DO NOTHING)`;

  return {
    DECISION_ROWS,
    WAIT: named(
      schema,
      'durable_agent_wait',
      `WITH owner AS (
         UPDATE ${schema}.run SET ${WAIT_SET(3, 4)}
         WHERE ${FENCE(6)}
         RETURNING id, tokens_used, cancel_requested, status),
       ${DECISION_ROWS(5)},
       ${START_NEXT(7)}
       SELECT tokens_used, cancel_requested, status FROM owner`,
    ),
    CONSUME_DECISION: named(
      schema,
      'durable_agent_consume_decision',
      `WITH ${OWNED(4)},
       used AS (DELETE FROM ${schema}.tool_decision d USING owner
                WHERE d.run_id = owner.id AND d.tool_use_id = $5 AND d.kind = 'decision')
       SELECT tokens_used, cancel_requested FROM owner`,
    ),
    DECISIONS: `SELECT tool_use_id, kind, decision, reason, result, expires_at FROM ${schema}.tool_decision WHERE run_id = $1`,
    NEXT_DUE: named(
      schema,
      'durable_agent_next_due',
      `SELECT (extract(epoch FROM min(run_at) - now()) * 1000)::float8 AS ms FROM ${schema}.run
           WHERE status IN ('QUEUED', 'RUNNING', 'WAITING') AND run_at > now() - $1 * interval '1 millisecond' AND run_at < 'infinity'::timestamptz`,
    ),
  };
}

export type WaitingSql = ReturnType<typeof waitingSql>;

type WaitRow = ProgressRow & { status: 'WAITING' | 'CANCELLED' };

export async function startWaiting(
  db: pg.Pool,
  sql: WaitingSql,
  runId: RunId,
  owner: Lease,
  start: WaitStart,
  sealer: Sealer,
): Promise<Waited> {
  const { rows } = await db.query<WaitRow>(
    withFields(sql.WAIT, { values: [runId, owner.worker, ...waitParams(start, sealer), owner.token, ...startParams(start.start)] }),
  );
  const row = rows[0];
  if (!row) throw new LeaseLostError(runId, owner.worker);
  return progress(row, { status: row.status });
}

export async function consumeDecision(db: pg.Pool, sql: WaitingSql, runId: RunId, owner: Lease, toolUseId: string): Promise<void> {
  const { rows } = await db.query<ProgressRow>(
    withFields(sql.CONSUME_DECISION, { values: [runId, owner.worker, owner.leaseMs, owner.token, toolUseId] }),
  );
  if (!rows[0]) throw new LeaseLostError(runId, owner.worker);
}

interface DecisionRow {
  tool_use_id: string;
  kind: DecisionRecord['kind'];
  decision: DecisionRecord['decision'];
  reason: string | null;
  result: string | null;
  expires_at: Date | null;
}

export async function readDecisions(db: pg.Pool, sql: WaitingSql, runId: RunId, sealer: Sealer): Promise<DecisionRecord[]> {
  const { rows } = await db.query<DecisionRow>(sql.DECISIONS, [runId]);
  return rows.map((r) => ({
    toolUseId: r.tool_use_id,
    kind: r.kind,
    decision: r.decision,
    reason: sealer.openText(r.reason),
    result: sealer.openText(r.result),
    expiresAt: r.expires_at,
  }));
}

/**
 * The first entry of the claim index past now() less `lookbackMs` (a range scan that stops at the
 * first row): runs waiting for a person sit at 'infinity' and are never the answer. The look-back
 * covers the time since the caller's last claim: a run that came due after that claim looked, but
 * before this statement, is due now (0), not forgotten until the poll interval.
 */
export async function nextDueInMs(db: pg.Pool, sql: WaitingSql, lookbackMs = 0): Promise<number | null> {
  const { rows } = await db.query<{ ms: number | null }>(withFields(sql.NEXT_DUE, { values: [lookbackMs] }));
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? null : Math.max(0, Number(ms));
}
