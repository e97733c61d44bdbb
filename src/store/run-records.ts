/**
 * What people and the API ask of runs: create one, read it, its timeline and a fork's turn
 * boundaries, cancel it, decide about a waiting tool call. The engine's side of the same tables (claim,
 * checkpoints, leases) is RunStore; both seal and open payloads the same way (encryption.ts).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import {
  type ContentBlock,
  type Decision,
  DEFAULT_TENANT,
  DEMO_AGENT,
  type ForkPoint,
  type Run,
  type RunId,
  type RunStatus,
  type Step,
  type StepSummary,
} from '../domain/types.ts';
import { ConflictError, InputError, NotFoundError } from '../domain/errors.ts';
import type { TurnRow } from '../core/fork-points.ts';
import { noRedaction, type Redact, redactValue, textRedactor } from '../core/redact.ts';
import { type Decided, decisionsSql, recordDecision } from './decisions.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { lineageSql, qualified, TOOL_USES } from './lineage-sql.ts';
import type { EarlierRun } from '../core/chain-replay.ts';
import { RUN_COLUMNS, type RunRow, STEP_COLUMNS, STEP_SUMMARY_COLUMNS, type StepRow, toRun, toStep, toStepSummary } from './rows.ts';
import { named, type NamedStatement, type NamedStatements, schemaSql, type SchemaOption, type SchemaSql } from '../db/schema.ts';
import { mapInputText } from '../core/content-blocks.ts';
import { withFields } from '../util/with-fields.ts';
import type { ModelOptions } from '../domain/types.ts';

export interface NewRun {
  /** The task: text, or content blocks (text, images, documents) as the Messages API takes them. */
  input: string | readonly ContentBlock[];
  model: string;
  /** How its calls ask the model to answer: its agent's options with its own over them; null or absent: none. */
  modelOptions?: ModelOptions | null;
  tokenBudget: number;
  timeoutSeconds: number;
  maxSteps: number;
  /** USD the run may spend on model calls; null or absent: no money limit. */
  costBudgetUsd?: number | null;
  metadata?: Record<string, unknown>;
  /** Whose run it is; "default" when absent. */
  tenant?: string;
  /** Continue this run's conversation after the step `afterSeq` (a fork); its turn boundary is checked by the caller. */
  forkedFrom?: ForkPoint;
  /** The agent that drives it; the demo agent when absent. */
  agent?: string;
  /** The version label of that agent's definition. */
  agentVersion?: string | null;
  /**
   * The finished run whose conversation it continues. Checked by the caller (previous-run.ts); the
   * foreign key still refuses one deleted meanwhile (an InputError).
   */
  previousRunId?: RunId | null;
  /** Not claimed before this time (a delayed start); its deadline counts from then. */
  startAt?: Date;
  /** A second create with this key (same tenant, within 24 hours) answers the first run. */
  idempotencyKey?: string;
  /** SHA-256 of the canonical request: the same key with another request is a conflict. */
  requestHash?: string;
  /** The schedule that makes it, and the slot it is made for (null: a trigger, outside the slots). */
  schedule?: { id: string; name: string; scheduledFor: Date | null };
}

/** The run of a schedule's slot. */
export type SlotRun = NewRun & { schedule: { id: string; name: string; scheduledFor: Date } };

const FOREIGN_KEY_VIOLATION = '23503';

type TurnRowSql = { seq: number; kind: TurnRow['kind']; status: TurnRow['status']; tool_uses: number | null };
const toTurnRow = (r: TurnRowSql): TurnRow => ({ seq: r.seq, kind: r.kind, status: r.status, toolUses: r.tool_uses });

/** Where the stores' tables are, and how they treat what they write: redaction, encryption. */
export interface RunStoreOptions extends SchemaOption {
  /**
   * Applied to what comes into a run from outside the model before it is written: its input and
   * metadata, tool results, decisions, error texts (observability/redact.ts); never to model output,
   * which goes back to the model as it came. The driver folds the result it got, so the model still
   * sees it unredacted in the attempt that produced it; a resumed run replays what was stored.
   */
  redact?: Redact;
  /** Seals payloads as they are written and opens them as they are read (encryption.ts); none by default. */
  sealer?: Sealer;
  /**
   * Where the step path's batched writes and the claim go (write-batches.ts): a few connections opened
   * with `genericPlans` (pool.ts), each planning a statement once; the store's own pool when absent.
   */
  batches?: NamedStatements;
}

/** How a store treats what it writes: texts redacted (JSON texts keep their shape), strings redacted, payloads sealed. */
export function writePolicy(opts: RunStoreOptions): { redact: Redact; redactString: Redact; sealer: Sealer } {
  const redactString = opts.redact ?? noRedaction;
  return { redact: textRedactor(redactString), redactString, sealer: opts.sealer ?? NO_ENCRYPTION };
}

/** The statements of RunRecords, their tables in `schema`. */
function runRecordsSql(schema: SchemaSql) {
  const { CONVERSATION_RUNS, conversationSteps, lineageSteps, TURN_AT } = lineageSql(schema);
  const INSERT_RUN = `INSERT INTO ${schema}.run (id, input, model, token_budget, max_steps, run_at, deadline_at, metadata, tenant,
                                         idempotency_key, request_hash, agent, agent_version, previous_run_id,
                                         cost_budget_usd, forked_from_run_id, forked_after_seq, schedule_id, schedule_name, scheduled_for,
                                         input_blocks, model_options)
         VALUES ($1, $2, $3, $4, $5, greatest(coalesce($9::timestamptz, now()), now()),
                 greatest(coalesce($9::timestamptz, now()), now()) + $6 * interval '1 second', $7, $8, $10, $11, $12, $13, $14,
                 $15, $16, $17, $18, $19, $20, $21, $22)`;
  return {
    decisions: decisionsSql(schema),
    CREATE: named(
      schema,
      'durable_agent_create',
      `${INSERT_RUN}
         ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${RUN_COLUMNS}`,
    ),
    /**
     * The runs of schedules' slots, one statement for a batch ($1, a JSON array): the slot's unique key
     * (tenant, schedule name, time) decides which are made, not this process; a slot that has a run
     * already makes none. In the batch's order, so ids are taken slot by slot.
     */
    CREATE_FOR_SLOTS: `INSERT INTO ${schema}.run (id, input, model, token_budget, max_steps, run_at, deadline_at, metadata, tenant,
                                         agent, agent_version, cost_budget_usd, schedule_id, schedule_name, scheduled_for,
                                         input_blocks, model_options)
         SELECT i.id, i.input, i.model, i.token_budget, i.max_steps, greatest(coalesce(i.start_at, now()), now()),
                greatest(coalesce(i.start_at, now()), now()) + i.timeout_seconds * interval '1 second', i.metadata, i.tenant,
                i.agent, i.agent_version, i.cost_budget_usd, i.schedule_id, i.schedule_name, i.scheduled_for,
                i.input_blocks, i.model_options
         FROM ROWS FROM (json_to_recordset($1::json) AS (id uuid, input text, model text, token_budget int, max_steps int,
              timeout_seconds float8, metadata jsonb, tenant text, start_at timestamptz, agent text, agent_version text,
              cost_budget_usd numeric, schedule_id uuid, schedule_name text, scheduled_for timestamptz,
              input_blocks boolean, model_options jsonb)) WITH ORDINALITY
              AS i (id, input, model, token_budget, max_steps, timeout_seconds, metadata, tenant, start_at, agent, agent_version,
                    cost_budget_usd, schedule_id, schedule_name, scheduled_for, input_blocks, model_options, n)
         ORDER BY i.n
         ON CONFLICT (tenant, schedule_name, scheduled_for) WHERE scheduled_for IS NOT NULL DO NOTHING
         RETURNING ${RUN_COLUMNS}`,
    BY_KEY: `SELECT ${RUN_COLUMNS}, request_hash, created_at < now() - interval '24 hours' AS expired
         FROM ${schema}.run WHERE tenant = $1 AND idempotency_key = $2`,
    FREE_KEY: `UPDATE ${schema}.run SET idempotency_key = NULL WHERE id = $1 AND created_at < now() - interval '24 hours'`,
    GET: `SELECT ${RUN_COLUMNS} FROM ${schema}.run WHERE id = $1`,
    TIMELINE: lineageSteps(qualified(STEP_SUMMARY_COLUMNS)),
    TURN_AT,
    TURN_ROWS: lineageSteps(`s.seq, s.kind, s.status, ${TOOL_USES}`),
    LATEST_PROVIDER: `SELECT request->>'provider' AS provider FROM ${schema}.run_step
        WHERE run_id = $1 AND kind = 'MODEL' AND request ? 'provider' ORDER BY seq DESC LIMIT 1`,
    STEPS_THROUGH: lineageSteps(qualified(STEP_COLUMNS), true),
    CANCEL: `UPDATE ${schema}.run SET cancel_requested = true,
              status = CASE WHEN status IN ('QUEUED', 'WAITING') THEN 'CANCELLED' ELSE status END,
              finished_at = CASE WHEN status IN ('QUEUED', 'WAITING') THEN now() ELSE finished_at END,
              error = CASE WHEN status = 'WAITING' THEN 'cancelled while waiting (' || coalesce(waiting->>'kind', 'wait') || ')'
                           WHEN status <> 'QUEUED' THEN error WHEN attempts = 0 AND provider_requeues = 0 THEN 'cancelled before it started'
                           ELSE 'cancelled while waiting in the queue' END,
              updated_at = now()
       WHERE id = $1 AND status IN ('QUEUED', 'RUNNING', 'WAITING') AND NOT cancel_requested
       RETURNING ${RUN_COLUMNS}`,
    CONVERSATION_RUNS: named(schema, 'durable_agent_conversation_runs', CONVERSATION_RUNS),
    CONVERSATION_STEPS: named(schema, 'durable_agent_conversation_steps', conversationSteps(qualified(STEP_COLUMNS))),
    BLOB: `SELECT body FROM ${schema}.content_blob WHERE digest = $1`,
  };
}

export class RunRecords {
  /** For stored texts, which may be JSON: their string values are redacted, their shape kept. */
  private readonly redact: Redact;
  /** The patterns on one string value. */
  private readonly redactString: Redact;
  private readonly sealer: Sealer;
  private readonly sql: ReturnType<typeof runRecordsSql>;

  constructor(
    private readonly db: pg.Pool,
    opts: RunStoreOptions = {},
  ) {
    ({ redact: this.redact, redactString: this.redactString, sealer: this.sealer } = writePolicy(opts));
    this.sql = runRecordsSql(schemaSql(opts.schema));
  }

  /** A named statement: each connection parses and plans it once. */
  private prepared<R extends pg.QueryResultRow>(statement: NamedStatement, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.db.query<R>(withFields(statement, { values }));
  }

  /** The parameters of INSERT_RUN for `r`: its texts redacted and sealed as every run's are. */
  private insertParams(r: NewRun, tenant: string): unknown[] {
    return [
      randomUUID(),
      this.sealer.text(this.storedInput(r.input)),
      r.model,
      r.tokenBudget,
      r.maxSteps,
      r.timeoutSeconds,
      JSON.stringify(this.sealer.json(redactValue(r.metadata ?? {}, this.redactString))),
      tenant,
      r.startAt ?? null,
      r.idempotencyKey ?? null,
      r.idempotencyKey ? (r.requestHash ?? null) : null,
      r.agent ?? DEMO_AGENT,
      r.agentVersion ?? null,
      r.previousRunId ?? null,
      r.costBudgetUsd ?? null,
      r.forkedFrom?.runId ?? null,
      r.forkedFrom?.afterSeq ?? null,
      r.schedule?.id ?? null,
      r.schedule?.name ?? null,
      r.schedule?.scheduledFor ?? null,
      typeof r.input !== 'string',
      r.modelOptions ? JSON.stringify(r.modelOptions) : null,
    ];
  }

  /**
   * An input as its column holds it: text redacted, or content blocks as their JSON array with the
   * texts a person wrote redacted (and nothing else: an image's base64 is not text to match).
   */
  private storedInput(input: string | readonly ContentBlock[]): string {
    if (typeof input === 'string') return this.redact(input);
    return JSON.stringify(mapInputText(input, this.redactString));
  }

  /**
   * Queues the runs of schedules' slots (each with `schedule.scheduledFor`), in one statement, except
   * for the slots that have a run already, whoever made it. Returns the runs made.
   */
  async createForSlots(runs: readonly SlotRun[]): Promise<Run[]> {
    if (runs.length === 0) return [];
    const items = runs.map((r) => ({
      id: randomUUID(),
      input: this.sealer.text(this.storedInput(r.input)),
      input_blocks: typeof r.input !== 'string',
      model_options: r.modelOptions ?? null,
      model: r.model,
      token_budget: r.tokenBudget,
      max_steps: r.maxSteps,
      timeout_seconds: r.timeoutSeconds,
      metadata: this.sealer.json(redactValue(r.metadata ?? {}, this.redactString)),
      tenant: r.tenant ?? DEFAULT_TENANT,
      start_at: r.startAt ?? null,
      agent: r.agent ?? DEMO_AGENT,
      agent_version: r.agentVersion ?? null,
      cost_budget_usd: r.costBudgetUsd ?? null,
      schedule_id: r.schedule.id,
      schedule_name: r.schedule.name,
      scheduled_for: r.schedule.scheduledFor,
    }));
    const { rows } = await this.db.query<RunRow>(this.sql.CREATE_FOR_SLOTS, [JSON.stringify(items)]);
    return rows.map((row) => toRun(row, this.sealer));
  }

  async create(r: NewRun): Promise<Run> {
    return (await this.createOnce(r)).run;
  }

  /**
   * Queues a run. With an idempotency key, a run created under the same key (and tenant) in the last
   * 24 hours is answered instead (`created` false) when its request was the same, and a different
   * request is a ConflictError. The unique index decides between concurrent creates, not a read first.
   */
  async createOnce(r: NewRun): Promise<{ run: Run; created: boolean }> {
    const tenant = r.tenant ?? DEFAULT_TENANT;
    for (let tries = 1; ; tries++) {
      const { rows } = await this.prepared<RunRow>(this.sql.CREATE, this.insertParams(r, tenant)).catch((e: unknown) => {
        // The run it continues was deleted between the caller's check and this insert.
        if (r.previousRunId && (e as { code?: string }).code === FOREIGN_KEY_VIOLATION) {
          throw new InputError(`invalid previousRunId: no run ${r.previousRunId}`, [
            { path: 'previousRunId', message: `no run ${r.previousRunId}` },
          ]);
        }
        throw e;
      });
      if (rows[0]) return { run: toRun(rows[0], this.sealer), created: true };
      const { rows: found } = await this.db.query<RunRow & { request_hash: string | null; expired: boolean }>(this.sql.BY_KEY, [
        tenant,
        r.idempotencyKey,
      ]);
      const existing = found[0];
      if (existing && !existing.expired) {
        if (existing.request_hash !== (r.requestHash ?? null)) {
          throw new ConflictError(
            `Idempotency-Key ${JSON.stringify(r.idempotencyKey)} was used for a different request (run ${existing.id})`,
          );
        }
        return { run: toRun(existing, this.sealer), created: false };
      }
      if (tries >= 3) throw new ConflictError(`Idempotency-Key ${JSON.stringify(r.idempotencyKey)} is being reused right now; try again`);
      // Older than 24 hours: the key is free again; the old run keeps everything but the key.
      if (existing) {
        await this.db.query(this.sql.FREE_KEY, [existing.id]);
      }
    }
  }

  /** Records a person's decision about a waiting tool call (see decisions.ts). */
  async decide(runId: RunId, toolUseId: string, decision: Decision): Promise<Decided> {
    return recordDecision(this.db, this.sql.decisions, {
      runId,
      toolUseId,
      decision,
      stored: (text) => this.sealer.text(this.redact(text)),
    });
  }

  async get(id: RunId): Promise<Run | null> {
    const { rows } = await this.db.query<RunRow>(this.sql.GET, [id]);
    return rows[0] ? toRun(rows[0], this.sealer) : null;
  }

  /** The run as it is now; throws NotFoundError when there is none. */
  async state(id: RunId): Promise<Run> {
    const run = await this.get(id);
    if (!run) throw new NotFoundError(`run ${id} not found`);
    return run;
  }

  /** The steps without their request and response bodies, which can be large: what a timeline shows. */
  async timeline(runId: RunId): Promise<StepSummary[]> {
    const { rows } = await this.db.query<StepRow>(this.sql.TIMELINE, [runId]);
    return rows.map(toStepSummary);
  }

  /**
   * The steps of the run's log from its latest MODEL step at or before `seq` through `seq`, with the
   * tool calls each model step asked for: what decides whether a fork can start after `seq`.
   */
  async turnAt(runId: RunId, seq: number): Promise<TurnRow[]> {
    const { rows } = await this.db.query<TurnRowSql>(this.sql.TURN_AT, [runId, seq]);
    return rows.map(toTurnRow);
  }

  /** The whole log as turn rows: every seq a fork could start after. */
  async turnRows(runId: RunId): Promise<TurnRow[]> {
    const { rows } = await this.db.query<TurnRowSql>(this.sql.TURN_ROWS, [runId]);
    return rows.map(toTurnRow);
  }

  /**
   * The provider of the run's latest model step ("anthropic", "openai" …); null before its first
   * model call (or when its model steps were recorded before steps kept their provider).
   */
  async latestProvider(runId: RunId): Promise<string | null> {
    const { rows } = await this.db.query<{ provider: string }>(this.sql.LATEST_PROVIDER, [runId]);
    return rows[0]?.provider ?? null;
  }

  /** Steps 1..upTo (inclusive), enough to rebuild the request of step upTo. */
  async stepsThrough(runId: RunId, upTo: number): Promise<Step[]> {
    const { rows } = await this.db.query<StepRow>(this.sql.STEPS_THROUGH, [runId, upTo]);
    return rows.map((r) => toStep(r, this.sealer));
  }

  /**
   * Cooperative cancel: a queued or waiting run ends at once, a running one stops at its next guard.
   * Cancelling a finished run, or a running run a second time, is a conflict.
   */
  async cancel(id: RunId): Promise<Run> {
    const { rows } = await this.db.query<RunRow>(this.sql.CANCEL, [id]);
    if (rows[0]) return toRun(rows[0], this.sealer);
    const run = await this.state(id);
    throw new ConflictError(
      run.status === 'RUNNING' ? `run ${id} is already being cancelled` : `run ${id} has already finished (${run.status})`,
    );
  }

  async conversationBefore(runId: RunId): Promise<EarlierRun[]> {
    // The parts' head runs, then all their steps in one read: two round trips, however long the chain.
    const { rows: runs } = await this.prepared<{ part: number; id: string; input: string; input_blocks: boolean; status: RunStatus }>(
      this.sql.CONVERSATION_RUNS,
      [runId],
    );
    if (runs.length === 0) return [];
    const { rows: steps } = await this.prepared<StepRow & { part: number }>(this.sql.CONVERSATION_STEPS, [runId]);
    const byPart = new Map<number, Step[]>(runs.map((r) => [r.part, []]));
    for (const row of steps) byPart.get(row.part)!.push(toStep(row, this.sealer));
    // Oldest first: the highest part is the start of the conversation.
    return runs
      .sort((a, b) => b.part - a.part)
      .map((r) => {
        const input = this.sealer.openText(r.input);
        return {
          id: r.id as RunId,
          input: r.input_blocks ? (JSON.parse(input) as ContentBlock[]) : input,
          status: r.status,
          steps: byPart.get(r.part)!,
        };
      });
  }

  async blob(digest: string): Promise<string | null> {
    const { rows } = await this.db.query<{ body: string }>(this.sql.BLOB, [digest]);
    return this.sealer.openText(rows[0]?.body ?? null);
  }
}
