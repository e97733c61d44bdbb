/** Rows (snake_case, as PostgreSQL returns them) converted to domain types in one place. */
import {
  type ContentBlock,
  type ModelOptions,
  type ModelRequestParams,
  type Run,
  type RunId,
  type RunStatus,
  type Step,
  type StepKind,
  type StepStatus,
  type StepSummary,
  textOf,
  type Waiting,
} from '../domain/types.ts';
import type { Sealer } from './encryption.ts';
import { openBlocks, openToolCalls } from './sealed-columns.ts';

export interface RunRow {
  id: string;
  schedule_id: string | null;
  scheduled_for: Date | null;
  agent: string;
  agent_version: string | null;
  previous_run_id: string | null;
  tenant: string;
  status: string;
  input: string;
  input_blocks: boolean;
  model: string;
  model_options: ModelOptions | null;
  token_budget: number;
  tokens_used: number;
  cost_usd: number;
  cost_budget_usd: number | null;
  max_steps: number;
  deadline_at: Date;
  run_at: Date;
  locked_by: string | null;
  locked_until: Date | null;
  cancel_requested: boolean;
  attempts: number;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  output: string | null;
  stop_reason: string | null;
  error: string | null;
  last_error: string | null;
  last_error_at: Date | null;
  last_error_attempt: number | null;
  provider_requeues: number;
  forked_from_run_id: string | null;
  forked_after_seq: number | null;
  /** Computed by RUN_COLUMNS; absent where a statement returns `run.*`. */
  next_attempt_at?: Date | null;
  waiting?: WaitingColumn | null;
}

/** `run.waiting` as stored (jsonb): times as ISO strings. */
export interface WaitingColumn {
  kind: Waiting['kind'];
  since: string;
  toolCalls: Waiting['toolCalls'];
  wakeAt?: string | null;
  expiresAt?: string | null;
}

export function toWaiting(stored: WaitingColumn | null | undefined, sealer: Sealer): Waiting | null {
  if (!stored) return null;
  const w = { ...stored, toolCalls: openToolCalls(sealer, stored.toolCalls ?? []) };
  const date = (s: string | null | undefined) => (s ? new Date(s) : null);
  return { kind: w.kind, since: new Date(w.since), toolCalls: w.toolCalls, wakeAt: date(w.wakeAt), expiresAt: date(w.expiresAt) };
}

export interface StepRow {
  run_id: string;
  seq: number;
  kind: string;
  status: string;
  tool_name: string | null;
  tool_use_id: string | null;
  request: ModelRequestParams | null;
  response: string | null;
  stop_reason: string | null;
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cost_usd: number;
  attempts: number;
  latency_ms: number | null;
  worker: string | null;
  started_at: Date;
  finished_at: Date | null;
}

export const RUN_COLUMNS = `id, agent, agent_version, previous_run_id, tenant, status, input, input_blocks, model, model_options, token_budget, tokens_used, cost_usd, max_steps, deadline_at, run_at,
  locked_by, locked_until, cancel_requested, attempts, metadata, created_at, updated_at, finished_at, output, stop_reason, error,
  last_error, last_error_at, last_error_attempt, provider_requeues, cost_budget_usd, forked_from_run_id, forked_after_seq, waiting,
  schedule_id, scheduled_for,
  CASE WHEN status = 'QUEUED' AND run_at > now() THEN run_at END AS next_attempt_at`;

/** Every step column but the bodies (`request`, `response`), which can be large. */
export const STEP_SUMMARY_COLUMNS = `run_id, seq, kind, status, tool_name, tool_use_id, stop_reason,
  input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens, cost_usd, attempts,
  latency_ms, worker, started_at, finished_at`;

export const STEP_COLUMNS = `${STEP_SUMMARY_COLUMNS}, request, response`;

/** A run row as the domain sees it, its payloads opened (encryption.ts). */
export function toRun(r: RunRow, sealer: Sealer): Run {
  return {
    id: r.id as RunId,
    agent: r.agent,
    agentVersion: r.agent_version,
    previousRunId: r.previous_run_id as RunId | null,
    tenant: r.tenant,
    status: r.status as RunStatus,
    ...inputOf(sealer.openText(r.input), r.input_blocks),
    model: r.model,
    modelOptions: r.model_options ?? null,
    tokenBudget: r.token_budget,
    tokensUsed: r.tokens_used,
    costUsd: r.cost_usd,
    costBudgetUsd: r.cost_budget_usd,
    maxSteps: r.max_steps,
    deadlineAt: r.deadline_at,
    runAt: r.run_at,
    lockedBy: r.locked_by,
    lockedUntil: r.locked_until,
    cancelRequested: r.cancel_requested,
    attempts: r.attempts,
    metadata: sealer.open(r.metadata),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
    output: sealer.openText(r.output),
    stopReason: r.stop_reason,
    error: sealer.openText(r.error),
    lastError:
      r.last_error === null ? null : { message: sealer.openText(r.last_error), at: r.last_error_at!, attempt: r.last_error_attempt ?? 0 },
    nextAttemptAt: r.next_attempt_at ?? null,
    providerRequeues: r.provider_requeues,
    forkedFrom: r.forked_from_run_id === null ? null : { runId: r.forked_from_run_id as RunId, afterSeq: r.forked_after_seq! },
    waiting: toWaiting(r.waiting, sealer),
    scheduleId: r.schedule_id ?? null,
    scheduledFor: r.scheduled_for ?? null,
  };
}

/** A run's input as stored: text, or (input_blocks) the JSON array of its content blocks. */
function inputOf(stored: string, blocks: boolean): Pick<Run, 'input' | 'inputContent'> {
  if (!blocks) return { input: stored, inputContent: null };
  const content = JSON.parse(stored) as ContentBlock[];
  // Shown as text where a run's input is: its text blocks, a blank line between them.
  return { input: textOf(content, '\n\n'), inputContent: content };
}

export function toStepSummary(r: Omit<StepRow, 'request' | 'response'>): StepSummary {
  return {
    runId: r.run_id as RunId,
    seq: r.seq,
    kind: r.kind as StepKind,
    status: r.status as StepStatus,
    toolName: r.tool_name,
    toolUseId: r.tool_use_id,
    stopReason: r.stop_reason,
    inputTokens: r.input_tokens,
    outputTokens: r.output_tokens,
    cacheCreationInputTokens: r.cache_creation_input_tokens,
    cacheReadInputTokens: r.cache_read_input_tokens,
    costUsd: r.cost_usd,
    attempts: r.attempts,
    latencyMs: r.latency_ms,
    worker: r.worker,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  };
}

export function toStep(r: StepRow, sealer: Sealer): Step {
  const summary = toStepSummary(r);
  return {
    ...summary,
    request: r.request,
    response:
      summary.kind === 'MODEL' && r.response !== null
        ? openBlocks(sealer, JSON.parse(r.response) as ContentBlock[])
        : sealer.openText(r.response),
  };
}
