/**
 * The engine's store (ports/engine-store.ts): claims, checkpoints, waits, leases. Engine writes are fenced:
 * each is ONE statement (a data-modifying CTE) that checks the lease and writes, so a checkpoint costs
 * one round trip and one commit, and a worker that lost its lease changes nothing. The step path's
 * frequent writes share that statement with other runs' writes made at the same time (write-batches.ts).
 */
import { mapResultText } from '../core/content-blocks.ts';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import {
  budgetTokens,
  type DecisionRecord,
  DEMO_AGENT,
  type Run,
  type RunId,
  type RunProgress,
  type RunStatus,
  type Step,
} from '../domain/types.ts';
import { EncryptionError, LeaseLostError } from '../domain/errors.ts';
import type { EarlierRun } from '../core/chain-replay.ts';
import { claimedRun } from '../ports/claimed-run.ts';
import { claimParams, claimSql } from './claim-sql.ts';
import { leaseRenewalSql, renewLeases } from './lease-renewal.ts';
import type {
  AfterCheckpoint,
  ClaimedRun,
  ClaimLiveness,
  EngineStore,
  EventsClaimed,
  FencedWrite,
  HeldLease,
  Lease,
  LeaseOwner,
  ModelCheckpoint,
  RecordedWrite,
  Release,
  Released,
  RenewedLease,
  RunEnd,
  ToolFinish,
  ToolStart,
  WaitStart,
  Waited,
  WriteProbe,
} from '../ports/engine-store.ts';
import { type RunRow, STEP_COLUMNS, type StepRow, toRun, toStep } from './rows.ts';
import { endTexts, FENCE, fencedSql, progress, type ProgressRow } from './fenced-sql.ts';
import { storableCost, storableText, storableUsage, storableValue } from '../core/storable.ts';
import type { Sealer } from './encryption.ts';
import { sealBlocks, sealEventData } from './sealed-columns.ts';
import type { NewEvent } from '../ports/new-event.ts';
import { lineageSql, qualified } from './lineage-sql.ts';
import { ANNOUNCED, eventParams, eventValues, RunEvents, runEventsSql } from './run-events.ts';
import type { Redact } from '../core/redact.ts';
import {
  forItems,
  stepBatchSql,
  stepItem,
  type RunEndFields,
  type ModelStepItem,
  modelStepOutcomes,
  type ModelStepRow,
  type ToolResultItem,
  toolResultOutcomes,
  type ToolResultRow,
} from './step-batch-sql.ts';
import { named, type NamedStatement, type NamedStatements, schemaSql, type SchemaSql } from '../db/schema.ts';
import { WriteBatches } from '../util/write-batches.ts';
import { fileRows } from './workspace-files.ts';
import { RunRecords, type RunStoreOptions, writePolicy } from './run-records.ts';

export type { RunStoreOptions } from './run-records.ts';
import { consumeDecision, nextDueInMs, readDecisions, startWaiting, WAIT_SET, waitingSql, waitParams } from './waiting-sql.ts';
import { withFields } from '../util/with-fields.ts';
import { Interned } from '../core/interned.ts';
import { promised } from '../util/promised.ts';

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The statements of RunStore, their tables in `schema`. */
function runStoreSql(schema: SchemaSql) {
  const { OWNED, MODEL_STEP, NEXT_EVENT_ID, ANNOUNCE } = fencedSql(schema);
  const { EVENTS } = runEventsSql(schema);
  const waiting = waitingSql(schema);
  const { DECISION_ROWS } = waiting;
  return {
    waiting,
    batches: stepBatchSql(schema),
    CLAIM: claimSql(schema).claim,
    RENEW_LEASES: leaseRenewalSql(schema).RENEW_LEASES,
    STEPS: named(schema, 'durable_agent_steps', lineageSql(schema).lineageSteps(qualified(STEP_COLUMNS))),
    CHECKPOINT_MODEL_WAITING: named(
      schema,
      'durable_agent_checkpoint_model_waiting',
      `WITH owner AS (
         UPDATE ${schema}.run SET tokens_used = tokens_used + $4, cost_usd = cost_usd + $5, ${WAIT_SET(3, 16)}
         WHERE ${FENCE(18)}
         RETURNING id, tokens_used, cancel_requested, status),
       ${EVENTS(19, 'owner')},
       ${MODEL_STEP('events')},
       ${DECISION_ROWS(17)}
       SELECT tokens_used, cancel_requested, status, ${ANNOUNCED} FROM owner`,
    ),
    START_TOOL: named(
      schema,
      'durable_agent_start_tool',
      `WITH ${OWNED(7)},
       ins AS (
         INSERT INTO ${schema}.run_step AS t (run_id, seq, kind, status, tool_name, tool_use_id, worker, tool_input, started_event)
         SELECT id, $4, 'TOOL', 'STARTED', $5, $6, $2, $8::json, ${NEXT_EVENT_ID} FROM owner
         ON CONFLICT (run_id, tool_use_id) WHERE kind = 'TOOL' DO NOTHING
         RETURNING t.seq, ${ANNOUNCE('t.run_id', 't.started_event + 1')} AS announced)
       SELECT tokens_used, cancel_requested, (SELECT seq FROM ins) AS inserted,
              (SELECT seq FROM ${schema}.run_step WHERE run_id = $1 AND kind = 'TOOL' AND tool_use_id = $6) AS existing
       FROM owner`,
    ),
    FINISH: named(
      schema,
      'durable_agent_finish',
      `UPDATE ${schema}.run SET status = $3, output = $4, error = $5, stop_reason = $6, finished_at = now(), updated_at = now(),
              locked_until = NULL, tokens_used = tokens_used + $8, cost_usd = cost_usd + $9
       WHERE ${FENCE(7)}`,
    ),
    RECORDED_WRITE: `SELECT r.status, r.tokens_used, r.cancel_requested, (r.locked_by = $2 AND r.lease_token = $3::uuid) AS ours,
              EXISTS (SELECT 1 FROM ${schema}.run_step WHERE run_id = r.id AND seq = $4 AND kind = 'MODEL') AS model_step,
              EXISTS (SELECT 1 FROM ${schema}.run_step WHERE run_id = r.id AND kind = 'TOOL' AND tool_use_id = $5 AND status <> 'STARTED') AS tool_finished,
              EXISTS (SELECT 1 FROM ${schema}.run_step WHERE run_id = r.id AND kind = 'TOOL' AND tool_use_id = $6 AND seq = $7) AS next_started
       FROM ${schema}.run r WHERE r.id = $1`,
    RELEASE: named(
      schema,
      'durable_agent_release',
      `UPDATE ${schema}.run SET locked_by = NULL, locked_until = NULL, lease_token = NULL, updated_at = now(),
              status = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'QUEUED' END,
              finished_at = CASE WHEN cancel_requested THEN now() END,
              attempt_given_back = NOT ($4 OR cancel_requested),
              provider_requeues = provider_requeues + CASE WHEN $5 THEN 1 ELSE 0 END,
              run_at = CASE WHEN $6::float8 <= 0 THEN run_at
                            WHEN $6::float8 / 1000 >= extract(epoch FROM deadline_at - now()) THEN greatest(deadline_at, now())
                            ELSE now() + least($6::float8, 1e12) * interval '1 millisecond' END,
              error = CASE WHEN cancel_requested THEN 'cancelled on request' END,
              last_error = coalesce($7, last_error),
              last_error_at = CASE WHEN $7::text IS NULL THEN last_error_at ELSE now() END,
              last_error_attempt = CASE WHEN $7::text IS NULL THEN last_error_attempt ELSE attempts END,
              tokens_used = tokens_used + $8, cost_usd = cost_usd + $9
       WHERE ${FENCE(3)}
       RETURNING status, tokens_used, run_at`,
    ),
    FORGIVE_LAPSED_ATTEMPT: named(
      schema,
      'durable_agent_forgive_lapsed_attempt',
      `UPDATE ${schema}.run SET attempts = greatest(attempts - 1, 0), lapsed_lease_token = NULL, updated_at = now()
       WHERE id = $1 AND lapsed_lease_token = $2::uuid`,
    ),
    PUT_BLOB: `INSERT INTO ${schema}.content_blob (digest, body) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING`,
  };
}

export class RunStore implements EngineStore {
  /** For stored texts, which may be JSON: their string values are redacted, their shape kept. */
  private readonly redact: Redact;
  private readonly events: RunEvents;
  private readonly sealer: Sealer;
  /** The reads the engine shares with the API: a conversation's earlier runs, a shared text. */
  private readonly records: RunRecords;
  private readonly sql: ReturnType<typeof runStoreSql>;

  /** The step path's writes, sent over batches of runs (write-batches.ts). */
  private readonly modelSteps: WriteBatches<ModelStepItem, FencedWrite>;
  private readonly finalModelSteps: WriteBatches<ModelStepItem & RunEndFields, FencedWrite>;
  private readonly toolResults: WriteBatches<ToolResultItem, FencedWrite>;
  /** Where the batched writes and the claim go (RunStoreOptions' `batches`): statements planned once, whatever their values. */
  private readonly batches: NamedStatements;
  /** The names claimed runs repeat, one copy each: the runs are held for their whole attempt. */
  private readonly interned = new Interned();

  constructor(
    private readonly db: pg.Pool,
    opts: RunStoreOptions = {},
  ) {
    ({ redact: this.redact, sealer: this.sealer } = writePolicy(opts));
    this.sql = runStoreSql(schemaSql(opts.schema));
    const { MODEL_STEPS, TOOL_RESULTS } = this.sql.batches;
    const batches: NamedStatements = (this.batches = opts.batches ?? db);
    this.records = new RunRecords(db, opts);
    this.events = new RunEvents(db, { ...opts, sealer: this.sealer });
    const modelSteps = <I extends ModelStepItem>(final: boolean) =>
      new WriteBatches<I, FencedWrite>(async (items, json) => {
        const { rows } = await batches.query<ModelStepRow>(withFields(MODEL_STEPS(items, final), { values: [json] }));
        return modelStepOutcomes(items, rows);
      });
    this.modelSteps = modelSteps(false);
    this.finalModelSteps = modelSteps<ModelStepItem & RunEndFields>(true);
    this.toolResults = new WriteBatches(async (items, json) => {
      const { rows } = await batches.query<ToolResultRow>(withFields(forItems(items, TOOL_RESULTS), { values: [json] }));
      return toolResultOutcomes(items, rows);
    });
  }

  /**
   * A tool call's input as its STARTED row keeps it for its tool.started event (run-events.ts reads it
   * back): the input as the model gave it, made storable and sealed as event data is; null without a call.
   */
  private startedInput(s: ToolStart | undefined): unknown {
    return s ? (sealEventData(this.sealer, { input: storableValue(s.input ?? {}) }) as { input: unknown }).input : null;
  }

  appendEvents(runId: RunId, owner: Lease, events: readonly NewEvent[]): Promise<void> {
    return this.events.append(runId, owner, events);
  }

  eventsClaimed(runId: RunId, owner: Lease, attempt: number): Promise<EventsClaimed> {
    return this.events.claimed(runId, owner, attempt);
  }

  /**
   * A run's end as stored: its error redacted (it says what failed, and can quote what failed: a
   * tool's message, a provider's answer), its output and error sealed.
   */
  private storedEnd(end: RunEnd): [output: string | null, error: string | null, reason: string | null] {
    const [output, error, reason] = endTexts(end.error == null ? end : withFields(end, { error: this.redact(end.error) }));
    return [this.sealer.text(output ?? null), this.sealer.text(error ?? null), reason ?? null];
  }

  /** A named statement: each connection parses and plans it once, which matters on the step path. */
  private prepared<R extends pg.QueryResultRow>(
    statement: NamedStatement,
    values: unknown[],
    on: NamedStatements = this.db,
  ): Promise<pg.QueryResult<R>> {
    return on.query<R>(withFields(statement, { values }));
  }

  /** The run's log: a fork's inherited steps (their `runId` is the source's), then its own (lineage-sql.ts). */
  async steps(runId: RunId): Promise<Step[]> {
    const { rows } = await this.prepared<StepRow>(this.sql.STEPS, [runId]);
    return rows.map((r) => toStep(r, this.sealer));
  }

  /**
   * `holding`: runs this worker is driving already; never claimed twice, even when their lease lapsed.
   * `agents`: the agents it serves; only their runs are claimed (the demo agent's when absent).
   * `liveness`: the worker's owner lock, and the locks found orphaned (their runs are taken over).
   */
  async claim(
    owner: LeaseOwner,
    limit: number,
    holding: readonly RunId[] = [],
    agents: readonly string[] = [DEMO_AGENT],
    liveness?: ClaimLiveness,
  ): Promise<ClaimedRun[]> {
    // On a pool of generic plans: its generic plan is as good as its custom one (claim-sql.ts), which a
    // pool of the planner's choice would not believe (the generic plan guesses a tenth of the table for
    // LIMIT $3) and would plan it again at every call.
    const { rows } = await this.prepared<RunRow & { has_steps: boolean; lease_token: string }>(
      this.sql.CLAIM,
      claimParams(owner.worker, owner.leaseMs, limit, holding, agents, liveness?.ownerLock, liveness?.orphaned),
      this.batches,
    );
    const claimed: ClaimedRun[] = [];
    const names = this.interned;
    for (const r of rows) {
      const lease = withFields(owner, { token: r.lease_token });
      let run: Run;
      try {
        run = toRun(r, this.sealer);
      } catch (e) {
        if (!(e instanceof EncryptionError)) throw e;
        // A run whose stored values do not open cannot be driven: it ends here, not claimed again and again.
        await this.finish(r.id as RunId, lease, { status: 'FAILED', error: e.message }).catch(() => {});
        continue;
      }
      claimed.push(claimedRun(run, lease, r.has_steps, names));
    }
    return claimed;
  }

  /**
   * Not async functions, this and finishTool: with thousands of runs in flight most of them wait on one
   * of these writes at any moment, and an async function's promise would be one more link each held.
   */
  checkpointModel(runId: RunId, owner: Lease, cp: ModelCheckpoint, then: AfterCheckpoint = {}): Promise<FencedWrite> {
    return promised(() => this.checkpointModelNow(runId, owner, cp, then));
  }

  private checkpointModelNow(runId: RunId, owner: Lease, cp: ModelCheckpoint, then: AfterCheckpoint): Promise<FencedWrite> {
    const u = cp.usage;
    const { end, wait } = then;
    // Its step.finished is read from the step row (run-events.ts); what streamed is written before it.
    const streamed = cp.streamed ?? [];
    if (!wait || end) {
      // A step the run goes on from, or its last: batched with other runs' steps (step-batch-sql.ts).
      const startNext = end ? undefined : then.startNext;
      const item: ModelStepItem = stepItem(runId, owner, startNext, this.startedInput(startNext), {
        events: eventValues(streamed, this.sealer),
        tokens: cp.budgetTokens,
        cost: storableCost(cp.costUsd),
        seq: cp.seq,
        request: cp.request,
        content: sealBlocks(this.sealer, cp.content),
        stop_reason: cp.stopReason,
        input_tokens: u.inputTokens,
        output_tokens: u.outputTokens,
        cache_creation: u.cacheCreationInputTokens,
        cache_read: u.cacheReadInputTokens,
        attempts: cp.attempts,
        latency_ms: Math.round(cp.latencyMs),
      });
      if (!end) return this.modelSteps.write(item);
      const [output, error, reason] = this.storedEnd(end);
      return this.finalModelSteps.write(
        Object.assign(item, { end_status: end.status, end_output: output, end_error: error, end_reason: reason }),
      );
    }
    const stepValues = [
      cp.budgetTokens,
      storableCost(cp.costUsd),
      cp.seq,
      cp.request,
      JSON.stringify(sealBlocks(this.sealer, cp.content)),
      cp.stopReason,
      u.inputTokens,
      u.outputTokens,
      u.cacheCreationInputTokens,
      u.cacheReadInputTokens,
      cp.attempts,
      Math.round(cp.latencyMs),
    ];
    return this.checkpointModelWaiting(runId, owner, stepValues, wait, eventParams(streamed, this.sealer));
  }

  /** The model step and the start of a wait for approvals, in one statement (see WaitStart). */
  private async checkpointModelWaiting(
    runId: RunId,
    owner: Lease,
    stepValues: unknown[],
    wait: WaitStart,
    events: ReturnType<typeof eventParams>,
  ): Promise<FencedWrite> {
    const [waiting, runAt, decisions] = waitParams(wait, this.sealer);
    const { rows } = await this.prepared<ProgressRow & { status: Waited['status'] }>(this.sql.CHECKPOINT_MODEL_WAITING, [
      runId,
      owner.worker,
      waiting,
      ...stepValues,
      runAt,
      decisions,
      owner.token,
      ...events,
    ]);
    if (!rows[0]) throw new LeaseLostError(runId, owner.worker);
    return progress(rows[0], { nextStarted: false, waited: rows[0].status });
  }

  async decisions(runId: RunId): Promise<DecisionRecord[]> {
    return readDecisions(this.db, this.sql.waiting, runId, this.sealer);
  }

  async wait(runId: RunId, owner: Lease, start: WaitStart): Promise<Waited> {
    return startWaiting(this.db, this.sql.waiting, runId, owner, start, this.sealer);
  }

  async consumeDecision(runId: RunId, owner: Lease, toolUseId: string): Promise<void> {
    return consumeDecision(this.db, this.sql.waiting, runId, owner, toolUseId);
  }

  async nextDueInMs(lookbackMs = 0): Promise<number | null> {
    return nextDueInMs(this.db, this.sql.waiting, lookbackMs);
  }

  async startTool(runId: RunId, owner: Lease, start: ToolStart): Promise<RunProgress & { seq: number; created: boolean }> {
    const { rows } = await this.prepared<ProgressRow & { inserted: number | null; existing: number | null }>(this.sql.START_TOOL, [
      runId,
      owner.worker,
      owner.leaseMs,
      start.seq,
      start.toolName,
      start.toolUseId,
      owner.token,
      JSON.stringify(this.startedInput(start)),
    ]);
    const row = rows[0];
    if (!row) throw new LeaseLostError(runId, owner.worker);
    return progress(row, { seq: (row.inserted ?? row.existing)!, created: row.inserted !== null });
  }

  finishTool(runId: RunId, owner: Lease, f: ToolFinish, startNext?: ToolStart): Promise<FencedWrite> {
    return promised(() => this.finishToolNow(runId, owner, f, startNext));
  }

  private finishToolNow(runId: RunId, owner: Lease, f: ToolFinish, startNext?: ToolStart): Promise<FencedWrite> {
    // A result of content blocks has its text redacted, not its images (base64 is not text to match).
    const stored = mapResultText(f.result, (text) => this.redact(storableText(text)));
    // Its tool.finished and step.finished are read from the step row (run-events.ts).
    return this.toolResults.write(
      stepItem(runId, owner, startNext, this.startedInput(startNext), {
        use_id: f.toolUseId,
        status: f.status,
        response: this.sealer.text(stored),
        latency_ms: Math.round(f.latencyMs),
        files: f.files?.length ? fileRows(f.files) : null,
        rerun: f.rerun === true,
      }),
    );
  }

  async finish(runId: RunId, owner: Lease, end: RunEnd): Promise<void> {
    const { rowCount } = await this.prepared(this.sql.FINISH, [
      runId,
      owner.worker,
      end.status,
      ...this.storedEnd(end),
      owner.token,
      end.usage ? budgetTokens(end.usage) : 0,
      storableCost(end.costUsd ?? 0),
    ]);
    if (rowCount !== 1) throw new LeaseLostError(runId, owner.worker);
  }

  async recordedWrite(runId: RunId, owner: Lease, probe: WriteProbe): Promise<RecordedWrite | null> {
    const { rows } = await this.db.query<
      ProgressRow & { status: RunStatus; ours: boolean | null; model_step: boolean; tool_finished: boolean; next_started: boolean }
    >(this.sql.RECORDED_WRITE, [
      runId,
      owner.worker,
      owner.token,
      probe.modelSeq ?? null,
      probe.finishedToolUseId ?? null,
      probe.startNext?.toolUseId ?? null,
      probe.startNext?.seq ?? null,
    ]);
    const r = rows[0];
    if (!r) return null;
    return progress(r, {
      status: r.status,
      ours: r.ours === true,
      modelStep: r.model_step,
      toolFinished: r.tool_finished,
      nextStarted: r.next_started,
    });
  }

  async renewLeases(owner: LeaseOwner, held: readonly HeldLease[], withinMs: number | null = null): Promise<RenewedLease[]> {
    return renewLeases(this.db, this.sql.RENEW_LEASES, owner, held, withinMs);
  }

  async release(runId: RunId, owner: Lease, how: Release = { countAttempt: false }): Promise<Released | false> {
    // A run with a cancel pending ends here instead: nobody would be driving it to its next guard (and
    // the attempt it ends stays counted: it is given back only to a run that goes back to the queue).
    // An attempt given back keeps its number until the next claim continues it, so `attempts` always
    // counts the attempt `last_error_attempt` names; the cause goes to last_error only, as `error` is
    // what a finished run ended with.
    // The delay is a float8 and is compared with the time left before the deadline instead of being
    // added to now() first, so no delay, however long, can overflow: past the deadline means "at the
    // deadline", where the run is claimed and times out. The least() keeps the branch not taken from
    // overflowing too: the planner may fold it with the parameter's value before choosing a branch.
    // Not a number of milliseconds (NaN, ±Infinity): wait as long as the run may, i.e. until its deadline.
    const delayMs = how.delayMs === undefined ? 0 : Number.isFinite(how.delayMs) ? Math.max(0, how.delayMs) : Number.POSITIVE_INFINITY;
    const { rows } = await this.prepared<{ status: 'QUEUED' | 'CANCELLED'; tokens_used: number; run_at: Date }>(this.sql.RELEASE, [
      runId,
      owner.worker,
      owner.token,
      how.countAttempt,
      how.providerRequeue ?? false,
      delayMs,
      how.error == null ? null : this.sealer.text(this.redact(storableText(how.error))),
      how.usage ? budgetTokens(storableUsage(how.usage)) : 0,
      storableCost(how.costUsd ?? 0),
    ]);
    const row = rows[0];
    return row ? { status: row.status, tokensUsed: row.tokens_used, runAt: row.run_at } : false;
  }

  async forgiveLapsedAttempt(runId: RunId, lost: Lease): Promise<boolean> {
    const { rowCount } = await this.prepared(this.sql.FORGIVE_LAPSED_ATTEMPT, [runId, lost.token]);
    return rowCount === 1;
  }

  async putBlob(body: string): Promise<string> {
    const digest = sha256(body);
    await this.db.query(this.sql.PUT_BLOB, [digest, this.sealer.text(body)]);
    return digest;
  }

  conversationBefore(runId: RunId): Promise<EarlierRun[]> {
    return this.records.conversationBefore(runId);
  }

  blob(digest: string): Promise<string | null> {
    return this.records.blob(digest);
  }
}
