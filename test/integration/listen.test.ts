/** The LISTEN connection survives its backend being terminated, and its backoff starts over after each success. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen } from '../../src/db/notifications.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

/** The backend pids of this database's LISTEN connections. */
async function listeners(): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'durable-agent-listener' AND query LIKE 'LISTEN %'`,
  );
  return rows.map((r) => r.pid);
}

async function terminate(pid: number): Promise<void> {
  await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
}

describe('LISTEN', () => {
  it('reconnects after its backend is terminated, waiting the first backoff again each time', async () => {
    const heard: string[] = [];
    const waits: number[] = [];
    let connects = 0;
    const sub = listen(
      db.url,
      { test_channel: (p) => heard.push(p) },
      { onConnect: () => connects++, onError: (_e, retryInMs) => waits.push(retryInMs), initialDelayMs: 50 },
    );
    try {
      for (let round = 1; round <= 3; round++) {
        const [pid] = await waitFor(`connect ${round}`, async () => connects === round && (await listeners()).length === 1 && listeners());
        await terminate(pid!);
        await waitFor(`the loss to be noticed (${round})`, async () => waits.length === round);
      }
      await waitFor('the last reconnect', async () => connects === 4 && (await listeners()).length === 1);
      await db.pool.query(`SELECT pg_notify('test_channel', 'still heard')`);
      await waitFor('the notification', async () => heard.includes('still heard'));
    } finally {
      await sub.close();
    }
    // Each connection lost after a successful connect waits the first backoff, not a doubled one.
    expect(waits).toEqual([50, 50, 50]);
  });

  it('doubles the backoff while connecting keeps failing', async () => {
    const waits: number[] = [];
    const url = new URL(db.url);
    url.pathname = '/no_such_database_here';
    const sub = listen(
      url.toString(),
      { test_channel: () => {} },
      { onError: (_e, retryInMs) => waits.push(retryInMs), initialDelayMs: 20, maxDelayMs: 100 },
    );
    await waitFor('five failed connects', async () => waits.length >= 5);
    await sub.close();
    expect(waits.slice(0, 5)).toEqual([20, 40, 80, 100, 100]);
  });

  it('still hears a later NOTIFY after its listener was terminated: a cancel reaches the step in flight', async () => {
    const run = await newRun(db.records, 'cancelled after the reconnect');
    let inFlight!: () => void;
    const started = new Promise<void>((r) => (inFlight = r));
    const llm = new ScriptedLlm()
      .then(
        (_req, options) =>
          new Promise((_, reject) => {
            options!.signal!.addEventListener('abort', () => reject(options!.signal!.reason));
            inFlight();
          }),
      )
      .thenText('done');
    // Lease renewals (the cancel's fallback) are 20 s apart and the poll ten minutes: only a NOTIFY can act in time.
    const w = testWorker(db.store, llm, [], { name: 'L', leaseMs: 60_000, pollIntervalMs: 600_000, databaseUrl: db.url });
    await w.start();
    try {
      await started;
      const [pid] = await waitFor('the worker to listen', async () => (await listeners()).length === 1 && listeners());
      await terminate(pid!);
      await waitFor('the worker to listen again', async () => {
        const now = await listeners();
        return now.length === 1 && now[0] !== pid;
      });
      await db.records.cancel(run.id);
      await waitFor('the cancel to end the run', async () => (await db.records.state(run.id)).status === 'CANCELLED', 5_000);
      const next = await newRun(db.records, 'queued after the reconnect');
      await waitFor('the worker to be woken for it', async () => (await db.records.state(next.id)).status === 'SUCCEEDED', 5_000);
    } finally {
      await w.stop();
    }
  });
});
