/**
 * The SQL of a run's live events (table run_event, protocol in src/events/protocol.ts): the fragments
 * the checkpoint statements of run-store.ts append so a step's events commit with the step, the fenced
 * write of a batch of streamed text, the claim's run.started, and the reads of the API.
 */
import type pg from 'pg';
import type { RunId } from '../domain/types.ts';
import { LeaseLostError } from '../domain/errors.ts';
import { TOOL_OUTPUT_MAX_CHARS } from '../events/protocol.ts';
import { RUN_EVENT_CHANNEL } from '../db/notifications.ts';
import { named, schemaSql, type SchemaOption, type SchemaSql } from '../db/schema.ts';
import { FENCE, fencedSql } from './fenced-sql.ts';
import type { EventsClaimed, Lease } from '../ports/engine-store.ts';
import type { NewEvent } from '../ports/new-event.ts';
import { type ClaimedItem, claimedOutcomes, type ClaimedRow, forItems, stepBatchSql } from './step-batch-sql.ts';
import { storableValue } from '../core/storable.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { openEventText, sealEventData } from './sealed-columns.ts';
import { WriteBatches } from '../util/write-batches.ts';
import { withFields } from '../util/with-fields.ts';

/**
 * The parameter of EVENTS: the events as one JSON array of {type, data, with_next}. One JSON text
 * costs less to build and to read than three arrays of text (each element quoted and escaped by the
 * driver, then parsed as an array literal and each JSON element again by the server).
 */
export function eventParams(events: readonly NewEvent[], sealer: Sealer): [string] {
  return [JSON.stringify(eventValues(events, sealer))];
}

/** The events as the items of that array (a batched statement nests them in its own JSON parameter). */
export function eventValues(events: readonly NewEvent[], sealer: Sealer): object[] {
  return events.map((e) => ({ type: e.type, data: sealEventData(sealer, storableValue(e.data)), with_next: e.withNext === true }));
}

/** The statements of events, their tables in `schema`. */
export function runEventsSql(schema: SchemaSql) {
  const { FOLLOWED } = fencedSql(schema);
  /**
   * CTEs that write `eventParams` ($p) in order, one row per event of `source` (the fence's
   * `owner`, or the row the statement wrote), and announce them (NOTIFY "<run id> <highest id>") when an
   * event hub follows the run. With `next`, events marked withNext are written only when the `next` CTE
   * wrote the STARTED row they describe. The statement must select ANNOUNCED: a plain CTE nobody reads
   * is never run.
   */
  const EVENTS = (p: number, source: string, next: boolean) => `events AS (
  INSERT INTO ${schema}.run_event (run_id, type, data)
  SELECT $1::uuid, e.type, e.data
  FROM (SELECT 1 FROM ${source} LIMIT 1) AS src,
       ROWS FROM (json_to_recordset($${p}::json) AS (type text, data json, with_next boolean)) WITH ORDINALITY AS e (type, data, with_next, n)
  WHERE ${next ? 'NOT e.with_next OR EXISTS (SELECT 1 FROM next)' : 'NOT e.with_next'}
  ORDER BY e.n
  RETURNING id),
announced AS (
  SELECT pg_notify('${RUN_EVENT_CHANNEL}', $1::uuid::text || ' ' || max(id)::text) FROM events
  HAVING count(*) > 0 AND ${FOLLOWED('$1::uuid')})`;
  return {
    EVENTS,
    APPEND: named(
      schema,
      'durable_agent_append_events',
      `WITH owner AS (
               UPDATE ${schema}.run SET updated_at = now() WHERE ${FENCE(3)} RETURNING id),
             ${EVENTS(4, 'owner', false)}
             SELECT count(*)::int AS written, ${ANNOUNCED} FROM owner`,
    ),
    WATCH: named(
      schema,
      'durable_agent_event_watch',
      `INSERT INTO ${schema}.run_event_watch (run_id, watcher, expires_at)
             SELECT r.id, $2, now() + $3 * interval '1 millisecond' FROM ${schema}.run r WHERE r.id = ANY ($1::uuid[])
             ON CONFLICT (run_id, watcher) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
    ),
    UNWATCH: named(
      schema,
      'durable_agent_event_unwatch',
      `DELETE FROM ${schema}.run_event_watch
             WHERE (watcher = $1 AND ($2::uuid IS NULL OR run_id = $2)) OR expires_at < now()`,
    ),
    PAGE: named(
      schema,
      'durable_agent_event_page',
      `SELECT id, type, data::text AS data FROM ${schema}.run_event WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
    ),
  };
}

/** The column that runs EVENTS' announcement (selected once, from a statement's one result row). */
export const ANNOUNCED = '(SELECT count(*) FROM announced) AS announced';

/** A tool's stored (redacted) result as tool.finished carries it. */
export function toolOutput(stored: string): { output: string; truncated?: boolean } {
  return stored.length > TOOL_OUTPUT_MAX_CHARS ? { output: stored.slice(0, TOOL_OUTPUT_MAX_CHARS), truncated: true } : { output: stored };
}

/** An event as read, its data as the JSON text stored (served to SSE readers as is). */
export interface StoredEvent {
  id: number;
  type: string;
  data: string;
}

export interface RunEventsOptions extends SchemaOption {
  /** Seals events as they are written and opens them as they are read; none by default. */
  sealer?: Sealer;
}

export class RunEvents {
  private readonly sealer: Sealer;
  private readonly sql: ReturnType<typeof runEventsSql>;
  private readonly claims: WriteBatches<ClaimedItem, EventsClaimed>;

  constructor(
    private readonly db: Pick<pg.Pool, 'query'>,
    opts: RunEventsOptions = {},
  ) {
    this.sealer = opts.sealer ?? NO_ENCRYPTION;
    const schema = schemaSql(opts.schema);
    this.sql = runEventsSql(schema);
    const { CLAIMS } = stepBatchSql(schema);
    this.claims = new WriteBatches(async (items, json) => {
      const { rows } = await this.db.query<ClaimedRow>(withFields(forItems(items, CLAIMS), { values: [json] }));
      return claimedOutcomes(items, rows);
    });
  }

  /** Writes streamed text (and the like) of a run this lease still holds; LeaseLostError, writing nothing, if not. */
  async append(runId: RunId, owner: Lease, events: readonly NewEvent[]): Promise<void> {
    if (events.length === 0) return;
    const { rows } = await this.db.query<{ written: number }>(
      withFields(this.sql.APPEND, { values: [runId, owner.worker, owner.token, ...eventParams(events, this.sealer)] }),
    );
    if (rows[0]?.written !== 1) throw new LeaseLostError(runId, owner.worker);
  }

  /**
   * A claim's first write: run.started, and attempt.abandoned for whatever a previous owner left
   * streaming. Returns the highest attempt each model step has used so far, and whether an event hub
   * follows the run (its text is then written as it streams).
   */
  claimed(runId: RunId, owner: Lease, attempt: number): Promise<EventsClaimed> {
    // Claims come in bursts (a claim takes many runs at once, a takeover all of a dead worker's): batched.
    return this.claims.write({ run: runId.toLowerCase(), worker: owner.worker, token: owner.token, attempt });
  }

  /**
   * Has the new events of `runIds` announced (NOTIFY) to event hub `watcher` for `ttlMs` from now; a
   * hub renews its runs before then (see migration 0013). Runs that no longer exist are left out.
   */
  async watch(runIds: readonly RunId[], watcher: string, ttlMs: number): Promise<void> {
    if (runIds.length === 0) return;
    await this.db.query(withFields(this.sql.WATCH, { values: [runIds, watcher, ttlMs] }));
  }

  /** `runId` (or, without it, every run) no longer announced to `watcher`; and what expired, dropped. */
  async unwatch(watcher: string, runId?: RunId): Promise<void> {
    await this.db.query(withFields(this.sql.UNWATCH, { values: [watcher, runId ?? null] }));
  }

  /** Up to `limit` events after id `after`, in order. */
  async page(runId: RunId, after: number, limit: number): Promise<StoredEvent[]> {
    const { rows } = await this.db.query<StoredEvent>(withFields(this.sql.PAGE, { values: [runId, after, limit] }));
    return rows.map((r) => {
      const data = openEventText(this.sealer, r.data);
      return data === r.data ? r : withFields(r, { data });
    });
  }
}
