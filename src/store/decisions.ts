/**
 * A person's decision about a waiting tool call, recorded in one transaction that holds the run's row
 * lock: two decisions arriving together cannot both see the other's call still pending, so the one
 * that completes the set always queues the run (the run_queued trigger wakes a worker).
 *
 * Answers (the API's status codes): NotFoundError (404) for a call the run never made; ConflictError
 * (409) for a call that is not waiting for a decision, or a decision that contradicts the one made;
 * the same decision again is accepted and changes nothing.
 */
import type pg from 'pg';
import type { Decision, RunId, RunStatus } from '../domain/types.ts';
import { ConflictError, NotFoundError } from '../domain/errors.ts';
import type { SchemaSql } from '../db/schema.ts';
import { STATUS_IS } from './fenced-sql.ts';
import type { WaitingColumn } from './rows.ts';
import { storableText } from '../core/storable.ts';

export interface Decided {
  id: RunId;
  /** WAITING while other calls still wait for a decision, QUEUED once the last one is made. */
  status: RunStatus;
}

interface DecisionRow {
  kind: 'approval' | 'decision';
  decision: Decision['decision'] | null;
}

/** The statements of a decision, their tables in `schema`. */
export const decisionsSql = (schema: SchemaSql) => ({
  RUN: `SELECT status, waiting FROM ${schema}.run WHERE id = $1 FOR UPDATE`,
  DECISIONS: `SELECT kind, decision FROM ${schema}.tool_decision WHERE run_id = $1 AND tool_use_id = $2
       ORDER BY decided_at DESC NULLS FIRST`,
  DECIDE: `UPDATE ${schema}.tool_decision SET decision = $4, reason = $5, result = $6, decided_at = clock_timestamp()
     WHERE run_id = $1 AND tool_use_id = $2 AND kind = $3`,
  // Only the calls of this wait count: a call left undecided by an earlier wait (it timed out) does not.
  QUEUE: `UPDATE ${schema}.run SET status = 'QUEUED', run_at = now(), updated_at = now(),
            -- Waiting is not active time: the deadline moves on by the time waited.
            deadline_at = deadline_at + greatest(now() - (waiting->>'since')::timestamptz, interval '0')
     WHERE id = $1 AND ${STATUS_IS('WAITING')}
       AND NOT EXISTS (
         SELECT 1 FROM ${schema}.tool_decision d
         WHERE d.run_id = $1 AND d.kind = $2 AND d.decision IS NULL
           AND d.tool_use_id IN (SELECT c->>'toolUseId' FROM jsonb_array_elements(waiting->'toolCalls') AS c))
     RETURNING status`,
  /** Whether any model step of the run asked for this tool call. */
  MADE_CALL: `SELECT EXISTS (
       SELECT 1 FROM ${schema}.run_step WHERE run_id = $1 AND kind = 'MODEL'
         AND response::jsonb @> jsonb_build_array(jsonb_build_object('type', 'tool_use', 'id', $2::text))) AS made`,
});

type DecisionsSql = ReturnType<typeof decisionsSql>;

const resultText = (result: unknown) => (typeof result === 'string' ? result : (JSON.stringify(result ?? null) ?? 'null'));

/** A decision about one tool call of one run. */
export interface DecisionRequest {
  runId: RunId;
  toolUseId: string;
  decision: Decision;
  /** A person's text as it is stored: redacted, and sealed when encryption is on. */
  stored: (text: string) => string;
}

export async function recordDecision(pool: pg.Pool, sql: DecisionsSql, request: DecisionRequest): Promise<Decided> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const answer = await decideIn(client, sql, request);
    await client.query('COMMIT');
    return answer;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

async function decideIn(
  db: pg.PoolClient,
  sql: DecisionsSql,
  { runId, toolUseId, decision: d, stored }: DecisionRequest,
): Promise<Decided> {
  const run = (await db.query<{ status: RunStatus; waiting: WaitingColumn | null }>(sql.RUN, [runId])).rows[0];
  if (!run) throw new NotFoundError(`run ${runId} not found`);
  const rows = (await db.query<DecisionRow>(sql.DECISIONS, [runId, toolUseId])).rows;
  const waitingKind = run.status === 'WAITING' && run.waiting?.toolCalls.some((c) => c.toolUseId === toolUseId) ? run.waiting.kind : null;
  const pending = rows.find((r) => r.decision === null && r.kind === waitingKind);
  if (!pending) {
    if (rows.length === 0 && !(await madeCall(db, sql, runId, toolUseId)))
      throw new NotFoundError(`run ${runId} has no tool call ${toolUseId}`);
    const made = rows.find((r) => r.decision !== null);
    if (made?.decision === d.decision) return { id: runId, status: run.status };
    throw new ConflictError(
      made
        ? `tool call ${toolUseId} was already decided: ${made.decision}`
        : `tool call ${toolUseId} is not waiting for a decision (the run is ${run.status})`,
    );
  }
  if (d.decision === 'complete' && pending.kind !== 'decision') {
    throw new ConflictError(`tool call ${toolUseId} waits for approval; "complete" is only for a call a crash left unfinished`);
  }
  await db.query(sql.DECIDE, [
    runId,
    toolUseId,
    pending.kind,
    d.decision,
    d.decision === 'deny' ? stored(storableText(d.reason)) : null,
    d.decision === 'complete' ? stored(storableText(resultText(d.result))) : null,
  ]);
  const queued = await db.query<{ status: RunStatus }>(sql.QUEUE, [runId, pending.kind]);
  return { id: runId, status: queued.rows[0]?.status ?? run.status };
}

async function madeCall(db: pg.PoolClient, sql: DecisionsSql, runId: RunId, toolUseId: string): Promise<boolean> {
  const { rows } = await db.query<{ made: boolean }>(sql.MADE_CALL, [runId, toolUseId]);
  return rows[0]?.made === true;
}
