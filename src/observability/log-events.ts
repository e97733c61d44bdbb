/**
 * One log line per thing that happened to a run, from engine events. Lines carry counts, timings and
 * ids, never message text, tool inputs or results: logs are for operating the system, the run's steps
 * (GET /api/runs/{id}/steps/{seq}) are for reading what was said.
 *
 * The engine emits step and run events inside its run context, so run_id, worker and step_seq come
 * from the logger's mixin. Lease loss and attempt ends are emitted by the worker outside that context,
 * so those lines (and run_finished, which an abandoned run emits outside it too) name the run themselves.
 *
 * Each line has an `event` field; the pretty formatter (pretty.ts) renders each event as one short line.
 */
import type { EngineEvents } from '../engine/events.ts';
import { LlmError } from '../errors.ts';
import type { Logger } from './logger.ts';

/** Cost rounded as the database stores it (numeric(18, 8)), so log and row agree. */
const usd = (n: number) => Math.round(n * 1e8) / 1e8;

export function logEvents(logger: Logger): EngineEvents {
  return {
    runClaimed({ run, resumedAtSeq }) {
      logger.info(
        { event: 'run_claimed', resumed_at_seq: resumedAtSeq, attempt: run.attempts, model: run.model },
        resumedAtSeq > 0 ? 'run resumed' : 'run claimed',
      );
    },

    modelStep({ run, response, latencyMs, costUsd }) {
      const u = response.usage;
      logger.info(
        {
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

    modelFailed({ error, latencyMs }) {
      const llm = error instanceof LlmError ? error : null;
      logger.warn(
        {
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

    stepWarning({ warning, detail }) {
      logger.warn({ event: 'step_warning', warning, detail }, `step warning: ${detail}`);
    },

    toolStarted({ toolName, toolUseId, resumed }) {
      logger.info(
        { event: 'tool_started', kind: 'TOOL', tool_name: toolName, tool_use_id: toolUseId, resumed },
        // A resumed tool runs again with the same idempotency key: worth seeing when effects look doubled.
        resumed ? 'tool re-run after resume' : 'tool started',
      );
    },

    toolStep({ toolName, toolUseId, status, latencyMs }) {
      logger.info(
        {
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

    runFinished({ run, status, error, tokensUsed }) {
      const failed = status === 'FAILED' || status === 'TIMED_OUT';
      logger[failed ? 'warn' : 'info'](
        { event: 'run_finished', run_id: run.id, status, tokens_used: tokensUsed, error: error ?? undefined },
        'run finished',
      );
    },

    runWaiting({ run, waiting }) {
      logger.info(
        {
          event: 'run_waiting', run_id: run.id, kind: waiting.kind,
          tool_calls: waiting.toolCalls.map((c) => `${c.toolName}:${c.toolUseId}`), wake_at: waiting.wakeAt?.toISOString(),
        },
        `run waiting (${waiting.kind}); it holds no lease until it is woken`,
      );
    },

    leaseLost({ runId, worker }) {
      logger.warn(
        { event: 'lease_lost', run_id: runId, worker },
        'lease lost: another worker took the run over; this attempt stops',
      );
    },

    attemptEnded({ runId, worker, reason, error }) {
      const fields = { event: 'attempt_ended', run_id: runId, worker, reason, err: error };
      const msg = `attempt ended (${reason}); the run resumes from its last checkpoint`;
      // Handing back at shutdown is routine; a requeue after a model outage and a database failure are
      // usually transient; a crash is a bug.
      if (reason === 'handed-back') logger.info(fields, msg);
      else if (reason === 'database' || reason === 'requeued') logger.warn(fields, msg);
      else logger.error(fields, msg);
    },
  };
}
