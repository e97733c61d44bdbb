/**
 * The steps of a run through the runs it continues. Every inherited conversation is one walk from a run
 * back along the single link each run may have:
 * - a fork (`forked_from_run_id`) continues its source's conversation after step `forked_after_seq`:
 *   the source's steps 1..N are the fork's own first steps (it numbers its own from N + 1), and its
 *   input is the conversation's first user turn;
 * - a follow-up (`previous_run_id`) is the special case "after the source's last seq, then a new user
 *   input": all of the source's steps, closed (chain-replay.ts), then the follow-up's input starts a new
 *   turn and its steps are numbered from 1.
 * Nothing is copied either way. `part` counts the follow-up links crossed: part 0 is the run's own log
 * (the fork lineage that its step seqs number), parts 1, 2 … the conversations before it, newest first.
 *
 * Each link is a lookup by primary key, so the cost grows with the chain's length, never with the
 * number of steps behind a cut-off. `log` mode follows fork links only (the run's own log); the
 * `conversation` mode follows both.
 */

import type { SchemaSql } from '../db/schema.ts';

/** The most links followed: a guard against a cycle no write can make. */
const MAX_LINKS = 1000;

/** How many tool_use blocks a MODEL step's reply holds (null for a TOOL step). */
export const TOOL_USES = `CASE WHEN s.kind = 'MODEL' AND s.response IS NOT NULL
  THEN (SELECT count(*) FROM jsonb_array_elements(s.response::jsonb) e WHERE e->>'type' = 'tool_use')::int END AS tool_uses`;

/** The walk and the reads along it, their tables in `schema`. */
export function lineageSql(schema: SchemaSql) {
  const lineage = (mode: 'log' | 'conversation' = 'log') => `lineage AS (
  SELECT id AS run_id, input, input_blocks, status, COALESCE(forked_from_run_id, previous_run_id) AS source, forked_from_run_id IS NOT NULL AS forked,
         COALESCE(forked_after_seq, 0) AS own_from, 2147483647 AS upto, 0 AS depth, 0 AS part
  FROM ${schema}.run WHERE id = $1
  UNION ALL
  SELECT r.id, r.input, r.input_blocks, r.status, COALESCE(r.forked_from_run_id, r.previous_run_id), r.forked_from_run_id IS NOT NULL,
         COALESCE(r.forked_after_seq, 0), CASE WHEN l.forked THEN LEAST(l.upto, l.own_from) ELSE 2147483647 END, l.depth + 1,
         l.part + CASE WHEN l.forked THEN 0 ELSE 1 END
  FROM lineage l JOIN ${schema}.run r ON r.id = l.source
  WHERE l.depth < ${MAX_LINKS}${mode === 'log' ? ' AND l.forked' : ''})`;
  const LINEAGE = lineage('log');
  return {
    /** The CTE of run $1's lineage, for statements of their own (workspace-files.ts). */
    lineage,
    LINEAGE,
    /**
     * The conversations run $1's own log continues: each part's head run (the newest run of that part,
     * whose input opens it), newest part first. With CONVERSATION_STEPS, what a follow-up replays first.
     */
    CONVERSATION_RUNS: `WITH RECURSIVE ${lineage('conversation')}
  SELECT DISTINCT ON (part) part, run_id AS id, input, input_blocks, status FROM lineage WHERE part > 0 ORDER BY part, depth`,

    /** Every step of the conversations before run $1's own log, with their `part`, oldest part first, in seq order. */
    conversationSteps: (columns: string) => `WITH RECURSIVE ${lineage('conversation')}
    SELECT l.part, ${columns} FROM lineage l
    JOIN ${schema}.run_step s ON s.run_id = l.run_id AND s.seq > l.own_from AND s.seq <= l.upto
    WHERE l.part > 0
    ORDER BY l.part DESC, s.seq`,

    /** Every step of run $1's log with `columns` (from run_step `s`), seq at most $2 when `upTo` is set, in order. */
    lineageSteps: (columns: string, upTo = false) => `WITH RECURSIVE ${LINEAGE}
    SELECT ${columns} FROM lineage l
    JOIN ${schema}.run_step s ON s.run_id = l.run_id AND s.seq > l.own_from AND s.seq <= l.upto${upTo ? ' AND s.seq <= $2' : ''}
    ORDER BY s.seq`,

    /**
     * The steps of run $1's log from its latest MODEL step at or before seq $2 up to $2: the turn a fork
     * after $2 would cut. Found backwards along the primary key, so the cost is the turn's, not the log's.
     */
    TURN_AT: `WITH RECURSIVE ${LINEAGE},
  turn_start AS (
    SELECT m.seq FROM lineage l CROSS JOIN LATERAL (
      SELECT s.seq FROM ${schema}.run_step s
      WHERE s.run_id = l.run_id AND s.seq > l.own_from AND s.seq <= LEAST(l.upto, $2) AND s.kind = 'MODEL'
      ORDER BY s.seq DESC LIMIT 1) m
    ORDER BY m.seq DESC LIMIT 1)
  SELECT s.seq, s.kind, s.status, ${TOOL_USES} FROM lineage l
  JOIN ${schema}.run_step s
    ON s.run_id = l.run_id AND s.seq > GREATEST(l.own_from, (SELECT seq FROM turn_start) - 1) AND s.seq <= LEAST(l.upto, $2)
  ORDER BY s.seq`,
  };
}

/** A column list of run_step, each column taken from `s` (the lineage has a run_id of its own). */
export const qualified = (columns: string) =>
  columns
    .split(',')
    .map((c) => `s.${c.trim()}`)
    .join(', ');
