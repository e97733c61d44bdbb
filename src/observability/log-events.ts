/**
 * One log line per thing that happened to a run, from engine events. Lines carry counts, timings and
 * ids, never message text, tool inputs or results: logs are for operating the system, the run's steps
 * (GET /api/runs/{id}/steps/{seq}) are for reading what was said. Every line names its run and worker,
 * and a step's lines its step_seq, taken from the event (an AsyncLocalStorage context would cost every
 * promise of the process a hook on Node 20: ~10% of a busy worker's CPU).
 *
 * Each line has an `event` field; the pretty formatter (pretty.ts) renders each event as one short line.
 */
import type { EngineEvents } from '../ports/engine-events.ts';
import { LlmError } from '../domain/errors.ts';
import type { Logger } from './logger.ts';

/** Cost rounded as the database stores it (numeric(18, 8)), so log and row agree. */
const usd = (n: number) => Math.round(n * 1e8) / 1e8;

export function logEvents(logger: Logger): EngineEvents {
  return {
    runClaimed({ run, worker, resumedAtSeq }) {
      logger.info(
        { run_id: run.id, worker, event: 'run_claimed', resumed_at_seq: resumedAtSeq, attempt: run.attempts, model: run.model },
        resumedAtSeq > 0 ? 'run resumed' : 'run claimed',
      );
    },

    modelStep({ run, worker, seq, response, latencyMs, costUsd }) {
      const u = response.usage;
      logger.info(
        {
          run_id: run.id,
          worker,
          step_seq: seq,
          event: 'model_step',
          kind: 'MODEL',
          status: 'DONE',
          model: run.model,
          stop_reason: response.stopReason,
          input_tokens: u.inputTokens,
          output_tokens: u.outputTokens,
          cache_read_input_tokens: u.cacheReadInputTokens,
          cache_creation_input_tokens: u.cacheCreationInputTokens,
          latency_ms: Math.round(latencyMs),
          cost_usd: usd(costUsd),
          attempts: response.attempts,
          // What the provider's support asks for when a call misbehaved.
          request_id: response.requestId,
          response_id: response.id,
          // What was wrong in the provider's answer and repaired (never its text).
          ...(response.warnings?.length ? { provider_warnings: response.warnings } : {}),
        },
        'model step',
      );
    },

    modelFailed({ run, worker, seq, error, latencyMs }) {
      const llm = error instanceof LlmError ? error : null;
      logger.warn(
        {
          run_id: run.id,
          worker,
          step_seq: seq,
          event: 'model_failed',
          kind: 'MODEL',
          status: 'ERROR',
          latency_ms: Math.round(latencyMs),
          http_status: llm?.status,
          error_type: llm?.type ?? undefined,
          request_id: llm?.requestId ?? undefined,
          err: error,
        },
        'model call failed',
      );
    },

    stepWarning({ run, worker, seq, warning, detail }) {
      logger.warn({ run_id: run.id, worker, step_seq: seq, event: 'step_warning', warning, detail }, `step warning: ${detail}`);
    },

    toolStarted({ run, worker, seq, toolName, toolUseId, resumed }) {
      logger.info(
        {
          run_id: run.id,
          worker,
          step_seq: seq,
          event: 'tool_started',
          kind: 'TOOL',
          tool_name: toolName,
          tool_use_id: toolUseId,
          resumed,
        },
        // A resumed tool runs again with the same idempotency key: worth seeing when effects look doubled.
        resumed ? 'tool re-run after resume' : 'tool started',
      );
    },

    toolStep({ run, worker, seq, toolName, toolUseId, status, latencyMs }) {
      logger.info(
        {
          run_id: run.id,
          worker,
          step_seq: seq,
          event: 'tool_step',
          kind: 'TOOL',
          status,
          tool_name: toolName,
          tool_use_id: toolUseId,
          latency_ms: Math.round(latencyMs),
          attempts: 1,
        },
        'tool step',
      );
    },

    runFinished({ run, worker, status, error, tokensUsed }) {
      const failed = status === 'FAILED' || status === 'TIMED_OUT';
      logger[failed ? 'warn' : 'info'](
        { run_id: run.id, worker, event: 'run_finished', status, tokens_used: tokensUsed, error: error ?? undefined },
        'run finished',
      );
    },

    runWaiting({ run, worker, waiting }) {
      logger.info(
        {
          run_id: run.id,
          worker,
          event: 'run_waiting',
          kind: waiting.kind,
          tool_calls: waiting.toolCalls.map((c) => `${c.toolName}:${c.toolUseId}`),
          wake_at: waiting.wakeAt?.toISOString(),
        },
        `run waiting (${waiting.kind}); it holds no lease until it is woken`,
      );
    },

    leaseLost({ runId, worker }) {
      logger.warn({ run_id: runId, worker, event: 'lease_lost' }, 'lease lost: another worker took the run over; this attempt stops');
    },

    attemptEnded({ runId, worker, reason, error }) {
      const fields = { run_id: runId, worker, event: 'attempt_ended', reason, err: error };
      const msg = `attempt ended (${reason}); the run resumes from its last checkpoint`;
      // Handing back at shutdown is routine; a requeue after a model outage and a database failure are
      // usually transient; a crash is a bug.
      if (reason === 'handed-back') logger.info(fields, msg);
      else if (reason === 'database' || reason === 'requeued') logger.warn(fields, msg);
      else logger.error(fields, msg);
    },
  };
}
