import { describe, expect, it } from 'vitest';
import { Interned } from '../../src/core/interned.ts';
import type { Run, RunId } from '../../src/domain/types.ts';
import { claimedRun, publicRun } from '../../src/ports/claimed-run.ts';

const run: Run = {
  id: '0190a8c4-0000-7000-8000-000000000001' as RunId,
  agent: 'support',
  agentVersion: 'v3',
  previousRunId: null,
  tenant: 'acme',
  status: 'RUNNING',
  input: 'Where is my parcel?',
  inputContent: null,
  model: 'claude-sonnet-4-6',
  modelOptions: { maxTokens: 512 },
  tokenBudget: 100_000,
  tokensUsed: 1_200,
  costUsd: 0.01,
  costBudgetUsd: null,
  maxSteps: 50,
  deadlineAt: new Date('2026-12-07T20:00:00.000Z'),
  runAt: new Date('2026-12-07T19:00:00.000Z'),
  lockedBy: 'worker-1',
  lockedUntil: new Date('2026-12-07T19:00:30.123Z'),
  cancelRequested: false,
  attempts: 2,
  metadata: { ticket: 'T-1' },
  createdAt: new Date('2026-12-07T18:59:59.999Z'),
  updatedAt: new Date('2026-12-07T19:00:00.500Z'),
  finishedAt: null,
  output: null,
  stopReason: null,
  error: null,
  lastError: { message: 'worker crashed', at: new Date('2026-12-07T19:00:00.000Z'), attempt: 1 },
  nextAttemptAt: null,
  providerRequeues: 0,
  forkedFrom: null,
  waiting: null,
  scheduleId: 'nightly',
  scheduledFor: new Date('2026-12-07T19:00:00.000Z'),
};
const lease = { worker: 'worker-1', leaseMs: 30_000, token: 'secret-token' };

describe('a claimed run', () => {
  it('keeps no Date but its deadline among its own fields', () => {
    const held = claimedRun(run, lease, true, new Interned());
    const dates = Object.entries(held).filter(([, v]) => v instanceof Date);
    expect(dates.map(([k]) => k)).toEqual(['deadlineAt']);
    expect(Object.values(held.times).every((t) => t === null || typeof t === 'number')).toBe(true);
    expect(held).toMatchObject({ hasSteps: true, lease, agent: 'support', scheduleId: 'nightly' });
  });

  it('is the same Run again when handed out, field for field and in the same order, without its lease', () => {
    const out = publicRun(claimedRun(run, lease, false, new Interned()));
    expect(out).toStrictEqual(run);
    expect(Object.keys(out)).toEqual(Object.keys(run));
    // Dates of its own: an observer that changes one changes nothing the engine holds.
    expect(out.deadlineAt).not.toBe(run.deadlineAt);
  });

  it('shares one empty metadata between runs, and hands each out a fresh one', () => {
    const names = new Interned();
    const [a, b] = [claimedRun({ ...run, metadata: {} }, lease, true, names), claimedRun({ ...run, metadata: {} }, lease, true, names)];
    expect(a.metadata).toBe(b.metadata);
    const [outA, outB] = [publicRun(a), publicRun(b)];
    expect(outA.metadata).toEqual({});
    expect(outA.metadata).not.toBe(outB.metadata);
    outA.metadata.note = 'an observer may write here';
    expect(b.metadata).toEqual({});
    expect(claimedRun(run, lease, true, names).metadata).toBe(run.metadata);
  });

  it('hands out a Run that is not a claimed one as it is', () => {
    expect(publicRun(run)).toBe(run);
  });
});
