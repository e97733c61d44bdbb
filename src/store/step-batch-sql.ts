/**
 * The step path's writes — a model step's checkpoint (the run's last one too), a tool call's result,
 * a claim's events — as statements over a batch of runs (write-batches.ts sends them). Each does for
 * every run of the batch what a one-run statement would: the fence and the lease renewal (or the run's
 * end), the step row, the next tool call's STARTED row, a model step's streamed events, the
 * announcement; a run whose fence fails writes nothing. The events that repeat a step row are read
 * from it (migration 0023): each row takes their ids, in order after the events written before it.
 * The batch is one JSON parameter, an array of items (one per run, the run at most once).
 *
 * A batch of several runs locks their rows first, in id order, so two batches that each hold several of
 * them never wait for each other in a cycle (the lease renewal never waits: it skips a locked row).
 */
import type { RunId } from '../domain/types.ts';
import { LeaseLostError, StepNotStartedError } from '../domain/errors.ts';
import {
  type EventsClaimed,
  type FencedWrite,
  type Lease,
  type ModelCheckpoint,
  NO_ATTEMPTS,
  type ToolFinish,
  type ToolStart,
} from '../ports/engine-store.ts';
import { named, type NamedStatement, type SchemaSql } from '../db/schema.ts';
import { AFTER, fencedSql, progress, STATUS_IS } from './fenced-sql.ts';

/** The run an item writes and the claim it writes under. */
interface BatchedRun {
  run: string;
  worker: string;
  token: string;
}

/** What every step item has: the run and its claim, the lease, the next tool call. */
interface ItemBase extends BatchedRun {
  lease_ms: number;
  next_seq: number | null;
  next_tool: string | null;
  next_use: string | null;
  /** The next tool call's input as its tool.started event carries it (sealed), read back from its row. */
  next_input: unknown;
}

export interface ModelStepItem extends ItemBase {
  /** The step's streamed events not written yet, [{type, data}] as eventValues makes them. */
  events: readonly object[];
  tokens: number;
  cost: number;
  seq: number;
  request: ModelCheckpoint['request'];
  content: ModelCheckpoint['content'];
  stop_reason: string;
  input_tokens: number;
  output_tokens: number;
  cache_creation: number;
  cache_read: number;
  attempts: number;
  latency_ms: number;
}

export interface ToolResultItem extends ItemBase {
  use_id: string;
  status: ToolFinish['status'];
  response: string;
  latency_ms: number;
  /** What the call changed in the run's workspace (workspace-files.ts `fileRows`); null for none. */
  files: readonly object[] | null;
  /** The call ran again after a crash cut it off: its step counts 2 attempts. */
  rerun: boolean;
}

const BASE_COLUMNS = 'run uuid, worker text, token uuid, lease_ms float8, next_seq int, next_tool text, next_use text, next_input json';

/**
 * A step item: what every one has, then the fields of its kind (`more`), in one literal (see
 * with-fields.ts). `nextInput` is the next tool call's input as stored (null without one).
 */
export function stepItem<M extends object>(
  runId: RunId,
  owner: Lease,
  startNext: ToolStart | undefined,
  nextInput: unknown,
  more: M,
): ItemBase & M {
  return {
    run: runId.toLowerCase(),
    worker: owner.worker,
    token: owner.token,
    lease_ms: owner.leaseMs,
    next_seq: startNext?.seq ?? null,
    next_tool: startNext?.toolName ?? null,
    next_use: startNext?.toolUseId ?? null,
    next_input: nextInput,
    ...more,
  };
}

/** The fence on run `r` for item `i`: the run is still RUNNING under the claim the item names. */
const FENCE_OF = (r: string, i: string) => `${r}.locked_by = ${i}.worker AND ${r}.lease_token = ${i}.token AND ${STATUS_IS('RUNNING', r)}`;

/**
 * The batch's runs that pass the fence; with `many` items, locked in id order. One item locks nothing
 * here (its UPDATE, which checks the fence again on the row it locks, costs what it cost alone). The
 * id list makes them primary-key lookups: joined with the function's rows alone (whose number the
 * planner guesses), they were a scan of every RUNNING run.
 */
const FENCED = (schema: SchemaSql, many: boolean, extra = '') => `fenced AS (
  SELECT r.id, r.tokens_used, r.cancel_requested${extra}
  FROM ${schema}.run r JOIN input i ON r.id = i.run
  WHERE r.id = ANY (ARRAY(SELECT run FROM input)) AND ${FENCE_OF('r', 'i')}${
    many
      ? `
  ORDER BY r.id
  FOR NO KEY UPDATE OF r`
      : ''
  })`;

/** A statement in its two forms: over one item, and over a batch (named `<name>_batch`). */
export interface BatchStatement {
  one: NamedStatement;
  many: NamedStatement;
}

const statement = (schema: SchemaSql, name: string, sql: (many: boolean) => string): BatchStatement => ({
  one: named(schema, name, sql(false)),
  many: named(schema, `${name}_batch`, sql(true)),
});

/** The name and text of `s` over `items`. */
export const forItems = (items: readonly unknown[], s: BatchStatement) => (items.length === 1 ? s.one : s.many);

/**
 * The next tool call's STARTED row, for the runs `owner` kept; skipped when a cancel is pending. Whether
 * a run's row was written is STARTS_NEXT of its input and owner rows (the insert writes it or the
 * statement fails): joining the CTE instead makes the planner, who cannot know its size, compare every
 * pair of rows.
 */
const STARTS_NEXT = (i: string, o: string) => `(${i}.next_seq IS NOT NULL AND NOT ${o}.cancel_requested)`;

/** The row carries its step.started and tool.started (ids after those of the CTE `after`'s row), and announces them. */
const NEXT = (schema: SchemaSql, after: string) => {
  const { NEXT_EVENT_ID, ANNOUNCE } = fencedSql(schema);
  return `next AS (
  INSERT INTO ${schema}.run_step AS t (run_id, seq, kind, status, tool_name, tool_use_id, worker, tool_input, started_event)
  SELECT o.id, i.next_seq, 'TOOL', 'STARTED', i.next_tool, i.next_use, i.worker, i.next_input, ${NEXT_EVENT_ID}
  FROM owner o JOIN input i ON i.run = o.id
  WHERE ${STARTS_NEXT('i', 'o')} AND ${AFTER(after)}
  RETURNING ${ANNOUNCE('t.run_id', 't.started_event + 1')} AS announced)`;
};

/**
 * A model step's streamed events not written yet, in order, for the runs `owner` kept; announced with
 * the step row, whose id comes after theirs. Ids are taken in (run, position) order, so within a run
 * they follow the events.
 */
const STREAMED = (schema: SchemaSql) => `events AS (
  INSERT INTO ${schema}.run_event (run_id, type, data)
  SELECT i.run, e.type, e.data
  FROM owner o JOIN input i ON i.run = o.id,
       ROWS FROM (json_to_recordset(i.events) AS (type text, data json)) WITH ORDINALITY AS e (type, data, n)
  ORDER BY i.run, e.n
  RETURNING run_id)`;

/**
 * Which parts a model step statement has. A CTE costs even when it writes nothing (locks on its table
 * and indexes, executor start and end: ~0.03 ms each), so a batch goes out as the form without the
 * parts none of its items needs: `streamed`, their `events` written first; `next`, the next tool
 * call's STARTED row. `final` is a run's last step (the run ends with it: status, output, error, stop
 * reason; the lease given up), which starts no tool call; otherwise the lease is renewed.
 */
interface ModelStepForm {
  final: boolean;
  streamed: boolean;
  next: boolean;
}

const modelSteps = (schema: SchemaSql, { final, streamed, next }: ModelStepForm) => {
  const { NEXT_EVENT_ID, ANNOUNCE } = fencedSql(schema);
  return (many: boolean) => `WITH input AS (
  SELECT * FROM json_to_recordset($1::json) AS i (${BASE_COLUMNS}, events json, tokens bigint, cost numeric, seq int, request jsonb, content json,
    stop_reason text, input_tokens int, output_tokens int, cache_creation int, cache_read int, attempts int, latency_ms int${
      final
        ? `,
    end_status text, end_output text, end_error text, end_reason text`
        : ''
    })),
${many ? `${FENCED(schema, many)},\n` : ''}owner AS (
  UPDATE ${schema}.run r
  SET ${
    final
      ? 'status = i.end_status, output = i.end_output, error = i.end_error, stop_reason = i.end_reason, finished_at = now(), locked_until = NULL'
      : "locked_until = now() + i.lease_ms * interval '1 millisecond'"
  },
      updated_at = now(), tokens_used = r.tokens_used + i.tokens, cost_usd = r.cost_usd + i.cost
  ${
    // One item locks nothing first (see FENCED): its run is found by id, and fenced, by the UPDATE itself.
    many
      ? 'FROM fenced f JOIN input i ON i.run = f.id\n  WHERE r.id = f.id'
      : 'FROM input i\n  WHERE r.id = ANY (ARRAY(SELECT run FROM input)) AND r.id = i.run'
  } AND ${FENCE_OF('r', 'i')}
  RETURNING r.id, r.tokens_used, r.cancel_requested),${streamed ? `\n${STREAMED(schema)},` : ''}
step AS (
  INSERT INTO ${schema}.run_step AS t (run_id, seq, kind, status, request, response, stop_reason, input_tokens, output_tokens,
                        cache_creation_input_tokens, cache_read_input_tokens, cost_usd, attempts, latency_ms, worker, started_at, finished_at,
                        finished_event)
  SELECT o.id, i.seq, 'MODEL', 'DONE', i.request, i.content::text, i.stop_reason, i.input_tokens, i.output_tokens,
         i.cache_creation, i.cache_read, i.cost, i.attempts, i.latency_ms, i.worker, now() - i.latency_ms * interval '1 millisecond', now(),
         ${NEXT_EVENT_ID}
  FROM owner o JOIN input i ON i.run = o.id${streamed ? `\n  WHERE ${AFTER('events')}` : ''}
  RETURNING ${ANNOUNCE('t.run_id', 't.finished_event')} AS announced)${next ? `,\n${NEXT(schema, 'step')}` : ''}
SELECT o.id, o.tokens_used, o.cancel_requested, ${next ? STARTS_NEXT('i', 'o') : 'false'} AS next_started
FROM owner o${next ? ' JOIN input i ON i.run = o.id' : ''}`;
};

/** The name of a model step statement's form (see ModelStepForm). */
const modelStepName = ({ final, streamed, next }: ModelStepForm) =>
  `durable_agent_checkpoint_model${final ? '_final' : ''}${streamed ? '_streamed' : ''}${next || final ? '' : '_alone'}`;

const FORMS: readonly ModelStepForm[] = [false, true].flatMap((final) =>
  [false, true].flatMap((streamed) => (final ? [false] : [true, false]).map((next) => ({ final, streamed, next }))),
);

/** What a final model step adds to its item: how the run ends (texts made storable and redacted by the caller). */
export interface RunEndFields {
  end_status: string;
  end_output: string | null;
  end_error: string | null;
  end_reason: string | null;
}

export interface ModelStepRow {
  id: string;
  tokens_used: number;
  cancel_requested: boolean;
  next_started: boolean;
}

/** Each item's outcome from the statement's rows: a run with no row lost its lease. */
export function modelStepOutcomes(items: readonly ModelStepItem[], rows: readonly ModelStepRow[]): (FencedWrite | Error)[] {
  const byRun = new Map(rows.map((r) => [r.id, r]));
  return items.map((item) => {
    const r = byRun.get(item.run);
    if (!r) return new LeaseLostError(item.run as RunId, item.worker);
    return progress(r, { nextStarted: r.next_started });
  });
}

/**
 * Every part hangs on the tool call's STARTED row: without it the run writes nothing at all (no lease
 * renewal, no next STARTED row, no workspace changes), and its row says whether the lease or the step
 * was missing. A call's workspace changes are recorded with its result: the files and the journal
 * never disagree. The row, done, carries its tool.finished and step.finished (migration 0023).
 */
const toolResults = (schema: SchemaSql) => {
  const { NEXT_EVENT_ID, ANNOUNCE } = fencedSql(schema);
  return (many: boolean) => `WITH input AS (
  SELECT * FROM json_to_recordset($1::json) AS i (${BASE_COLUMNS}, use_id text, status text, response text, latency_ms int, files json, rerun boolean)),
${FENCED(
  schema,
  many,
  `,
         EXISTS (SELECT 1 FROM ${schema}.run_step s
                 WHERE s.run_id = r.id AND s.kind = 'TOOL' AND s.tool_use_id = i.use_id AND s.status = 'STARTED') AS started`,
)},
owner AS (
  UPDATE ${schema}.run r SET locked_until = now() + i.lease_ms * interval '1 millisecond', updated_at = now()
  FROM fenced f JOIN input i ON i.run = f.id
  WHERE r.id = f.id AND f.started AND ${FENCE_OF('r', 'i')}
  RETURNING r.id, r.tokens_used, r.cancel_requested),
done AS (
  UPDATE ${schema}.run_step s SET status = i.status, response = i.response, latency_ms = i.latency_ms, worker = i.worker, finished_at = now(),
         attempts = CASE WHEN i.rerun THEN 2 ELSE s.attempts END, finished_event = ${NEXT_EVENT_ID}
  FROM owner o JOIN input i ON i.run = o.id
  WHERE s.run_id = o.id AND s.kind = 'TOOL' AND s.tool_use_id = i.use_id AND s.status = 'STARTED'
  RETURNING s.run_id AS id, s.seq, o.cancel_requested, ${ANNOUNCE('s.run_id', 's.finished_event + 1')} AS announced),
files AS (
  INSERT INTO ${schema}.run_file (run_id, seq, path, kind, mode, size, sha256, target)
  SELECT d.id, d.seq, f.path, f.kind, f.mode, f.size, f.sha256, f.target
  FROM done d JOIN input i ON i.run = d.id,
       json_to_recordset(i.files) AS f (path text, kind text, mode int, size bigint, sha256 text, target text)
  WHERE i.files IS NOT NULL),
${NEXT(schema, 'done')}
SELECT i.run AS id, o.tokens_used, o.cancel_requested,
       -- A started step whose run the UPDATE left alone failed the fence's re-check on the row as it
       -- stands (a takeover committed meanwhile; one item locks nothing first): the lease is lost.
       (o.id IS NOT NULL OR (f.id IS NOT NULL AND NOT f.started)) AS owned, d.id IS NOT NULL AS updated,
       d.id IS NOT NULL AND ${STARTS_NEXT('i', 'd')} AS next_started,
       CASE WHEN d.id IS NULL
            THEN (SELECT s.status FROM ${schema}.run_step s WHERE s.run_id = i.run AND s.kind = 'TOOL' AND s.tool_use_id = i.use_id) END AS step_status
FROM input i LEFT JOIN fenced f ON f.id = i.run LEFT JOIN owner o ON o.id = i.run LEFT JOIN done d ON d.id = i.run`;
};

export interface ToolResultRow {
  id: string;
  tokens_used: number | null;
  cancel_requested: boolean | null;
  owned: boolean;
  updated: boolean;
  next_started: boolean;
  step_status: string | null;
}

export function toolResultOutcomes(items: readonly ToolResultItem[], rows: readonly ToolResultRow[]): (FencedWrite | Error)[] {
  const byRun = new Map(rows.map((r) => [r.id, r]));
  return items.map((item) => {
    const r = byRun.get(item.run);
    if (!r?.owned) return new LeaseLostError(item.run as RunId, item.worker);
    if (!r.updated) return new StepNotStartedError(item.run as RunId, item.use_id, r.step_status);
    return progress({ tokens_used: r.tokens_used!, cancel_requested: r.cancel_requested! }, { nextStarted: r.next_started });
  });
}

export interface ClaimedItem extends BatchedRun {
  attempt: number;
}

/**
 * A claim's first write, per run: run.started, attempt.abandoned for whatever a previous owner left
 * streaming, and the highest attempt each model step has used (rows of run_event_claimed, migration
 * 0014). Always the locked form, even for one run: the function writes events, whose ids must be taken
 * while the run's row is held.
 */
const claims = (schema: SchemaSql) => () => `WITH input AS (
  SELECT * FROM json_to_recordset($1::json) AS i (run uuid, worker text, token uuid, attempt int)),
${FENCED(schema, true)}
SELECT f.id, ${fencedSql(schema).FOLLOWED('f.id')} AS followed, c.seq, c.attempt
FROM fenced f JOIN input i ON i.run = f.id LEFT JOIN LATERAL ${schema}.run_event_claimed(f.id, i.worker, i.attempt) c ON true`;

export type ClaimedRow = { id: string; followed: boolean; seq: number | null; attempt: number | null };

export function claimedOutcomes(items: readonly ClaimedItem[], rows: readonly ClaimedRow[]): (EventsClaimed | Error)[] {
  const byRun = new Map<string, ClaimedRow[]>();
  for (const r of rows) {
    const mine = byRun.get(r.id);
    if (mine) mine.push(r);
    else byRun.set(r.id, [r]);
  }
  return items.map((item) => {
    const mine = byRun.get(item.run);
    if (!mine) return new LeaseLostError(item.run as RunId, item.worker);
    const streamed = mine.filter((r) => r.seq !== null);
    return {
      attempts: streamed.length ? new Map(streamed.map((r) => [r.seq!, r.attempt ?? 0])) : NO_ATTEMPTS,
      followed: mine[0]!.followed,
    };
  });
}

/** Every form of the model step statement, by name (see ModelStepForm). */
const modelStepForms = (schema: SchemaSql): ReadonlyMap<string, BatchStatement> =>
  new Map(FORMS.map((f) => [modelStepName(f), statement(schema, modelStepName(f), modelSteps(schema, f))]));

/** The statement of a batch of model steps, final or not, in the form its items need. */
const modelStepsOf =
  (forms: ReadonlyMap<string, BatchStatement>) =>
  (items: readonly ModelStepItem[], final: boolean): NamedStatement => {
    const form = { final, streamed: items.some((i) => i.events.length > 0), next: !final && items.some((i) => i.next_seq !== null) };
    return forItems(items, forms.get(modelStepName(form))!);
  };

/** The step path's statements, their tables in `schema`. */
export const stepBatchSql = (schema: SchemaSql) => {
  const MODEL_STEP_FORMS = modelStepForms(schema);
  return {
    MODEL_STEP_FORMS,
    /** A batch of model steps, in the form its items need. */
    MODEL_STEPS: modelStepsOf(MODEL_STEP_FORMS),
    TOOL_RESULTS: statement(schema, 'durable_agent_finish_tool', toolResults(schema)),
    CLAIMS: statement(schema, 'durable_agent_events_claimed', claims(schema)),
  };
};
