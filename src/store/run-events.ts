/**
 * The SQL of a run's live events (protocol in src/events/protocol.ts): the fragments the checkpoint
 * statements of run-store.ts append so a step's events commit with the step, the fenced write of a
 * batch of streamed text, the claim's run.started, and the reads of the API. The events are rows of
 * run_event and, for those that repeat a step row, that row (step-events.ts); a read merges the two.
 */
import type pg from 'pg';
import type { RunId } from '../domain/types.ts';
import { LeaseLostError } from '../domain/errors.ts';
import { RUN_EVENT_CHANNEL } from '../db/notifications.ts';
import { named, type NamedStatements, schemaSql, type SchemaOption, type SchemaSql } from '../db/schema.ts';
import { FENCE, fencedSql } from './fenced-sql.ts';
import type { EventsClaimed, Lease } from '../ports/engine-store.ts';
import type { NewEvent } from '../ports/new-event.ts';
import { type ClaimedItem, claimedOutcomes, type ClaimedRow, forItems, stepBatchSql } from './step-batch-sql.ts';
import { storableValue } from '../core/storable.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { openEventText, sealEventData } from './sealed-columns.ts';
import { STEP_EVENT_ROWS, stepEvents, type StepEventRow, type StoredEvent } from './step-events.ts';

export type { StoredEvent } from './step-events.ts';
import { WriteBatches } from '../util/write-batches.ts';
import { withFields } from '../util/with-fields.ts';

/**
 * The parameter of EVENTS: the events as one JSON array of {type, data}. One JSON text
 * costs less to build and to read than three arrays of text (each element quoted and escaped by the
 * driver, then parsed as an array literal and each JSON element again by the server).
 */
export function eventParams(events: readonly NewEvent[], sealer: Sealer): [string] {
  return [JSON.stringify(eventValues(events, sealer))];
}

/** The events as the items of that array (a batched statement nests them in its own JSON parameter). */
export function eventValues(events: readonly NewEvent[], sealer: Sealer): object[] {
  return events.map((e) => ({ type: e.type, data: sealEventData(sealer, storableValue(e.data)) }));
}

/** The statements of events, their tables in `schema`. */
export function runEventsSql(schema: SchemaSql) {
  const { FOLLOWED } = fencedSql(schema);
  /**
   * CTEs that write `eventParams` ($p) in order, one row per event, when `source` (the fence's `owner`)
   * has a row, and announce them (NOTIFY "<run id> <highest id>") when an event hub follows the run.
   * The statement must select ANNOUNCED: a plain CTE nobody reads is never run.
   */
  const EVENTS = (p: number, source: string) => `events AS (
  INSERT INTO ${schema}.run_event (run_id, type, data)
  SELECT $1::uuid, e.type, e.data
  FROM (SELECT 1 FROM ${source} LIMIT 1) AS src,
       ROWS FROM (json_to_recordset($${p}::json) AS (type text, data json)) WITH ORDINALITY AS e (type, data, n)
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
             ${EVENTS(4, 'owner')}
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
    /** Up to $3 events of run $1 after id $2 of each kind of row, in one snapshot (page() merges them). */
    PAGE: named(
      schema,
      'durable_agent_event_page',
      `(SELECT id, type, data::text AS data FROM ${schema}.run_event WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3)
       UNION ALL (${STEP_EVENT_ROWS(schema)})`,
    ),
  };
}

/** The column that runs EVENTS' announcement (selected once, from a statement's one result row). */
export const ANNOUNCED = '(SELECT count(*) FROM announced) AS announced';

export interface RunEventsOptions extends SchemaOption {
  /** Seals events as they are written and opens them as they are read; none by default. */
  sealer?: Sealer;
  /** Where the batched claims go (RunStoreOptions' `batches`); `db` when absent. */
  batches?: NamedStatements;
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
    const batches: NamedStatements = opts.batches ?? db;
    this.claims = new WriteBatches(async (items, json) => {
      const { rows } = await batches.query<ClaimedRow>(withFields(forItems(items, CLAIMS), { values: [json] }));
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
    const events: StoredEvent[] = [];
    let fromSteps = false;
    for (const r of rows) {
      if (r.type === 'step') {
        fromSteps = true;
        events.push(...stepEvents(JSON.parse(r.data) as StepEventRow, after, (v) => this.sealer.open(v)));
        continue;
      }
      const data = openEventText(this.sealer, r.data);
      events.push(data === r.data ? r : withFields(r, { data }));
    }
    if (!fromSteps) return events;
    return events.sort((a, b) => a.id - b.id).slice(0, limit);
  }
}
