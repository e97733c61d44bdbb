import { describe, expect, it } from 'vitest';
import { connectionBudget, describeBudget } from '../../src/runtime/connection-budget.ts';

const config = { databasePoolSize: null, workerConcurrency: 100, workerLiveness: 'session' as const };
const direct = { sessionUrl: 'postgres://db/x', transactionPooler: false };
const pooled = { sessionUrl: null, transactionPooler: true };

describe('connectionBudget', () => {
  it('gives a worker on a direct connection its few connections for batched step writes, besides its pool', () => {
    const b = connectionBudget(config, direct, { api: true, worker: true });
    expect(b).toEqual({ pool: 30, batches: 4, leaseKeeper: 1, sessions: 5 });
    expect(describeBudget(b, direct)).toBe('up to 40 connections (a pool of 30, 4 for step writes, 1 for leases, 5 sessions)');
  });

  it('gives none to the API alone, nor behind a transaction pooler, where the step writes share the pool', () => {
    expect(connectionBudget(config, direct, { api: true })).toEqual({ pool: 10, batches: 0, leaseKeeper: 0, sessions: 3 });
    const b = connectionBudget(config, pooled, { worker: true });
    expect(b).toEqual({ pool: 24, batches: 0, leaseKeeper: 1, sessions: 0 });
    expect(describeBudget(b, pooled)).toBe(
      'up to 25 connections (a pool of 24, 1 for leases, 0 sessions) (the pool and leases through the transaction pooler)',
    );
  });

  it('keeps DATABASE_POOL_SIZE for the pool alone', () => {
    expect(connectionBudget({ ...config, databasePoolSize: 7 }, direct, { worker: true })).toMatchObject({
      pool: 7,
      batches: 4,
    });
  });
});
