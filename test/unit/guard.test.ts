import { describe, expect, it } from 'vitest';
import { guard, type GuardInput } from '../../src/core/guard.ts';

const now = new Date('2026-01-01T12:00:00Z');
const ok: GuardInput = {
  cancelRequested: false,
  deadlineAt: new Date('2026-01-01T12:05:00Z'),
  tokensUsed: 10,
  tokenBudget: 100,
  steps: 3,
  maxSteps: 10,
};

describe('guard', () => {
  it('lets a run within every limit go on', () => {
    expect(guard(ok, now)).toBeNull();
  });
  it('cancels on request, before anything else', () => {
    expect(guard({ ...ok, cancelRequested: true, tokensUsed: 1000 }, now)).toMatchObject({ status: 'CANCELLED' });
  });
  it('times out once the deadline has passed', () => {
    expect(guard({ ...ok, deadlineAt: now }, now)).toMatchObject({ status: 'TIMED_OUT' });
    expect(guard({ ...ok, deadlineAt: new Date(now.getTime() + 1) }, now)).toBeNull();
  });
  it('fails when the token budget is used up', () => {
    expect(guard({ ...ok, tokensUsed: 100 }, now)).toEqual({
      status: 'FAILED',
      error: 'token budget exhausted (100 of 100 tokens used)',
      budget: 'tokens',
    });
    expect(guard({ ...ok, tokensUsed: 99 }, now)).toBeNull();
  });
  it('fails when the step cap is reached', () => {
    expect(guard({ ...ok, steps: 10 }, now)).toEqual({ status: 'FAILED', error: 'step cap reached (10 of 10 steps)', budget: 'steps' });
  });
  it('fails when the money budget is spent, and never without one', () => {
    expect(guard({ ...ok, costUsd: 0.5, costBudgetUsd: 0.5 }, now)).toEqual({
      status: 'FAILED',
      error: 'cost budget exhausted (0.5 USD of 0.5 USD spent)',
      budget: 'cost',
    });
    expect(guard({ ...ok, costUsd: 0.4999, costBudgetUsd: 0.5 }, now)).toBeNull();
    expect(guard({ ...ok, costUsd: 1e6, costBudgetUsd: null }, now)).toBeNull();
  });
});
