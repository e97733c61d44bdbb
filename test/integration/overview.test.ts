/**
 * The overview (GET /api/overview) and the list's step counts, against a real PostgreSQL: every figure
 * is checked against what SQL over the same rows says, with steps placed in the last hour, the last
 * day, and before it, so each window counts exactly its own rows.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.ts';
import type { RunId } from '../../src/domain/types.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunOverview } from '../../src/store/run-overview.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

let db: TestDatabase;
let app: FastifyInstance;

interface SeedStep {
  kind: 'MODEL' | 'TOOL';
  ageMinutes: number;
  latencyMs: number | null;
  input?: number;
  output?: number;
  cacheWrite?: number;
  cacheRead?: number;
  cost?: number;
}

/** Writes the steps of one run as a worker would have, `ageMinutes` before now. */
async function seedSteps(runId: RunId, steps: SeedStep[]): Promise<void> {
  for (const [i, s] of steps.entries()) {
    await db.pool.query(
      `INSERT INTO durable_agent.run_step (run_id, seq, kind, status, tool_name, tool_use_id, input_tokens, output_tokens,
                             cache_creation_input_tokens, cache_read_input_tokens, cost_usd, latency_ms, worker, started_at, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'w', now() - $13 * interval '1 minute',
               CASE WHEN $12::int IS NULL THEN NULL ELSE now() - $13 * interval '1 minute' + $12 * interval '1 millisecond' END)`,
      [
        runId,
        i + 1,
        s.kind,
        s.latencyMs === null ? 'STARTED' : 'DONE',
        s.kind === 'TOOL' ? 'list_tickets' : null,
        s.kind === 'TOOL' ? `toolu_${runId.slice(0, 8)}_${i}` : null,
        s.input ?? 0,
        s.output ?? 0,
        s.cacheWrite ?? 0,
        s.cacheRead ?? 0,
        s.cost ?? 0,
        s.latencyMs,
        s.ageMinutes,
      ],
    );
  }
}

/** The nearest-rank percentile, as percentile_disc computes it. */
function nearestRank(values: number[], p: number): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

const MODEL_LATENCIES_HOUR = [900, 1200, 450, 3000, 800, 2200, 1500, 700, 5100, 1000];
const TOOL_LATENCIES_HOUR = [5, 12, 40, 3, 250];

beforeAll(async () => {
  db = await testDatabase();
  app = createServer({
    store: db.records,
    listing: new RunListing(db.pool),
    overview: new RunOverview(db.pool),
    defaults: { agent: 'a', model: 'm', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 10 },
    checkDatabase: async () => {},
    logger: false,
  });

  // The last hour: one run with ten model steps and five tool steps (one more tool call still running).
  const recent = await newRun(db.records, 'recent');
  await seedSteps(recent.id, [
    ...MODEL_LATENCIES_HOUR.map((latencyMs, i) => ({
      kind: 'MODEL' as const,
      ageMinutes: 50 - i * 4,
      latencyMs,
      input: 1000 + i,
      output: 50,
      cacheWrite: 10,
      cacheRead: 300,
      cost: 0.0123,
    })),
    ...TOOL_LATENCIES_HOUR.map((latencyMs, i) => ({ kind: 'TOOL' as const, ageMinutes: 30 - i, latencyMs })),
    { kind: 'TOOL', ageMinutes: 1, latencyMs: null },
  ]);
  // Earlier today: a run created three hours ago whose steps are two hours old.
  const earlier = await newRun(db.records, 'earlier');
  await db.pool.query(
    `UPDATE durable_agent.run SET status = 'SUCCEEDED', created_at = now() - interval '3 hours', finished_at = now() WHERE id = $1`,
    [earlier.id],
  );
  await seedSteps(earlier.id, [
    { kind: 'MODEL', ageMinutes: 125, latencyMs: 10_000, input: 7000, output: 400, cost: 0.5 },
    { kind: 'TOOL', ageMinutes: 124, latencyMs: 800 },
  ]);
  // Last week: counted by status, but in neither window.
  const old = await newRun(db.records, 'old');
  await db.pool.query(
    `UPDATE durable_agent.run SET status = 'FAILED', created_at = now() - interval '7 days', finished_at = now() - interval '7 days' WHERE id = $1`,
    [old.id],
  );
  await seedSteps(old.id, [{ kind: 'MODEL', ageMinutes: 7 * 24 * 60, latencyMs: 99_999, input: 1_000_000, cost: 100 }]);
  await db.pool.query(`UPDATE durable_agent.run SET status = 'CANCELLED', finished_at = now() WHERE id = $1`, [
    (await newRun(db.records, 'cancelled')).id,
  ]);
});

afterAll(async () => {
  await app.close();
  await db.close();
});

describe('GET /api/overview', () => {
  it('counts every run by status, zeros included', async () => {
    const body = (await app.inject('/api/overview')).json();
    const { rows } = await db.pool.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status',
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    for (const r of rows) expect(body.runsByStatus[r.status]).toBe(r.n);
    expect(body.runsByStatus).toMatchObject({ QUEUED: 1, SUCCEEDED: 1, FAILED: 1, CANCELLED: 1, RUNNING: 0, TIMED_OUT: 0 });
  });

  it('sums tokens and cost of the steps started in each window, and agrees with SQL over the same rows', async () => {
    const res = await app.inject('/api/overview');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    for (const name of ['hour', 'day'] as const) {
      const w = body[name];
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS steps, coalesce(sum(input_tokens), 0)::int AS input, coalesce(sum(output_tokens), 0)::int AS output,
                coalesce(sum(cache_creation_input_tokens), 0)::int AS cache_write, coalesce(sum(cache_read_input_tokens), 0)::int AS cache_read,
                coalesce(sum(cost_usd), 0)::float8 AS cost
         FROM durable_agent.run_step WHERE started_at >= $1 AND started_at < $2`,
        [w.since, body.at],
      );
      const sql = rows[0];
      expect(w.totals).toEqual({
        steps: sql.steps,
        inputTokens: sql.input,
        outputTokens: sql.output,
        cacheWriteTokens: sql.cache_write,
        cacheReadTokens: sql.cache_read,
        costUsd: expect.closeTo(sql.cost, 8),
      });
      // The series adds up to the totals, bucket by bucket, with the empty buckets present.
      const sum = (k: string) => w.series.reduce((a: number, b: Record<string, number>) => a + b[k]!, 0);
      expect(sum('steps')).toBe(w.totals.steps);
      expect(sum('inputTokens')).toBe(w.totals.inputTokens);
      expect(sum('costUsd')).toBeCloseTo(w.totals.costUsd, 8);
      expect(w.series.length).toBe(name === 'hour' ? 13 : 25);
      expect(w.bucketSeconds).toBe(name === 'hour' ? 300 : 3600);
    }
    // Each window holds exactly the rows placed in it.
    expect(body.hour.totals.steps).toBe(16);
    expect(body.hour.totals.inputTokens).toBe(MODEL_LATENCIES_HOUR.reduce((a, _, i) => a + 1000 + i, 0));
    expect(body.hour.totals.costUsd).toBeCloseTo(0.123, 8);
    expect(body.day.totals.steps).toBe(18);
    expect(body.day.totals.inputTokens).toBe(body.hour.totals.inputTokens + 7000);
    expect(body.day.totals.costUsd).toBeCloseTo(0.623, 8);
    expect(Date.parse(body.at) - Date.parse(body.hour.since)).toBe(3_600_000);
    expect(Date.parse(body.at) - Date.parse(body.day.since)).toBe(86_400_000);
  });

  it('gives p50 and p95 step latency by kind (nearest rank), counting finished steps only', async () => {
    const body = (await app.inject('/api/overview')).json();
    const hourModel = MODEL_LATENCIES_HOUR;
    const dayModel = [...MODEL_LATENCIES_HOUR, 10_000];
    const dayTool = [...TOOL_LATENCIES_HOUR, 800];
    expect(body.hour.latency).toEqual([
      { kind: 'MODEL', steps: 10, p50Ms: nearestRank(hourModel, 0.5), p95Ms: nearestRank(hourModel, 0.95) },
      { kind: 'TOOL', steps: 5, p50Ms: nearestRank(TOOL_LATENCIES_HOUR, 0.5), p95Ms: nearestRank(TOOL_LATENCIES_HOUR, 0.95) },
    ]);
    expect(body.day.latency).toEqual([
      { kind: 'MODEL', steps: 11, p50Ms: nearestRank(dayModel, 0.5), p95Ms: nearestRank(dayModel, 0.95) },
      { kind: 'TOOL', steps: 6, p50Ms: nearestRank(dayTool, 0.5), p95Ms: nearestRank(dayTool, 0.95) },
    ]);
    // The values themselves, so a wrong percentile formula cannot agree with a wrong helper.
    expect(body.hour.latency[0]).toMatchObject({ p50Ms: 1000, p95Ms: 5100 });
    expect(body.hour.latency[1]).toMatchObject({ p50Ms: 12, p95Ms: 250 });
  });

  it('counts the runs created in each window by their status now', async () => {
    const body = (await app.inject('/api/overview')).json();
    expect(body.hour.runsCreated).toEqual({ QUEUED: 1, CANCELLED: 1 });
    expect(body.day.runsCreated).toEqual({ QUEUED: 1, CANCELLED: 1, SUCCEEDED: 1 });
  });

  it('answers zeros and nulls for an empty window', async () => {
    const o = await new RunOverview(db.pool).read(new Date(Date.now() - 30 * 86_400_000));
    expect(o.hour.totals).toEqual({ steps: 0, inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0, costUsd: 0 });
    expect(o.hour.latency).toEqual([
      { kind: 'MODEL', steps: 0, p50Ms: null, p95Ms: null },
      { kind: 'TOOL', steps: 0, p50Ms: null, p95Ms: null },
    ]);
    expect(o.hour.series.every((b) => b.steps === 0)).toBe(true);
  });

  it('is described in /openapi.json', async () => {
    const doc = (await app.inject('/openapi.json')).json();
    expect(doc.paths['/api/overview'].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Overview',
    });
    expect(doc.components.schemas.Overview.required).toEqual(['at', 'runsByStatus', 'hour', 'day']);
    expect(doc.components.schemas.RunPage.properties.runs.items).toEqual({ $ref: '#/components/schemas/RunListItem' });
  });

  it('is a 404 on a server without it', async () => {
    const bare = createServer({
      store: db.records,
      listing: new RunListing(db.pool),
      defaults: { agent: 'a', model: 'm', tokenBudget: 1, timeoutSeconds: 1, maxSteps: 1 },
      checkDatabase: async () => {},
      logger: false,
    });
    const res = await bare.inject('/api/overview');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('not_found');
    await bare.close();
  });
});

describe('GET /api/runs for the dashboard', () => {
  it('gives each run its step count and, once finished, its duration', async () => {
    const { runs } = (await app.inject('/api/runs?limit=100')).json();
    const byInput = Object.fromEntries(runs.map((r: { input: string }) => [r.input, r]));
    expect(byInput.recent).toMatchObject({ stepCount: 16, durationMs: null, status: 'QUEUED' });
    expect(byInput.old).toMatchObject({ stepCount: 1, durationMs: 0 });
    expect(byInput.cancelled).toMatchObject({ stepCount: 0 });
    expect(byInput.earlier.stepCount).toBe(2);
    expect(byInput.earlier.durationMs).toBe(Date.parse(byInput.earlier.finishedAt) - Date.parse(byInput.earlier.createdAt));
    expect(byInput.earlier.durationMs).toBeGreaterThanOrEqual(3 * 3_600_000);
  });
});
