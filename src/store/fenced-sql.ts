/**
 * The parts the one-run fenced statements of run-store.ts and waiting-sql.ts are built from (the step
 * path's frequent writes go out over batches of runs instead: step-batch-sql.ts). Each is ONE statement
 * (a data-modifying CTE): the fence and the lease renewal (`owner`), the step row, and when it is known
 * already, the STARTED row of the next tool call — one round trip, one commit.
 */
import pg from 'pg';
import type { SchemaSql } from '../db/schema.ts';
import { RUN_EVENT_CHANNEL } from '../db/notifications.ts';
import type { RunProgress, RunStatus } from '../domain/types.ts';
import type { RunEnd, ToolStart } from '../ports/engine-store.ts';
import { storableText } from '../core/storable.ts';

export interface ProgressRow {
  tokens_used: number;
  cancel_requested: boolean;
}

/** The run's progress from `r`, with `more` fields after it (in one literal: see with-fields.ts). */
export const progress = <E extends object = object>(r: ProgressRow, more?: E): RunProgress & E =>
  ({ tokensUsed: r.tokens_used, cancelRequested: r.cancel_requested, ...more }) as RunProgress & E;

/**
 * Run `r` (or the statement's one table) has `status`, written so that it is checked on the rows found
 * and never used to find them: the statements that use it find their runs by id (the primary key). Given
 * `status = 'RUNNING'`, the planner may read every RUNNING run through run_status_idx instead, when its
 * statistics say there are hardly any — which is what they say of a queue last analyzed while its runs
 * waited, until the next ANALYZE after thousands were claimed. Each write then read every run in flight
 * (a one-run checkpoint 1.7 ms instead of 0.05 ms at 10,000 in flight; a batch, or a lease renewal
 * joined with its list of runs, compared thousands with thousands: seconds a statement).
 */
export const STATUS_IS = (status: RunStatus, r?: string) => `(${r ? `${r}.` : ''}status = '${status}') IS TRUE`;

/**
 * The fence: the run is still RUNNING under the claim this lease came from. The token is new at every
 * claim, so a driver whose lease lapsed and was claimed again — even by its own worker — is stale.
 */
export const FENCE = (tokenParam: number) =>
  `id = $1 AND locked_by = $2 AND lease_token = $${tokenParam}::uuid AND ${STATUS_IS('RUNNING')}`;

/** The parts that name tables, in `schema`. */
export const fencedSql = (schema: SchemaSql) => {
  /** Whether an event hub follows run `runId` (an SQL expression): its events are announced, its text written as it streams. */
  const FOLLOWED = (runId: string) =>
    `EXISTS (SELECT 1 FROM ${schema}.run_event_watch w WHERE w.run_id = ${runId} AND w.expires_at > now())`;
  /**
   * A new event id, for a step row whose events are read from it (migration 0023): taken from the
   * sequence of run_event's ids while the run's row is held, like theirs. Ids go up in twos, so the
   * row owns this id and the next (a tool call's pair of events).
   */
  const NEXT_EVENT_ID = `nextval(${pg.escapeLiteral(`${schema}.run_event_id_seq`)}::regclass)`;
  /**
   * Announces (NOTIFY "<run id> <highest id>") run `runId`'s new events up to `lastId` when an event
   * hub follows it; null otherwise. Both qualified: inside FOLLOWED a bare run_id is the watch row's.
   */
  const ANNOUNCE = (runId: string, lastId: string) =>
    `CASE WHEN ${FOLLOWED(runId)} THEN pg_notify('${RUN_EVENT_CHANNEL}', ${runId}::text || ' ' || (${lastId})::text) END`;
  return {
    FOLLOWED,
    NEXT_EVENT_ID,
    ANNOUNCE,

    /** Renews the lease of a run this claim still owns ($1 run, $2 worker, $3 lease ms), and yields nothing otherwise. */
    OWNED: (tokenParam: number, extraSet = '') => `owner AS (
  UPDATE ${schema}.run SET locked_until = now() + $3 * interval '1 millisecond', updated_at = now()${extraSet}
  WHERE ${FENCE(tokenParam)}
  RETURNING id, tokens_used, cancel_requested)`,

    /**
     * The optional STARTED row of the next tool call, written in the same statement as the start of a
     * wait (a sleep's call). Skipped when a cancel is pending: the guard would stop the run before that
     * tool. It takes no event ids: that call has no step.started or tool.started, as it never had.
     */
    START_NEXT: (p: number) => `next AS (
  INSERT INTO ${schema}.run_step (run_id, seq, kind, status, tool_name, tool_use_id, worker)
  SELECT id, $${p}::int, 'TOOL', 'STARTED', $${p + 1}::text, $${p + 2}::text, $2 FROM owner
  WHERE $${p}::int IS NOT NULL AND NOT cancel_requested
  RETURNING seq)`,

    /**
     * The MODEL step row: $2 worker, $5 cost, $6 seq, $7..$15 request, response and usage; its
     * step.finished is read from it (migration 0023), and announced. Written after the CTE `after` (the
     * step's streamed events), whose ids come first.
     */
    MODEL_STEP: (after: string) => `step AS (
  INSERT INTO ${schema}.run_step AS t (run_id, seq, kind, status, request, response, stop_reason, input_tokens, output_tokens,
                        cache_creation_input_tokens, cache_read_input_tokens, cost_usd, attempts, latency_ms,
                        worker, started_at, finished_at, finished_event)
  SELECT id, $6, 'MODEL', 'DONE', $7, $8, $9, $10, $11, $12, $13, $5, $14, $15::int, $2,
         now() - $15::int * interval '1 millisecond', now(), ${NEXT_EVENT_ID}
  FROM owner
  WHERE ${AFTER(after)}
  RETURNING ${ANNOUNCE('t.run_id', 't.finished_event')} AS announced)`,
  };
};

/**
 * True, once the data-modifying CTE `cte` has run to its end: a statement's CTEs run in no promised
 * order, and ids taken from a sequence must follow the events they come after.
 */
export const AFTER = (cte: string) => `(SELECT count(*) FROM ${cte}) >= 0`;

export const startParams = (s?: ToolStart) => [s?.seq ?? null, s?.toolName ?? null, s?.toolUseId ?? null];

const storableOrNull = (s: string | null | undefined) => (s == null ? null : storableText(s));

/** The texts of a run's end ($output, $error, $stop_reason), storable whatever a provider's error or a model's output held. */
export const endTexts = (end: RunEnd) => [storableOrNull(end.output), storableOrNull(end.error), storableOrNull(end.stopReason)];
