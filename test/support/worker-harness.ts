/**
 * What the tests' worker processes (test/support/*-worker-process.ts) share: their database, pool and store,
 * the worker options they take from the environment (WORKER_NAME, LEASE_MS), and how they run: start,
 * print {"event":"ready"} for the parent, stop cleanly on SIGTERM.
 */
import { createPool } from '../../src/db/pool.ts';
import type { Worker } from '../../src/engine/worker.ts';
import { BATCH_CONNECTIONS } from '../../src/runtime/connection-budget.ts';
import { RunStore } from '../../src/store/run-store.ts';

export function workerProcess(poolSize: number) {
  const url = process.env.DATABASE_URL!;
  const pool = createPool(url, poolSize);
  // As a worker's store has it (start-runtime.ts): the batched writes and the claim on generic plans.
  const batches = createPool(url, BATCH_CONNECTIONS, { genericPlans: true });
  return {
    url,
    pool,
    store: new RunStore(pool, { batches }),
    options: { name: process.env.WORKER_NAME!, leaseMs: Number(process.env.LEASE_MS ?? 1000), pollIntervalMs: 100, databaseUrl: url },
    async serve(worker: Worker): Promise<void> {
      await worker.start();
      console.log(JSON.stringify({ event: 'ready' }));
      process.on(
        'SIGTERM',
        () =>
          void worker
            .stop()
            .then(() => Promise.all([pool.end(), batches.end()]))
            .then(() => process.exit(0)),
      );
    },
  };
}
