/**
 * Schedules as rows (migration 0021). A process makes a schedule's due slots under a short lock
 * (`locked_until`, a claim token), so two processes never make the same firing at once; the run of a
 * slot is still decided by the slot's unique key on `run` (run-records.ts `createForSlot`), which
 * holds whatever happens to a lock. The next slot is found by an index range (schedule_due_idx): an
 * idle runtime with 10,000 schedules reads one row to know when to wake.
 */
import type pg from 'pg';
import { ConflictError } from '../domain/errors.ts';
import type { RunId, RunStatus, Schedule, ScheduledRun } from '../domain/types.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { SchemaStore } from './schema-store.ts';

const UNIQUE_VIOLATION = '23505';

interface ScheduleRow {
  id: string;
  tenant: string;
  name: string;
  cron: string;
  timezone: string;
  agent: string;
  run_options: Record<string, unknown>;
  overlap: Schedule['overlap'];
  catch_up: Schedule['catchUp'];
  catch_up_window_seconds: number | null;
  jitter_seconds: number;
  start_at: Date | null;
  end_at: Date | null;
  paused: boolean;
  source: Schedule['source'];
  next_run_at: Date | null;
  last_run_id: string | null;
  last_run_at: Date | null;
  last_run_status: string | null;
  skipped_missed: string | number;
  skipped_overlap: string | number;
  last_skip_reason: string | null;
  last_skip_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** What a schedule is made or changed to (everything but what its firings keep). */
export interface ScheduleFields {
  tenant: string;
  name: string;
  cron: string;
  timezone: string;
  agent: string;
  run: ScheduledRun;
  overlap: Schedule['overlap'];
  catchUp: Schedule['catchUp'];
  catchUpWindowSeconds: number | null;
  jitterSeconds: number;
  startAt: Date | null;
  endAt: Date | null;
  paused: boolean;
  source: Schedule['source'];
  nextRunAt: Date | null;
}

/** What one firing of a schedule did, written when it lets the schedule go. */
export interface Fired {
  nextRunAt: Date | null;
  lastRun: { id: RunId; at: Date } | null;
  skippedMissed: number;
  skippedOverlap: number;
  lastSkip: { reason: string; at: Date } | null;
}

/** A schedule a process holds to make its due slots, and the database's clock as it took it. */
export interface ClaimedSchedule {
  schedule: Schedule;
  token: string;
  now: Date;
}

const COLUMNS = `s.id, s.tenant, s.name, s.cron, s.timezone, s.agent, s.run_options, s.overlap, s.catch_up, s.catch_up_window_seconds,
  s.jitter_seconds, s.start_at, s.end_at, s.paused, s.source, s.next_run_at, s.last_run_id, s.last_run_at, s.skipped_missed,
  s.skipped_overlap, s.last_skip_reason, s.last_skip_at, s.created_at, s.updated_at`;

/** Columns with the last run's status (null once it is deleted). */
const WITH_STATUS = (schema: SchemaSql) =>
  `${COLUMNS}, (SELECT r.status FROM ${schema}.run r WHERE r.id = s.last_run_id) AS last_run_status`;

const ACTIVE = `('QUEUED', 'RUNNING', 'WAITING')`;

const schedulesSql = (schema: SchemaSql) => ({
  INSERT: `INSERT INTO ${schema}.schedule AS s (tenant, name, cron, timezone, agent, run_options, overlap, catch_up,
             catch_up_window_seconds, jitter_seconds, start_at, end_at, paused, source, next_run_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
           RETURNING ${COLUMNS}, NULL::text AS last_run_status`,
  UPDATE: `UPDATE ${schema}.schedule AS s SET name = $3, cron = $4, timezone = $5, agent = $6, run_options = $7, overlap = $8,
             catch_up = $9, catch_up_window_seconds = $10, jitter_seconds = $11, start_at = $12, end_at = $13, paused = $14,
             source = $15, next_run_at = $16, updated_at = now(),
             -- A firing under way lets nothing go over this: its token no longer matches.
             locked_until = NULL, lock_token = NULL
           WHERE s.id = $1 AND s.tenant = $2
           RETURNING ${WITH_STATUS(schema)}`,
  GET: `SELECT ${WITH_STATUS(schema)} FROM ${schema}.schedule s WHERE s.id = $1`,
  BY_NAME: `SELECT ${WITH_STATUS(schema)} FROM ${schema}.schedule s WHERE s.tenant = $1 AND s.name = $2`,
  LIST: `SELECT ${WITH_STATUS(schema)} FROM ${schema}.schedule s
         WHERE ($1::text IS NULL OR s.tenant = $1) AND ($2::text IS NULL OR s.name > $2) AND ($4::text IS NULL OR s.source = $4)
         ORDER BY s.name, s.tenant LIMIT $3`,
  DELETE: `DELETE FROM ${schema}.schedule WHERE id = $1`,
  /**
   * Up to $2 due schedules of agents in $1, each held for $3 ms under a new token; with the database's
   * clock, which decides what is due (the processes' own clocks never do).
   */
  CLAIM: `WITH due AS (
            SELECT id FROM ${schema}.schedule
            WHERE next_run_at <= now() AND NOT paused AND agent = ANY ($1::text[]) AND (locked_until IS NULL OR locked_until < now())
            ORDER BY next_run_at LIMIT $2
            FOR UPDATE SKIP LOCKED)
          UPDATE ${schema}.schedule AS s SET locked_until = now() + $3 * interval '1 millisecond', lock_token = gen_random_uuid()
          FROM due WHERE s.id = due.id
          RETURNING ${WITH_STATUS(schema)}, s.lock_token, now() AS db_now`,
  /** Lets schedules go after their firings ($1, a JSON array), recording what each did; each only under its claim's token. */
  FIRED: `UPDATE ${schema}.schedule s SET locked_until = NULL, lock_token = NULL,
            next_run_at = CASE WHEN s.paused THEN s.next_run_at ELSE f.next_run_at END,
            last_run_id = coalesce(f.last_run_id, s.last_run_id), last_run_at = coalesce(f.last_run_at, s.last_run_at),
            skipped_missed = s.skipped_missed + f.skipped_missed, skipped_overlap = s.skipped_overlap + f.skipped_overlap,
            last_skip_reason = coalesce(f.last_skip_reason, s.last_skip_reason), last_skip_at = coalesce(f.last_skip_at, s.last_skip_at)
          FROM json_to_recordset($1::json) AS f (id uuid, token uuid, next_run_at timestamptz, last_run_id uuid, last_run_at timestamptz,
               skipped_missed int, skipped_overlap int, last_skip_reason text, last_skip_at timestamptz)
          WHERE s.id = f.id AND s.lock_token = f.token
          RETURNING s.id`,
  /**
   * @unit milliseconds — until the earliest due slot of agents in $1 (negative when one is due); null: none.
   * A schedule another process holds is due for this one when its hold ends.
   */
  NEXT_DUE: `SELECT (extract(epoch FROM (min(
               CASE WHEN locked_until > now() THEN greatest(next_run_at, locked_until) ELSE next_run_at END) - now())) * 1000)::float8 AS ms
             FROM ${schema}.schedule WHERE NOT paused AND next_run_at IS NOT NULL AND agent = ANY ($1::text[])`,
  /** The schedules of $1 that have a run still active (a slot's, a trigger's or a backfill's). */
  ACTIVE_RUNS: `SELECT DISTINCT schedule_id FROM ${schema}.run WHERE schedule_id = ANY ($1::uuid[]) AND status IN ${ACTIVE}`,
});

export class Schedules extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof schedulesSql>> {
  private readonly sealer: Sealer;

  constructor(db: Pick<pg.Pool, 'query'>, opts: SchemaOption & { sealer?: Sealer } = {}) {
    super(db, schedulesSql, opts);
    this.sealer = opts.sealer ?? NO_ENCRYPTION;
  }

  private toSchedule(r: ScheduleRow): Schedule {
    const o = r.run_options;
    const run: ScheduledRun = { ...(o as unknown as ScheduledRun), input: this.sealer.openText(o.input as string) };
    if (o.metadata !== undefined) run.metadata = this.sealer.open(o.metadata) as Record<string, unknown>;
    return {
      id: r.id,
      tenant: r.tenant,
      name: r.name,
      cron: r.cron,
      timezone: r.timezone,
      agent: r.agent,
      run,
      overlap: r.overlap,
      catchUp: r.catch_up,
      catchUpWindowSeconds: r.catch_up_window_seconds,
      jitterSeconds: r.jitter_seconds,
      startAt: r.start_at,
      endAt: r.end_at,
      paused: r.paused,
      source: r.source,
      nextRunAt: r.next_run_at,
      lastRunId: r.last_run_id as RunId | null,
      lastRunAt: r.last_run_at,
      lastRunStatus: r.last_run_status as RunStatus | null,
      skipped: {
        missed: Number(r.skipped_missed),
        overlap: Number(r.skipped_overlap),
        lastReason: r.last_skip_reason,
        lastAt: r.last_skip_at,
      },
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    };
  }

  /** The run options as stored: the input and metadata sealed when encryption is on. */
  private runOptions(run: ScheduledRun): string {
    const stored: Record<string, unknown> = { ...run, input: this.sealer.text(run.input) };
    if (run.metadata !== undefined) stored.metadata = this.sealer.json(run.metadata);
    return JSON.stringify(stored);
  }

  private params(f: ScheduleFields): unknown[] {
    return [
      f.cron,
      f.timezone,
      f.agent,
      this.runOptions(f.run),
      f.overlap,
      f.catchUp,
      f.catchUpWindowSeconds,
      f.jitterSeconds,
      f.startAt,
      f.endAt,
      f.paused,
      f.source,
      f.nextRunAt,
    ];
  }

  private taken(name: string) {
    return (e: unknown): never => {
      if ((e as { code?: string }).code === UNIQUE_VIOLATION) throw new ConflictError(`a schedule named "${name}" exists already`);
      throw e;
    };
  }

  /** A new schedule; ConflictError when the tenant has one of that name. */
  async create(f: ScheduleFields): Promise<Schedule> {
    const { rows } = await this.db.query<ScheduleRow>(this.sql.INSERT, [f.tenant, f.name, ...this.params(f)]).catch(this.taken(f.name));
    return this.toSchedule(rows[0]!);
  }

  /** The schedule changed to `f` (the tenant stays); null when there is no such schedule of that tenant. */
  async update(id: string, f: ScheduleFields): Promise<Schedule | null> {
    const { rows } = await this.db.query<ScheduleRow>(this.sql.UPDATE, [id, f.tenant, f.name, ...this.params(f)]).catch(this.taken(f.name));
    return rows[0] ? this.toSchedule(rows[0]) : null;
  }

  async get(id: string): Promise<Schedule | null> {
    const { rows } = await this.db.query<ScheduleRow>(this.sql.GET, [id]);
    return rows[0] ? this.toSchedule(rows[0]) : null;
  }

  async byName(tenant: string, name: string): Promise<Schedule | null> {
    const { rows } = await this.db.query<ScheduleRow>(this.sql.BY_NAME, [tenant, name]);
    return rows[0] ? this.toSchedule(rows[0]) : null;
  }

  /** By name, after the name `after`; one tenant's (null: every tenant's), of one source when given. */
  async list(q: { tenant: string | null; after?: string | null; limit: number; source?: Schedule['source'] }): Promise<Schedule[]> {
    const { rows } = await this.db.query<ScheduleRow>(this.sql.LIST, [q.tenant, q.after ?? null, q.limit, q.source ?? null]);
    return rows.map((r) => this.toSchedule(r));
  }

  async delete(id: string): Promise<boolean> {
    return ((await this.db.query(this.sql.DELETE, [id])).rowCount ?? 0) > 0;
  }

  /**
   * Takes up to `limit` due schedules of `agents` for `leaseMs` (see CLAIM). One that cannot be read (its
   * values sealed with a key this process lacks) is left to its hold's end and told to `unreadable`.
   */
  async claimDue(
    agents: readonly string[],
    limit: number,
    leaseMs: number,
    unreadable: (id: string, e: Error) => void,
  ): Promise<{ claimed: ClaimedSchedule[]; taken: number }> {
    const { rows } = await this.db.query<ScheduleRow & { lock_token: string; db_now: Date }>(this.sql.CLAIM, [agents, limit, leaseMs]);
    const claimed: ClaimedSchedule[] = [];
    for (const r of rows) {
      try {
        claimed.push({ schedule: this.toSchedule(r), token: r.lock_token, now: r.db_now });
      } catch (e) {
        unreadable(r.id, e as Error);
      }
    }
    return { claimed, taken: rows.length };
  }

  /** Lets claimed schedules go with what their firings did; returns the ids of those whose claim had lapsed (another took them). */
  async fired(firings: readonly { claim: ClaimedSchedule; fired: Fired }[]): Promise<string[]> {
    if (firings.length === 0) return [];
    const items = firings.map(({ claim, fired: f }) => ({
      id: claim.schedule.id,
      token: claim.token,
      next_run_at: f.nextRunAt,
      last_run_id: f.lastRun?.id ?? null,
      last_run_at: f.lastRun?.at ?? null,
      skipped_missed: f.skippedMissed,
      skipped_overlap: f.skippedOverlap,
      last_skip_reason: f.lastSkip?.reason ?? null,
      last_skip_at: f.lastSkip?.at ?? null,
    }));
    const { rows } = await this.db.query<{ id: string }>(this.sql.FIRED, [JSON.stringify(items)]);
    const let_go = new Set(rows.map((r) => r.id));
    return items.filter((i) => !let_go.has(i.id)).map((i) => i.id);
  }

  /** @unit milliseconds — until the earliest due slot of `agents`; null when none is planned. */
  async nextDueInMs(agents: readonly string[]): Promise<number | null> {
    const { rows } = await this.db.query<{ ms: number | null }>(this.sql.NEXT_DUE, [agents]);
    // Clamped here, not with greatest(0, …) in SQL: greatest ignores a NULL, and the minimum over no
    // schedule would be 0 (due now) where it is none, and the scheduler would look again at once, forever.
    const ms = rows[0]?.ms ?? null;
    return ms === null ? null : Math.max(0, ms);
  }

  /** Which of these schedules have a run still QUEUED, RUNNING or WAITING. */
  async withActiveRuns(scheduleIds: readonly string[]): Promise<Set<string>> {
    if (scheduleIds.length === 0) return new Set();
    const { rows } = await this.db.query<{ schedule_id: string }>(this.sql.ACTIVE_RUNS, [scheduleIds]);
    return new Set(rows.map((r) => r.schedule_id));
  }
}
