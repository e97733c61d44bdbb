import { describe, expect, it } from 'vitest';
import type { Run, RunId } from '../../src/domain/types.ts';
import type { LlmResponse } from '../../src/llm/types.ts';
import { logEvents } from '../../src/observability/log-events.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { formatPretty } from '../../src/observability/pretty.ts';

const RUN_ID = '6f1c0a52-3b4d-4e5f-8a9b-0c1d2e3f4a5b' as RunId;
const run = { id: RUN_ID, model: 'claude-sonnet-4-6', attempts: 1, lockedBy: 'worker-A' } as Run;

function model(stopReason: string, inputTokens: number, outputTokens: number, extra: Partial<LlmResponse> = {}): LlmResponse {
  const usage = { inputTokens, outputTokens, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 };
  return { id: 'msg_01', model: 'claude-sonnet-4-6', content: [], stopReason, usage, requestId: 'req_01', attempts: 1, ...extra };
}

/** The JSON lines logEvents writes for the events `emit` sends it. */
function lines(emit: (events: ReturnType<typeof logEvents>) => void) {
  const out: Record<string, unknown>[] = [];
  const logger = createLogger({ destination: { write: (s: string) => void out.push(JSON.parse(s) as Record<string, unknown>) } });
  emit(logEvents(logger));
  return out;
}

describe('pretty log lines', () => {
  it("prints the README's lines for the engine's events", () => {
    const json = lines((ev) => {
      ev.modelStep!({ run, worker: 'worker-A', seq: 1, response: model('tool_use', 812, 64), latencyMs: 1830.4, costUsd: 0.003 });
      ev.toolStarted!({ run, worker: 'worker-A', seq: 2, toolName: 'list_tickets', toolUseId: 'toolu_01Ab', resumed: false });
      ev.runClaimed!({ run, worker: 'worker-B', resumedAtSeq: 2 });
      ev.toolStep!({ run, worker: 'worker-B', seq: 2, toolName: 'list_tickets', toolUseId: 'toolu_01Ab', status: 'DONE', latencyMs: 41.3 });
      ev.modelStep!({ run, worker: 'worker-B', seq: 3, response: model('end_turn', 1210, 140), latencyMs: 2210, costUsd: 0.0057 });
      ev.runFinished!({ run, worker: 'worker-B', status: 'SUCCEEDED', error: null, tokensUsed: 2226 });
    });

    expect(json.map(formatPretty)).toEqual([
      'worker-A run=6f1c0a52 seq=1 MODEL stop=tool_use in=812 out=64 latency=1830ms',
      'worker-A run=6f1c0a52 seq=2 TOOL list_tickets id=toolu_01Ab started',
      'worker-B run=6f1c0a52 resumed at seq=2',
      'worker-B run=6f1c0a52 seq=2 TOOL list_tickets id=toolu_01Ab done 41ms',
      'worker-B run=6f1c0a52 seq=3 MODEL stop=end_turn in=1210 out=140 latency=2210ms',
      'worker-B run=6f1c0a52 SUCCEEDED tokens=2226',
    ]);
    // The JSON keeps what the short form leaves out.
    expect(json[0]).toMatchObject({
      event: 'model_step',
      run_id: RUN_ID,
      worker: 'worker-A',
      step_seq: 1,
      kind: 'MODEL',
      status: 'DONE',
      stop_reason: 'tool_use',
      input_tokens: 812,
      output_tokens: 64,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
      latency_ms: 1830,
      cost_usd: 0.003,
      attempts: 1,
      request_id: 'req_01',
    });
  });

  it('shows cache tokens, retries, re-runs, errors and failures only when they happened', () => {
    const json = lines((ev) => {
      const cached = model('end_turn', 20, 5, {
        usage: { inputTokens: 20, outputTokens: 5, cacheReadInputTokens: 4000, cacheCreationInputTokens: 300 },
        attempts: 3,
      });
      ev.modelStep!({ run, worker: 'w', seq: 5, response: cached, latencyMs: 900, costUsd: 0 });
      ev.toolStarted!({ run, worker: 'w', seq: 2, toolName: 'charge', toolUseId: 'toolu_9', resumed: true });
      ev.toolStep!({ run, worker: 'w', seq: 2, toolName: 'charge', toolUseId: 'toolu_9', status: 'ERROR', latencyMs: 7 });
      ev.runClaimed!({ run, worker: 'w', resumedAtSeq: 0 });
      ev.runFinished!({ run, worker: 'w', status: 'FAILED', error: 'model call failed (HTTP 400)', tokensUsed: 12 });
      ev.leaseLost!({ runId: RUN_ID, worker: 'w' });
      ev.attemptEnded!({ runId: RUN_ID, worker: 'w', reason: 'crash', error: new Error('boom') });
    });
    expect(json.map(formatPretty)).toEqual([
      'w run=6f1c0a52 seq=5 MODEL stop=end_turn in=20 out=5 cache_read=4000 cache_write=300 latency=900ms attempts=3',
      'w run=6f1c0a52 seq=2 TOOL charge id=toolu_9 started again (resumed)',
      'w run=6f1c0a52 seq=2 TOOL charge id=toolu_9 error 7ms',
      'w run=6f1c0a52 claimed',
      'WARN w run=6f1c0a52 FAILED tokens=12 error=model call failed (HTTP 400)',
      'WARN w run=6f1c0a52 lease lost',
      'ERROR w run=6f1c0a52 attempt ended (crash) err=boom',
    ]);
  });

  it('prints any other line as its message and scalar fields', () => {
    expect(formatPretty({ level: 30, time: 1, worker: 'w', run_id: RUN_ID, step_seq: 2, msg: 'calling the ticket API', page: 3 })).toBe(
      'w run=6f1c0a52 seq=2 calling the ticket API page=3',
    );
    expect(formatPretty({ level: 40, time: 1, msg: 'claim failed', err: { type: 'Error', message: 'connection reset' } })).toBe(
      'WARN claim failed err=connection reset',
    );
  });
});
