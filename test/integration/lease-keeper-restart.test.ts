/**
 * The lease keeper runs on the side thread it shares with the stall sampler. When that thread dies
 * (here: a program's uncaught error), the keeper starts again on a new one with the leases it held and
 * renews them before they run out, so a live worker's run is not taken over.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.ts';
import { runOnSideThread } from '../../src/util/side-thread.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { heldTool, newRun, testWorker, waitFor } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

const LEASE_MS = 3_000;

it('starts again on a new thread when the side thread dies, and the run it holds is not taken over', async () => {
  const { tool: work, started, release } = heldTool();
  const script = () =>
    new ScriptedLlm()
      .then(() => response([{ type: 'tool_use', id: 'toolu_keep', name: 'work', input: {} }], 'tool_use', usage(100, 20)))
      .then(() => response([{ type: 'text', text: 'done' }], 'end_turn', usage(150, 5)));
  const run = await newRun(db.records, 'keep the lease through the side thread dying');
  const lines: string[] = [];
  const a = testWorker(db.store, script(), [work], {
    name: 'keeper-A',
    databaseUrl: db.url,
    liveness: false,
    leaseMs: LEASE_MS,
    logger: createLogger({ level: 'warn', destination: { write: (s: string) => void lines.push(s) } }),
  });
  await a.start();
  // Another worker, ready to take the run over the moment its lease lapses.
  const b = testWorker(db.store, script(), [work], { name: 'keeper-B', databaseUrl: db.url, liveness: false, leaseMs: LEASE_MS });
  try {
    await waitFor('the tool to start', async () => started(), 10_000);
    await b.start();
    const leaseEnd = async () =>
      (await db.pool.query<{ t: Date }>('SELECT locked_until AS t FROM durable_agent.run WHERE id = $1', [run.id])).rows[0]!.t.getTime();
    const killer = runOnSideThread(`setTimeout(() => { throw new Error('the side thread fails'); }, 0);`, null);
    expect((await killer.ended)?.message).toBe('the side thread fails');
    killer.release();
    const before = await leaseEnd();

    // No step is written meanwhile: only the keeper, started again, renews the lease, and before it ran out.
    await waitFor('the lease to be renewed', async () => (await leaseEnd()) > before, 2 * LEASE_MS);
    expect(Date.now()).toBeLessThan(before);
    // A lease's time later it is still kept.
    await new Promise((r) => setTimeout(r, LEASE_MS));
    expect(await leaseEnd()).toBeGreaterThan(Date.now());
    release();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    const steps = await db.store.steps(run.id);
    expect(steps.map((s) => s.worker)).toEqual(['keeper-A', 'keeper-A', 'keeper-A']);
    expect(await db.records.state(run.id)).toMatchObject({ attempts: 1 });
    // The operator is told why the keeper started again.
    expect(lines.map((l) => JSON.parse(l)).filter((l) => l.msg.startsWith('lease renewal failed'))).toEqual([
      expect.objectContaining({ msg: 'lease renewal failed; retrying at the next interval', err_message: 'the side thread fails' }),
    ]);
  } finally {
    release();
    await Promise.all([a.stop(), b.stop()]);
  }
}, 60_000);
