/**
 * How many connections a process may open, told at start so a fleet can be sized against the server's
 * `max_connections` (or a pooler's pool): its pool through DATABASE_URL, a worker's few connections for
 * its step writes and claims, one connection for its lease keeper, and the sessions (a LISTEN
 * each for the worker, the event hub, the scheduler and waits on runs, and the worker's liveness lock),
 * which go to the session URL and need none there is.
 */
import type { Config } from '../config/environment.ts';
import { type Database, poolSizeFor } from '../db/pool.ts';

export interface ConnectionBudget {
  /** The pool's connections through DATABASE_URL (DATABASE_POOL_SIZE, or sized from the process's roles). */
  pool: number;
  /**
   * A worker's connections through DATABASE_URL for the step path's batched writes and its claims,
   * each statement planned once on them (pool.ts, `genericPlans`); none behind a transaction pooler,
   * where those go through the pool.
   */
  batches: number;
  /** The lease keeper's connection through DATABASE_URL (a worker only). */
  leaseKeeper: number;
  /** Sessions on the session URL (DATABASE_DIRECT_URL, or DATABASE_URL without a transaction pooler); none without one. */
  sessions: number;
}

/**
 * The step path's batched writes have at most WRITE_BATCHES.maxInFlight statements in flight per kind
 * (model steps, final model steps, tool results, claims): a few connections carry them, so each batch
 * statement is planned on a few backends rather than on every connection of the pool.
 */
export const BATCH_CONNECTIONS = 4;

export function connectionBudget(
  config: Pick<Config, 'databasePoolSize' | 'workerConcurrency' | 'workerLiveness'>,
  database: Pick<Database, 'sessionUrl' | 'transactionPooler'>,
  roles: { api?: boolean; worker?: boolean },
): ConnectionBudget {
  const worker = roles.worker === true;
  const api = roles.api === true;
  const pool = config.databasePoolSize ?? poolSizeFor(worker ? config.workerConcurrency : 0) + (api ? 6 : 0);
  const batches = worker && !database.transactionPooler ? BATCH_CONNECTIONS : 0;
  if (database.sessionUrl === null) return { pool, batches, leaseKeeper: worker ? 1 : 0, sessions: 0 };
  const listens = (worker ? 1 : 0) + (api ? 1 : 0) + (api || worker ? 1 : 0) + 1; // the last: waits on runs, opened by the first
  const liveness = worker && config.workerLiveness === 'session' ? 1 : 0;
  return { pool, batches, leaseKeeper: worker ? 1 : 0, sessions: listens + liveness };
}

/** "up to 40 connections (a pool of 30, 4 for step writes, 1 for leases, 5 sessions)", for the start banner and log. */
export function describeBudget(b: ConnectionBudget, database: Pick<Database, 'transactionPooler'>): string {
  const parts = [
    `a pool of ${b.pool}`,
    ...(b.batches ? [`${b.batches} for step writes`] : []),
    ...(b.leaseKeeper ? ['1 for leases'] : []),
    `${b.sessions} session${b.sessions === 1 ? '' : 's'}`,
  ];
  const via = database.transactionPooler ? ' (the pool and leases through the transaction pooler)' : '';
  return `up to ${b.pool + b.batches + b.leaseKeeper + b.sessions} connections (${parts.join(', ')})${via}`;
}
