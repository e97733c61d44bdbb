import { describe, expect, it } from 'vitest';
import { formatClock } from '../../dashboard/src/format.ts';
import { lastAttemptNote, runStatePhrase, waitingPhrase } from '../../dashboard/src/run-state.ts';
import type { Run } from '../../dashboard/src/types.ts';

const now = new Date('2025-03-04T12:00:00Z');
const ago = (ms: number) => new Date(now.getTime() - ms).toISOString();
const clock = (iso: string) => formatClock(new Date(iso), now);

function run(fields: Partial<Run>): Run {
  return {
    id: '6f1c0a52-0000-4000-8000-000000000000',
    status: 'RUNNING',
    input: 'x',
    inputContent: null,
    modelOptions: null,
    model: 'm',
    agent: 'a',
    tokenBudget: 1,
    tokensUsed: 0,
    costUsd: 0,
    maxSteps: 1,
    deadlineAt: ago(-3_600_000),
    createdAt: ago(300_000),
    updatedAt: ago(0),
    finishedAt: null,
    output: null,
    error: null,
    stopReason: null,
    attempts: 1,
    cancelRequested: false,
    metadata: {},
    waiting: null,
    agentVersion: null,
    previousRunId: null,
    tenant: 'default',
    costBudgetUsd: null,
    providerRequeues: 0,
    lastError: null,
    nextAttemptAt: null,
    forkedFrom: null,
    scheduleId: null,
    scheduledFor: null,
    ...fields,
  };
}

const call = (toolName: string) => ({ toolUseId: `toolu_${toolName}`, toolName, input: {} });

describe("a run's state as its page's header says it", () => {
  it('says what a waiting run waits for, since when, and until when', () => {
    const since = ago(180_000);
    expect(waitingPhrase({ kind: 'approval', since, toolCalls: [call('close_ticket'), call('refund')] }, now)).toBe(
      `waiting for approval of 2 tool calls since ${clock(since)} (3m ago)`,
    );
    const expiresAt = ago(-600_000);
    expect(waitingPhrase({ kind: 'approval', since, toolCalls: [call('close_ticket')], expiresAt }, now)).toBe(
      `waiting for approval of close_ticket since ${clock(since)} (3m ago) · denied if undecided at ${clock(expiresAt)}`,
    );
    expect(waitingPhrase({ kind: 'decision', since, toolCalls: [call('charge_card')] }, now)).toBe(
      `waiting for a decision on charge_card, cut off when its worker stopped, since ${clock(since)} (3m ago)`,
    );
    const wakeAt = ago(-90_000);
    expect(waitingPhrase({ kind: 'timer', since, toolCalls: [call('sleep')], wakeAt }, now)).toBe(
      `sleeping until ${clock(wakeAt)} (in 1m 30s) · since ${clock(since)} (3m ago)`,
    );
  });

  it('never says "running for" of a run that is not running', () => {
    const since = ago(60_000);
    expect(runStatePhrase(run({ status: 'WAITING', waiting: { kind: 'approval', since, toolCalls: [call('x')] } }), now)).toEqual({
      state: 'waiting',
      text: `waiting for approval of x since ${clock(since)} (1m ago)`,
    });
    expect(runStatePhrase(run({ status: 'QUEUED', attempts: 0 }), now)).toEqual({ state: 'queued', text: 'in the queue' });
    const next = ago(-30_000);
    expect(runStatePhrase(run({ status: 'QUEUED', nextAttemptAt: next }), now)).toEqual({
      state: 'retry',
      text: `in the queue until ${clock(next)} (in 30.0 s)`,
    });
    expect(runStatePhrase(run({ status: 'RUNNING' }), now)).toEqual({ state: 'running', text: 'running for 5m 00s' });
    expect(runStatePhrase(run({ status: 'SUCCEEDED', finishedAt: ago(60_000) }), now)).toEqual({ state: 'finished', text: 'took 4m 00s' });
  });

  it("says why an unfinished run's last attempt ended; nothing once the run has finished", () => {
    const lastError = { message: 'model call failed (HTTP 529 overloaded_error): Overloaded', at: ago(20_000), attempt: 1 };
    expect(lastAttemptNote(run({ status: 'QUEUED', lastError }), now)).toBe(
      'Attempt 1 ended 20s ago: model call failed (HTTP 529 overloaded_error): Overloaded',
    );
    expect(lastAttemptNote(run({ status: 'QUEUED', lastError: null }), now)).toBeNull();
    expect(lastAttemptNote(run({ status: 'TIMED_OUT', finishedAt: ago(0), lastError }), now)).toBeNull();
  });
});
