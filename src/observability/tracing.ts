/**
 * OpenTelemetry spans from engine events, with the GenAI semantic conventions' names and attributes.
 * Only @opentelemetry/api is used: without an SDK registered by the user every call is a no-op.
 *
 *   invoke_agent            one attempt at a run (claim → finish, crash, hand-back or lost lease)
 *   ├── chat {model}        one model step (retries included)
 *   └── execute_tool {name} one tool call
 *
 * The engine reports a step when it has finished, so step spans are created after the fact, starting
 * `latency` before now. No prompt or response text is put on spans: content capture is off.
 */
import { type Attributes, context, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { TerminalStatus } from '../domain/types.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import type { DrivenRun } from '../ports/engine-store.ts';
import { LlmError } from '../domain/errors.ts';

export interface TraceOptions {
  /** gen_ai.provider.name, e.g. "anthropic" (the LlmClient's `provider`). */
  provider: string;
  tracer?: Tracer;
  /** The REDACT patterns (redact.ts), applied to the error messages spans carry. */
  redact?: (text: string) => string;
}

/** A run's end that the user sees as a failure; a cancel is what the user asked for. */
const FAILED: ReadonlySet<TerminalStatus> = new Set(['FAILED', 'TIMED_OUT']);

/** A step's parent that records nothing (see parentOf). */
const NOT_RECORDING = Symbol('not recording');

function errorType(error: unknown): string {
  if (error instanceof LlmError) return error.status === -1 ? (error.type ?? 'network') : String(error.status);
  return error instanceof Error ? error.name : 'unknown';
}

export function traceEvents(opts: TraceOptions): EngineEvents {
  const tracer = opts.tracer ?? trace.getTracer('durable-agent');
  const provider = opts.provider;
  const clean = opts.redact ?? ((text: string) => text);
  /** An error as a span records it: its name, message and stack, redacted. */
  const exception = (e: Error) => ({ name: e.name, message: clean(e.message), ...(e.stack ? { stack: clean(e.stack) } : {}) });
  // Open attempt spans, by run and worker: two workers of one process can hold attempts at the same
  // run at once (one whose lease lapsed, one that took over), and each attempt ends its own span.
  // By worker, then by run: a key joining the two would be a string made a run held.
  const byWorker = new Map<string, Map<string, Span>>();
  const attempts = (worker: string | null): Map<string, Span> | undefined => byWorker.get(worker ?? '');

  /**
   * The attempt span a step of `run` is a child of, or NOT_RECORDING when that span records nothing:
   * no SDK is registered, or the attempt was sampled out (under the SDK's default, parent-based
   * sampling, its steps are too). Then a step costs no span and no attributes.
   */
  const parentOf = (run: DrivenRun): Span | undefined | typeof NOT_RECORDING => {
    // The claimed run's lockedBy is the worker driving it; step events carry the run, not the worker.
    const parent = attempts(run.lockedBy)?.get(run.id);
    return parent && !parent.isRecording() ? NOT_RECORDING : parent;
  };

  /** A child of the attempt span (`parent`) that began `latencyMs` ago and ends now; `finish` adds to it first. */
  function stepSpan(
    parent: Span | undefined,
    run: DrivenRun,
    seq: number,
    name: string,
    kind: SpanKind,
    latencyMs: number,
    attributes: Attributes,
    finish?: (span: Span) => void,
  ): void {
    const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
    const now = Date.now();
    const span = tracer.startSpan(
      name,
      { kind, startTime: now - latencyMs, attributes: { 'durable_agent.run.id': run.id, 'durable_agent.step.seq': seq, ...attributes } },
      ctx,
    );
    finish?.(span);
    span.end(now);
  }

  function endAttempt(runId: string, worker: string, end: (span: Span) => void): void {
    const spans = attempts(worker);
    const span = spans?.get(runId);
    if (!spans || !span) return;
    spans.delete(runId);
    end(span);
    span.end();
  }

  return {
    runClaimed({ run, worker, resumedAtSeq }) {
      let spans = attempts(worker);
      if (!spans) byWorker.set(worker, (spans = new Map()));
      spans.get(run.id)?.end(); // a leftover of an attempt whose end was never reported
      spans.set(
        run.id,
        tracer.startSpan('invoke_agent', {
          kind: SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.provider.name': provider,
            'gen_ai.request.model': run.model,
            'durable_agent.run.id': run.id,
            'durable_agent.run.attempt': run.attempts,
            'durable_agent.worker': worker,
            'durable_agent.resumed_at_seq': resumedAtSeq,
          },
        }),
      );
    },

    modelStep({ run, seq, response, latencyMs, costUsd }) {
      const parent = parentOf(run);
      if (parent === NOT_RECORDING) return;
      const u = response.usage;
      stepSpan(parent, run, seq, `chat ${run.model}`, SpanKind.CLIENT, latencyMs, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': provider,
        'gen_ai.request.model': run.model,
        'gen_ai.response.model': response.model,
        ...(response.id ? { 'gen_ai.response.id': response.id } : {}),
        'gen_ai.response.finish_reasons': [response.stopReason],
        // The convention counts cached tokens as input too; Anthropic reports them apart, so add them.
        'gen_ai.usage.input_tokens': u.inputTokens + u.cacheReadInputTokens + u.cacheCreationInputTokens,
        'gen_ai.usage.output_tokens': u.outputTokens,
        'gen_ai.usage.cache_read.input_tokens': u.cacheReadInputTokens,
        'gen_ai.usage.cache_creation.input_tokens': u.cacheCreationInputTokens,
        'durable_agent.step.attempts': response.attempts,
        'durable_agent.cost_usd': costUsd,
        ...(response.requestId ? { 'durable_agent.provider.request_id': response.requestId } : {}),
      });
    },

    modelFailed({ run, seq, error, latencyMs }) {
      const parent = parentOf(run);
      if (parent === NOT_RECORDING) return;
      const attributes = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': provider,
        'gen_ai.request.model': run.model,
        'error.type': errorType(error),
      };
      stepSpan(parent, run, seq, `chat ${run.model}`, SpanKind.CLIENT, latencyMs, attributes, (span) => {
        span.recordException(exception(error));
        span.setStatus({ code: SpanStatusCode.ERROR, message: clean(error.message) });
      });
    },

    toolStep({ run, seq, toolName, toolUseId, status, latencyMs }) {
      const parent = parentOf(run);
      if (parent === NOT_RECORDING) return;
      const attributes = {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': toolName,
        'gen_ai.tool.call.id': toolUseId,
        'gen_ai.tool.type': 'function',
      };
      stepSpan(parent, run, seq, `execute_tool ${toolName}`, SpanKind.INTERNAL, latencyMs, attributes, (span) => {
        // The tool's failure is information for the model, but the span still reports it.
        if (status !== 'ERROR') return;
        span.setAttribute('error.type', 'tool_error');
        span.setStatus({ code: SpanStatusCode.ERROR });
      });
    },

    runFinished({ run, status, error, tokensUsed }) {
      endAttempt(run.id, run.lockedBy ?? '', (span) => {
        span.setAttributes({ 'durable_agent.run.status': status, 'durable_agent.run.tokens_used': tokensUsed });
        if (FAILED.has(status)) span.setStatus({ code: SpanStatusCode.ERROR, message: error ? clean(error) : status });
      });
    },

    leaseLost({ runId, worker }) {
      endAttempt(runId, worker, (span) => {
        span.setAttribute('durable_agent.attempt.end', 'lease-lost');
        // Work since the last checkpoint is thrown away and another worker redoes it.
        span.setStatus({ code: SpanStatusCode.ERROR, message: 'lease lost' });
      });
    },

    attemptEnded({ runId, worker, reason, error }) {
      endAttempt(runId, worker, (span) => {
        span.setAttribute('durable_agent.attempt.end', reason);
        if (reason === 'handed-back') return;
        if (error instanceof Error) span.recordException(exception(error));
        span.setAttribute('error.type', errorType(error));
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? clean(error.message) : reason });
      });
    },
  };
}
