/**
 * The reads behind the dashboard's overview: runs by status, and what the steps of the last hour and
 * the last day used (tokens, cost) and how long they took (p50/p95 by kind).
 *
 * Every read is bounded by an index: the steps are read once, from `run_step_started_idx` since the
 * start of the day, so they cost what the last day holds, not what the database holds; the runs of the
 * day are ranges of `run_status_created_idx`, one per status. Only the count of all runs by status reads
 * every run, as an index-only scan of `run_status_idx` (small: the status alone, deduplicated). The
 * cost of the steps grows with the day's steps: see `npm run bench:dashboard`. Time is a parameter: a window
 * is [at − an hour or a day, at), so figures for a past `at` are exactly those of that moment's rows.
 *
 * For one tenant, the same reads are limited to its runs: the counts through the tenant's own
 * indexes (run_tenant_status_created_idx), the day's steps joined to their runs.
 */
import type pg from 'pg';
import { RUN_STATUSES, STEP_KINDS, type StepKind } from '../domain/types.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';
import { countRunsByStatus, runStatsSql } from './run-stats.ts';

type Queryable = Pick<pg.Pool, 'query'>;

export interface UsageTotals {
  steps: number;
  inputTokens: number;
  outputTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
  costUsd: number;
}

export interface UsageBucket extends UsageTotals {
  start: Date;
}

export interface StepLatency {
  kind: StepKind;
  /** Finished steps of this kind in the window (the ones with a latency). */
  steps: number;
  /** Nearest-rank percentiles of latency_ms; null when there are no steps. */
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface OverviewWindow {
  since: Date;
  /** @unit seconds — the width of each bucket of `series`. */
  bucketSeconds: number;
  /** Runs created in the window, by their status now. */
  runsCreated: Record<string, number>;
  totals: UsageTotals;
  /** Usage per bucket, oldest first, every bucket present (zeros included); the first may start before `since`. */
  series: UsageBucket[];
  latency: StepLatency[];
}

export interface Overview {
  at: Date;
  /** Every run in the database by status; every known status is present, zero or not. */
  runsByStatus: Record<string, number>;
  hour: OverviewWindow;
  day: OverviewWindow;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** The hour's series in 5-minute buckets, the day's in hours: 12 and 24 bars. */
const FINE_MS = 5 * 60_000;

interface BucketRow {
  bucket: Date;
  in_hour: boolean;
  steps: number;
  input_tokens: number;
  output_tokens: number;
  cache_write_tokens: number;
  cache_read_tokens: number;
  cost_usd: number;
}

interface LatencyRow {
  kind: StepKind | null;
  day_steps: number;
  day_p: number[] | null;
  hour_steps: number;
  hour_p: number[] | null;
}

const zero = (): UsageTotals => ({ steps: 0, inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0, costUsd: 0 });

/** Costs are stored with 8 decimals; sums of floats would otherwise show 0.30000000000000004. */
const usd = (x: number) => Math.round(x * 1e8) / 1e8;

function add(into: UsageTotals, r: BucketRow): void {
  into.steps += r.steps;
  into.inputTokens += r.input_tokens;
  into.outputTokens += r.output_tokens;
  into.cacheWriteTokens += r.cache_write_tokens;
  into.cacheReadTokens += r.cache_read_tokens;
  into.costUsd = usd(into.costUsd + r.cost_usd);
}

const floorTo = (ms: number, unit: number) => Math.floor(ms / unit) * unit;

/** Buckets of `unit` from the one holding `since` to the one holding `at`, with the rows added in. */
function series(since: Date, at: Date, unit: number, rows: readonly BucketRow[]): UsageBucket[] {
  const buckets = new Map<number, UsageBucket>();
  for (let t = floorTo(since.getTime(), unit); t <= at.getTime(); t += unit) buckets.set(t, { start: new Date(t), ...zero() });
  for (const r of rows) {
    const b = buckets.get(floorTo(r.bucket.getTime(), unit));
    if (b) add(b, r);
  }
  return [...buckets.values()];
}

function latency(rows: readonly LatencyRow[], window: 'hour' | 'day'): StepLatency[] {
  return STEP_KINDS.map((kind) => {
    const r = rows.find((x) => x.kind === kind);
    const steps = r ? (window === 'hour' ? r.hour_steps : r.day_steps) : 0;
    const p = r ? (window === 'hour' ? r.hour_p : r.day_p) : null;
    return { kind, steps, p50Ms: steps && p ? p[0]! : null, p95Ms: steps && p ? p[1]! : null };
  });
}

/** The overview's reads, their tables in `schema`; with `ofTenant`, of the tenant's runs only ($5 and $4). */
function runOverviewSql(schema: SchemaSql) {
  const created = (ofTenant: string) => `SELECT s.status,
              (SELECT count(*)::int FROM ${schema}.run r WHERE r.status = s.status AND r.created_at >= $1 AND r.created_at < $3 ${ofTenant}) AS day,
              (SELECT count(*)::int FROM ${schema}.run r WHERE r.status = s.status AND r.created_at >= $2 AND r.created_at < $3 ${ofTenant}) AS hour
       FROM unnest($4::text[]) AS s (status)`;
  const steps = (stepsOfTenant: string) => `WITH s AS MATERIALIZED (
         SELECT started_at, kind, latency_ms, input_tokens, output_tokens, cache_creation_input_tokens,
                cache_read_input_tokens, cost_usd
         FROM ${schema}.run_step WHERE started_at >= $1 AND started_at < $3 ${stepsOfTenant})
       SELECT date_bin('5 minutes', started_at, timestamptz 'epoch') AS bucket, started_at >= $2 AS in_hour,
              NULL AS kind, count(*)::int AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
              sum(cache_creation_input_tokens) AS cache_write_tokens, sum(cache_read_input_tokens) AS cache_read_tokens,
              sum(cost_usd) AS cost_usd, NULL::int AS day_steps, NULL::int[] AS day_p, NULL::int AS hour_steps, NULL::int[] AS hour_p
       FROM s GROUP BY 1, 2
       UNION ALL
       SELECT NULL, NULL, kind, 0, NULL, NULL, NULL, NULL, NULL,
              count(*)::int,
              percentile_disc(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY latency_ms),
              count(*) FILTER (WHERE started_at >= $2)::int,
              percentile_disc(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE started_at >= $2)
       FROM s WHERE latency_ms IS NOT NULL GROUP BY kind`;
  return {
    stats: runStatsSql(schema),
    CREATED: created(''),
    CREATED_OF_TENANT: created('AND r.tenant = $5'),
    STEPS: steps(''),
    STEPS_OF_TENANT: steps(`AND run_id IN (SELECT id FROM ${schema}.run WHERE tenant = $4)`),
  };
}

export class RunOverview extends SchemaStore<Pick<pg.Pool, 'connect'>, ReturnType<typeof runOverviewSql>> {
  constructor(db: Pick<pg.Pool, 'connect'>, opts: SchemaOption = {}) {
    super(db, runOverviewSql, opts);
  }

  /**
   * The figures for the windows ending at `at`; by default the database's now, the clock that stamped
   * the rows. One read-only transaction on one snapshot, so the figures agree with each other.
   */
  async read(at?: Date, tenant: string | null = null): Promise<Overview> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      // A day of steps is thousands of rows in started_at order. The planner prefers an index scan (the
      // column follows the table's physical order), which visits a page once per row; a bitmap scan visits
      // each page once and took a third of the time in the benchmark. Index-only scans (the counts) are unaffected.
      await client.query('SET LOCAL enable_indexscan = off');
      at ??= (await client.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
      const overview = await this.readIn(client, at, tenant);
      await client.query('COMMIT');
      return overview;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  private async readIn(db: Queryable, at: Date, tenant: string | null): Promise<Overview> {
    const daySince = new Date(at.getTime() - DAY_MS);
    const hourSince = new Date(at.getTime() - HOUR_MS);
    const byStatus = await countRunsByStatus(db, this.sql.stats, tenant);
    // Per status, two range scans of run_status_created_idx (or the tenant's): only the day's runs are read.
    const created = await db.query<{ status: string; day: number; hour: number }>(
      tenant === null ? this.sql.CREATED : this.sql.CREATED_OF_TENANT,
      [daySince, hourSince, at, RUN_STATUSES, ...(tenant === null ? [] : [tenant])],
    );
    // The day's steps are read once (the CTE), then summed per 5-minute bucket, split at the hour's
    // start so both windows' totals are exact sums of rows, and ranked per kind for the percentiles.
    const steps = await db.query<BucketRow & LatencyRow>(tenant === null ? this.sql.STEPS : this.sql.STEPS_OF_TENANT, [
      daySince,
      hourSince,
      at,
      ...(tenant === null ? [] : [tenant]),
    ]);
    const buckets = steps.rows.filter((r) => r.kind === null);
    const latencies = steps.rows.filter((r) => r.kind !== null);

    const runsByStatus: Record<string, number> = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0]));
    Object.assign(runsByStatus, byStatus);
    const hourTotals = zero();
    const dayTotals = zero();
    for (const r of buckets) {
      add(dayTotals, r);
      if (r.in_hour) add(hourTotals, r);
    }
    const createdIn = (w: 'hour' | 'day') => Object.fromEntries(created.rows.filter((r) => r[w] > 0).map((r) => [r.status, r[w]]));
    return {
      at,
      runsByStatus,
      hour: {
        since: hourSince,
        bucketSeconds: FINE_MS / 1000,
        runsCreated: createdIn('hour'),
        totals: hourTotals,
        series: series(
          hourSince,
          at,
          FINE_MS,
          buckets.filter((r) => r.in_hour),
        ),
        latency: latency(latencies, 'hour'),
      },
      day: {
        since: daySince,
        bucketSeconds: HOUR_MS / 1000,
        runsCreated: createdIn('day'),
        totals: dayTotals,
        series: series(daySince, at, HOUR_MS, buckets),
        latency: latency(latencies, 'day'),
      },
    };
  }
}
