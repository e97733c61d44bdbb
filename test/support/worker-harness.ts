/**
 * What the tests' worker processes (test/support/*-worker-process.ts) share: their database and pool,
 * the worker options they take from the environment (WORKER_NAME, LEASE_MS), and how they run: start,
 * print {"event":"ready"} for the parent, stop cleanly on SIGTERM.
 */
import { createPool } from '../../src/db/pool.ts';
import type { Worker } from '../../src/engine/worker.ts';

export function workerProcess(poolSize: number) {
  const url = process.env.DATABASE_URL!;
  const pool = createPool(url, poolSize);
  return {
    url,
    pool,
    options: { name: process.env.WORKER_NAME!, leaseMs: Number(process.env.LEASE_MS ?? 1000), pollIntervalMs: 100, databaseUrl: url },
    async serve(worker: Worker): Promise<void> {
      await worker.start();
      console.log(JSON.stringify({ event: 'ready' }));
      process.on(
        'SIGTERM',
        () =>
          void worker
            .stop()
            .then(() => pool.end())
            .then(() => process.exit(0)),
      );
    },
  };
}
