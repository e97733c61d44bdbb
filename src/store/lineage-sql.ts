/**
 * The steps of a run through the runs it continues. A fork refers to its source's steps 1..N instead
 * of copying them, and numbers its own from N + 1; so a run's log is its sources' steps up to each
 * cut-off, then its own, in seq order (a fork of a fork walks one link further). A run that continues
 * nothing is the one-link case, and costs one primary-key lookup more than reading its steps alone.
 *
 * `lineage` lists, for run $1, each run of the chain with the range of seqs it contributes:
 * (own_from, upto]. Each link is a lookup by primary key, so the cost grows with the chain's length,
 * never with the number of steps behind a cut-off.
 */

/** The most links followed: a guard against a cycle no write can make. */
const MAX_LINKS = 1000;

export const LINEAGE = `lineage AS (
  SELECT id AS run_id, forked_from_run_id AS source, COALESCE(forked_after_seq, 0) AS own_from, 2147483647 AS upto, 0 AS depth
  FROM durable_agent.run WHERE id = $1
  UNION ALL
  SELECT r.id, r.forked_from_run_id, COALESCE(r.forked_after_seq, 0), LEAST(l.upto, l.own_from), l.depth + 1
  FROM lineage l JOIN durable_agent.run r ON r.id = l.source
  WHERE l.depth < ${MAX_LINKS})`;

/** Every step of run $1's log with `columns` (from run_step `s`), seq at most $2 when `upTo` is set, in order. */
export function lineageSteps(columns: string, upTo = false): string {
  return `WITH RECURSIVE ${LINEAGE}
    SELECT ${columns} FROM lineage l
    JOIN durable_agent.run_step s ON s.run_id = l.run_id AND s.seq > l.own_from AND s.seq <= l.upto${upTo ? ' AND s.seq <= $2' : ''}
    ORDER BY s.seq`;
}

/** How many tool_use blocks a MODEL step's reply holds (null for a TOOL step). */
export const TOOL_USES = `CASE WHEN s.kind = 'MODEL' AND s.response IS NOT NULL
  THEN (SELECT count(*) FROM jsonb_array_elements(s.response::jsonb) e WHERE e->>'type' = 'tool_use')::int END AS tool_uses`;

/**
 * The steps of run $1's log from its latest MODEL step at or before seq $2 up to $2: the turn a fork
 * after $2 would cut. Found backwards along the primary key, so the cost is the turn's, not the log's.
 */
export const TURN_AT = `WITH RECURSIVE ${LINEAGE},
  turn_start AS (
    SELECT m.seq FROM lineage l CROSS JOIN LATERAL (
      SELECT s.seq FROM durable_agent.run_step s
      WHERE s.run_id = l.run_id AND s.seq > l.own_from AND s.seq <= LEAST(l.upto, $2) AND s.kind = 'MODEL'
      ORDER BY s.seq DESC LIMIT 1) m
    ORDER BY m.seq DESC LIMIT 1)
  SELECT s.seq, s.kind, s.status, ${TOOL_USES} FROM lineage l
  JOIN durable_agent.run_step s
    ON s.run_id = l.run_id AND s.seq > GREATEST(l.own_from, (SELECT seq FROM turn_start) - 1) AND s.seq <= LEAST(l.upto, $2)
  ORDER BY s.seq`;

/** A column list of run_step, each column taken from `s` (the lineage has a run_id of its own). */
export const qualified = (columns: string) =>
  columns
    .split(',')
    .map((c) => `s.${c.trim()}`)
    .join(', ');
