/**
 * Finished runs with their steps, written straight into the tables with generate_series, as a long-lived
 * installation would hold them: model and tool calls alternating (the model's tool_use ids match the
 * tool steps, so a step's request can be rebuilt), growing prompts with cache reads, priced usage,
 * most runs SUCCEEDED and some FAILED, CANCELLED or TIMED_OUT. Creation times spread evenly over
 * `spanMs` before now, metadata {"seeded":true}. For the dashboard's benchmark and its screenshots; never
 * used by the runtime.
 */
import type pg from 'pg';

export interface SeedOptions {
  runs: number;
  /** Steps of each run (odd: the last is the model's answer); with `varied`, at most this many. */
  steps: number;
  varied?: boolean;
  /** @unit milliseconds — how far back creation times go. */
  spanMs: number;
  /** Runs per INSERT statement, so memory stays flat however many runs. */
  batch?: number;
}

const INPUTS = [
  'Which acme tickets are overdue?',
  'Summarise the open tickets of globex and who owns them.',
  'Add a comment to ACME-102 saying the fix ships on Friday.',
  'List the urgent tickets opened this week.',
  'Is initech waiting on us for anything?',
  'Draft a status update for the umbrella account.',
  'Which tickets have no assignee?',
  'Close the duplicates of ACME-101 and say why.',
];

/** A hash of the run id and a salt, 0 ≤ x < mod: deterministic "randomness" per row. */
const H = (salt: string, mod: number) => `(abs(hashtext(r.id::text || '${salt}')) % ${mod})`;

export async function seedRuns(db: Pick<pg.Pool, 'query'>, o: SeedOptions): Promise<void> {
  const batch = o.batch ?? 20_000;
  const steps = o.steps % 2 === 1 ? o.steps : o.steps + 1;
  for (let done = 0; done < o.runs; done += batch) {
    const n = Math.min(batch, o.runs - done);
    await db.query(
      `WITH new_runs AS (
         INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, run_at, attempts, metadata,
                          created_at, updated_at, finished_at, output, error, stop_reason)
         SELECT id, status, ($4::text[])[1 + (g % cardinality($4::text[]))], model, 100000, 50, created_at + interval '10 minutes',
                created_at, 1, '{"seeded":true}', created_at, created_at, created_at, NULL, NULL, NULL
         FROM (
           SELECT g, gen_random_uuid() AS id,
                  now() - ((g + $5) * $1::float8 / $2) * interval '1 millisecond' AS created_at,
                  CASE WHEN g % 100 < 86 THEN 'SUCCEEDED' WHEN g % 100 < 94 THEN 'FAILED'
                       WHEN g % 100 < 98 THEN 'CANCELLED' ELSE 'TIMED_OUT' END AS status,
                  CASE WHEN g % 10 < 7 THEN 'claude-sonnet-4-6' ELSE 'claude-haiku-4-5' END AS model
           FROM generate_series(1, $3) g) x
         RETURNING id, model, created_at),
       counted AS (
         SELECT r.*, CASE WHEN $7 THEN 1 + 2 * ${H('n', (steps + 1) / 2)} ELSE $6 END AS n FROM new_runs r)
       INSERT INTO durable_agent.run_step (run_id, seq, kind, status, tool_name, tool_use_id, request, response, stop_reason,
                             input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens,
                             cost_usd, latency_ms, worker, started_at, finished_at)
       SELECT r.id, s, kind, 'DONE',
              CASE WHEN kind = 'TOOL' THEN 'list_tickets' END,
              CASE WHEN kind = 'TOOL' THEN 'toolu_' || replace(r.id::text, '-', '') || '_' || (s - 1) END,
              CASE WHEN kind = 'MODEL' THEN jsonb_build_object('model', r.model, 'maxTokens', 4096, 'systemDigest', NULL, 'toolsDigest', NULL) END,
              CASE WHEN kind = 'TOOL' THEN '[{"id":"ACME-101","title":"Export fails on large projects","due":"2025-01-10"}]'
                   WHEN s = r.n THEN '[{"type":"text","text":"ACME-101 (Export fails on large projects) is overdue since 10 January."}]'
                   ELSE '[{"type":"tool_use","id":"toolu_' || replace(r.id::text, '-', '') || '_' || s || '","name":"list_tickets","input":{"overdue":true}}]' END,
              CASE WHEN kind = 'TOOL' THEN NULL WHEN s = r.n THEN 'end_turn' ELSE 'tool_use' END,
              u.input_tokens, u.output_tokens, u.cache_write, u.cache_read,
              CASE WHEN kind = 'TOOL' THEN 0 ELSE
                (u.input_tokens * p.input + u.output_tokens * p.output + u.cache_write * p.cache_write + u.cache_read * p.cache_read) / 1e6 END,
              u.latency, 'worker-' || (1 + ${H('w', 3)}),
              r.created_at + interval '150 milliseconds' + (s - 1) * interval '2600 milliseconds',
              r.created_at + interval '150 milliseconds' + (s - 1) * interval '2600 milliseconds' + u.latency * interval '1 millisecond'
       FROM counted r
       CROSS JOIN LATERAL generate_series(1, r.n) s
       CROSS JOIN LATERAL (SELECT CASE WHEN s % 2 = 1 THEN 'MODEL' ELSE 'TOOL' END AS kind) k
       CROSS JOIN LATERAL (
         SELECT CASE WHEN r.model = 'claude-haiku-4-5' THEN 1 ELSE 3 END AS input,
                CASE WHEN r.model = 'claude-haiku-4-5' THEN 5 ELSE 15 END AS output,
                CASE WHEN r.model = 'claude-haiku-4-5' THEN 1.25 ELSE 3.75 END AS cache_write,
                CASE WHEN r.model = 'claude-haiku-4-5' THEN 0.1 ELSE 0.3 END AS cache_read) p
       CROSS JOIN LATERAL (
         SELECT CASE WHEN kind = 'TOOL' THEN 0 ELSE 300 + abs(hashtext(r.id::text || s)) % 400 END AS input_tokens,
                CASE WHEN kind = 'TOOL' THEN 0 ELSE 30 + abs(hashtext(r.id::text || s || 'o')) % 220 END AS output_tokens,
                CASE WHEN kind = 'TOOL' THEN 0 WHEN s = 1 THEN 1400 ELSE 180 END AS cache_write,
                CASE WHEN kind = 'TOOL' THEN 0 ELSE (s - 1) * 460 END AS cache_read,
                CASE WHEN kind = 'TOOL' THEN 4 + abs(hashtext(r.id::text || s || 'l')) % 180
                     ELSE 700 + abs(hashtext(r.id::text || s || 'l')) % 1900 END AS latency) u`,
      [o.spanMs, o.runs, n, INPUTS, done, steps, o.varied ?? false],
    );
  }
  // The run rows carry their totals and end, as the checkpoints would have left them.
  await db.query(
    `UPDATE durable_agent.run r SET tokens_used = t.tokens, cost_usd = t.cost, finished_at = t.last, updated_at = t.last,
            output = CASE WHEN r.status = 'SUCCEEDED' THEN 'ACME-101 (Export fails on large projects) is overdue since 10 January.' END,
            error = CASE r.status WHEN 'FAILED' THEN 'token budget exhausted' WHEN 'CANCELLED' THEN 'cancelled on request'
                                  WHEN 'TIMED_OUT' THEN 'deadline passed' END,
            stop_reason = CASE WHEN r.status = 'SUCCEEDED' THEN 'end_turn' END
     FROM (SELECT run_id, sum(input_tokens + cache_creation_input_tokens + output_tokens) AS tokens, sum(cost_usd) AS cost,
                  max(finished_at) AS last
           FROM durable_agent.run_step GROUP BY run_id) t
     WHERE t.run_id = r.id AND r.metadata ? 'seeded' AND r.output IS NULL AND r.error IS NULL`,
  );
  await db.query('ANALYZE durable_agent.run; ANALYZE durable_agent.run_step');
}
