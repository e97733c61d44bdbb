/**
 * The SQL behind `GET /api/runs`: runs newest first, paged by keyset on (created_at DESC, id DESC),
 * which `run_created_idx` and `run_status_created_idx` serve directly, so a page costs the same on
 * page 1 and page 10,000 (OFFSET would re-read every skipped row).
 *
 * The cursor is opaque to clients: base64url of JSON {createdAt, id} naming the last run of the page.
 * createdAt is the exact timestamptz as text with microseconds: a JS Date keeps only milliseconds,
 * and a cursor rounded to the millisecond would skip or repeat runs created within the same one.
 *
 * Each listed run carries its step count: the highest seq, one probe of the step table's primary key
 * per run (steps are numbered 1, 2, 3 … without gaps), so a page costs the same however long its runs.
 */
import type pg from 'pg';
import { z } from 'zod';
import type { Run, RunStatus } from '../domain/types.ts';
import { InputError } from '../domain/errors.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { RUN_COLUMNS, type RunRow, toRun } from './rows.ts';
import { schemaSql, type SchemaOption, type SchemaSql } from '../db/schema.ts';

export interface RunPageQuery {
  status?: RunStatus | undefined;
  /** Only this tenant's runs (run_tenant_*_idx serve the same keyset); every tenant's when null or absent. */
  tenant?: string | null | undefined;
  /** Only this agent's runs (run_agent_created_idx serves the same keyset). */
  agent?: string | undefined;
  /** Only the runs this schedule made (run_schedule_idx serves the same keyset). */
  scheduleId?: string | undefined;
  /** 1..100; the caller validates it. */
  limit: number;
  cursor?: string | undefined;
}

/** A run as the list shows it: the run and how many steps it has recorded. */
export interface ListedRun extends Run {
  stepCount: number;
}

export interface RunPage {
  runs: ListedRun[];
  /** Where the next page starts; null on the last page. */
  nextCursor: string | null;
}

interface Position {
  createdAt: string;
  id: string;
}

/** created_at in UTC with all six fractional digits: what the cursor carries. */
const EXACT_CREATED_AT = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const EXACT_PATTERN = /^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const PositionSchema = z.strictObject({
  createdAt: z.string().regex(EXACT_PATTERN),
  id: z.guid(),
});

export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify(p)).toString('base64url');
}

/** Parses a client's cursor, or throws InputError: a bad cursor is a 400, never a failed query. */
export function decodeCursor(cursor: string): Position {
  const invalid = () => new InputError('invalid cursor', [{ path: 'cursor', message: 'not a cursor this server issued' }]);
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const parsed = PositionSchema.safeParse(decoded);
  if (!parsed.success) throw invalid();
  // The pattern admits 2025-02-30; PostgreSQL would reject it with an error, so check the calendar here.
  const millis = parsed.data.createdAt.slice(0, 23);
  const date = new Date(`${millis}Z`);
  if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 23) !== millis) throw invalid();
  return parsed.data;
}

/** The page's read, its tables in `schema`: the conditions `where` (none, or `WHERE …`), at most $`limit` rows. */
const runListingSql = (schema: SchemaSql) => ({
  PAGE: (where: string, limit: number) => `SELECT ${RUN_COLUMNS}, ${EXACT_CREATED_AT} AS exact_created_at,
              (SELECT max(s.seq) FROM ${schema}.run_step s WHERE s.run_id = run.id) AS step_count
       FROM ${schema}.run
       ${where}
       ORDER BY created_at DESC, id DESC
       LIMIT $${limit}`,
});

export interface RunListingOptions extends SchemaOption {
  /** Opens the runs' payloads as they are read; none by default. */
  sealer?: Sealer;
}

export class RunListing {
  private readonly sealer: Sealer;
  private readonly sql: ReturnType<typeof runListingSql>;

  constructor(
    private readonly db: Pick<pg.Pool, 'query'>,
    opts: RunListingOptions = {},
  ) {
    this.sealer = opts.sealer ?? NO_ENCRYPTION;
    this.sql = runListingSql(schemaSql(opts.schema));
  }

  async list(q: RunPageQuery): Promise<RunPage> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (q.tenant) {
      params.push(q.tenant);
      where.push(`tenant = $${params.length}`);
    }
    if (q.status) {
      params.push(q.status);
      where.push(`status = $${params.length}`);
    }
    if (q.agent) {
      params.push(q.agent);
      where.push(`agent = $${params.length}`);
    }
    if (q.scheduleId) {
      params.push(q.scheduleId);
      where.push(`schedule_id = $${params.length}::uuid`);
    }
    if (q.cursor) {
      const after = decodeCursor(q.cursor);
      params.push(after.createdAt, after.id);
      // A row comparison, so the index scan starts right after the cursor instead of filtering.
      where.push(`(created_at, id) < ($${params.length - 1}::timestamptz, $${params.length}::uuid)`);
    }
    // One extra row tells whether there is a next page without a count query.
    params.push(q.limit + 1);
    const { rows } = await this.db.query<RunRow & { exact_created_at: string; step_count: number | null }>(
      this.sql.PAGE(where.length ? `WHERE ${where.join(' AND ')}` : '', params.length),
      params,
    );
    const page = rows.slice(0, q.limit);
    const last = page.at(-1);
    return {
      runs: page.map((r) => ({ ...toRun(r, this.sealer), stepCount: r.step_count ?? 0 })),
      nextCursor: rows.length > q.limit && last ? encodeCursor({ createdAt: last.exact_created_at, id: last.id }) : null,
    };
  }
}
