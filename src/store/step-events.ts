/**
 * The events a step row carries (migration 0023) rather than run_event: a MODEL step's step.finished
 * (at `finished_event`); a TOOL step's step.started and tool.started (at `started_event` and the id
 * after) and, once done, its tool.finished and step.finished (at `finished_event` and the id after).
 * Their data is what the checkpoints wrote as event rows before, key for key, so a reader cannot
 * tell which kind of row an event came from.
 */
import type { SchemaSql } from '../db/schema.ts';
import { storableValue } from '../core/storable.ts';
import { TOOL_OUTPUT_MAX_CHARS } from '../events/protocol.ts';
import { MARK } from './encryption.ts';

/** An event as read, its data as the JSON text stored (served to SSE readers as is). */
export interface StoredEvent {
  id: number;
  type: string;
  data: string;
}

/** A step row as STEP_EVENT_ROWS selects it (as JSON: see there). */
export interface StepEventRow {
  seq: number;
  kind: 'MODEL' | 'TOOL';
  status: 'STARTED' | 'DONE' | 'ERROR';
  stop_reason: string | null;
  input_tokens: number;
  output_tokens: number;
  cache_read: number;
  cache_creation: number;
  latency_ms: number | null;
  compaction: boolean;
  tool_name: string | null;
  tool_use_id: string | null;
  tool_input: unknown;
  /** A TOOL step's result as stored, cut to one character past what tool.finished keeps (whole when sealed or escaped). */
  output: string | null;
  started_event: number | null;
  finished_event: number | null;
}

/** Does a TOOL row hold a pair of ids from `id` on (a MODEL row: one)? */
const PAIR = `(s.kind = 'TOOL')::int`;

/** The first id after $2 of step row `s`'s events (null: none). */
const FIRST_AFTER = `least(CASE WHEN s.started_event >= $2 THEN greatest(s.started_event, $2 + 1) END,
                     CASE WHEN s.finished_event > $2 - ${PAIR} THEN greatest(s.finished_event, $2 + 1) END)`;

/**
 * Up to $3 step rows of run $1 with an event after id $2, each as one JSON text (`data`; its `id`:
 * its first such event's id), in that order. Each row has at least one event after $2 whose id is at
 * most that of any event of a row left out, so their events begin with the first $3 events. The rows
 * are chosen by their ids alone, and only those chosen are read whole. The scan is of the run's own
 * steps (its primary key): no index on the ids, which a TOOL row's finish would then have to update
 * beside its row (no HOT update). `type` is 'step', which no event type is.
 */
export const STEP_EVENT_ROWS = (schema: SchemaSql) => `
  SELECT k.id, 'step' AS type, row_to_json(d)::text AS data
  FROM (SELECT s.seq, ${FIRST_AFTER} AS id
        FROM ${schema}.run_step s
        WHERE s.run_id = $1 AND (s.started_event >= $2 OR s.finished_event > $2 - ${PAIR})
        ORDER BY id
        LIMIT $3) k
  JOIN ${schema}.run_step s ON s.run_id = $1 AND s.seq = k.seq
  CROSS JOIN LATERAL (
    SELECT s.seq, s.kind, s.status, s.stop_reason, s.input_tokens, s.output_tokens,
           s.cache_read_input_tokens AS cache_read, s.cache_creation_input_tokens AS cache_creation, s.latency_ms,
           jsonb_typeof(s.request -> 'compaction') = 'object' AS compaction,
           s.tool_name, s.tool_use_id, s.tool_input,
           -- What reads as sealed or escaped is opened whole, then cut; the rest is cut here.
           CASE WHEN s.kind <> 'TOOL' OR s.finished_event IS NULL THEN NULL
                WHEN left(s.response, ${MARK.length}) = '${MARK}' THEN s.response
                ELSE left(s.response, ${TOOL_OUTPUT_MAX_CHARS + 1}) END AS output,
           s.started_event, s.finished_event) d`;

/** A tool's stored (redacted) result as tool.finished carries it. */
function toolOutput(stored: string): { output: string; truncated?: boolean } {
  return stored.length > TOOL_OUTPUT_MAX_CHARS ? { output: stored.slice(0, TOOL_OUTPUT_MAX_CHARS), truncated: true } : { output: stored };
}

const event = (id: number, type: string, data: object): StoredEvent => ({ id, type, data: JSON.stringify(storableValue(data)) });

/**
 * The events of step row `r` after id `after`, in order, their payloads opened with `open` (the row
 * keeps a tool's result sealed whole, and tool.started's input sealed as event data is).
 */
export function stepEvents(r: StepEventRow, after: number, open: <T>(stored: T) => T): StoredEvent[] {
  const out: StoredEvent[] = [];
  const add = (id: number, type: string, data: () => object) => {
    if (id > after) out.push(event(id, type, data()));
  };
  if (r.started_event !== null) {
    const id = r.started_event;
    add(id, 'step.started', () => ({ seq: r.seq, kind: 'TOOL' }));
    add(id + 1, 'tool.started', () => ({ seq: r.seq, toolUseId: r.tool_use_id, toolName: r.tool_name, input: open(r.tool_input) }));
  }
  if (r.finished_event === null) return out;
  const id = r.finished_event;
  if (r.kind === 'MODEL') {
    add(id, 'step.finished', () => ({
      seq: r.seq,
      kind: 'MODEL',
      status: r.status,
      stopReason: r.stop_reason,
      inputTokens: r.input_tokens,
      outputTokens: r.output_tokens,
      cacheReadInputTokens: r.cache_read,
      cacheCreationInputTokens: r.cache_creation,
      latencyMs: r.latency_ms,
      ...(r.compaction && { compaction: true }),
    }));
    return out;
  }
  add(id, 'tool.finished', () => ({
    seq: r.seq,
    toolUseId: r.tool_use_id,
    isError: r.status === 'ERROR',
    ...toolOutput(open(r.output ?? '')),
  }));
  add(id + 1, 'step.finished', () => ({ seq: r.seq, kind: 'TOOL', status: r.status, latencyMs: r.latency_ms }));
  return out;
}
