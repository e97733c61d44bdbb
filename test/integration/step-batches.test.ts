/**
 * The step path's writes of many runs at once go out as batches (src/store/write-batches.ts): fewer
 * statements than writes, and each run's outcome exactly what it would have been alone.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseLostError, StepNotStartedError } from '../../src/domain/errors.ts';
import type { Lease, ModelCheckpoint, ToolStart } from '../../src/ports/engine-store.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { storedEvents, testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
let store: RunStore;
const statements = new Map<string, number>();

beforeAll(async () => {
  db = await testDatabase();
  // The pool as the store sees it, counting the named statements it sends.
  const counting: pg.Pool = Object.create(db.pool);
  counting.query = ((config: unknown, ...rest: unknown[]) => {
    const name = (config as { name?: string } | null)?.name;
    if (name) statements.set(name, (statements.get(name) ?? 0) + 1);
    return (db.pool.query as (...a: unknown[]) => unknown)(config, ...rest);
  }) as pg.Pool['query'];
  store = new RunStore(counting);
});
afterAll(async () => {
  await db.close();
});

/** Statements sent under `name`, alone or as a batch. */
const sent = (name: string) => (statements.get(`durable_agent_${name}`) ?? 0) + (statements.get(`durable_agent_${name}_batch`) ?? 0);

async function claimed(n: number, worker = 'W'): Promise<{ id: string; lease: Lease }[]> {
  await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED' WHERE status IN ('QUEUED', 'RUNNING')`);
  for (let i = 0; i < n; i++) await newRun(db.records, `run ${i}`);
  const runs = await db.store.claim({ worker, leaseMs: 60_000 }, n);
  expect(runs).toHaveLength(n);
  return runs.map((r) => ({ id: r.id, lease: r.lease }));
}

function modelStep(seq: number, text: string, tokens: number): ModelCheckpoint {
  return {
    seq,
    request: { model: 'test-model', maxTokens: 100, systemDigest: null, toolsDigest: null },
    content: [
      { type: 'text', text },
      { type: 'tool_use', id: `toolu_${text}`, name: 'lookup', input: { key: text } },
    ],
    stopReason: 'tool_use',
    usage: { inputTokens: tokens, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
    budgetTokens: tokens + 1,
    attempts: 1,
    costUsd: 0.5,
    latencyMs: 7,
  };
}

const nextTool = (text: string): ToolStart => ({ seq: 2, toolUseId: `toolu_${text}`, toolName: 'lookup', input: { key: text } });

async function eventTypes(runId: string, started = false): Promise<string[]> {
  return (await storedEvents(db.pool, runId)).map((e) => e.type).filter((t) => started || t !== 'run.started');
}

describe('batched step writes', () => {
  it('write the steps of many runs in fewer statements, each run getting its own rows, totals and events in order', async () => {
    const runs = await claimed(40);
    const model = sent('checkpoint_model');
    const tool = sent('finish_tool');

    const written = await Promise.all(
      runs.map((r, i) => store.checkpointModel(r.id as never, r.lease, modelStep(1, `r${i}`, 10 + i), { startNext: nextTool(`r${i}`) })),
    );
    expect(written.map((w) => w.tokensUsed)).toEqual(runs.map((_, i) => 11 + i));
    expect(written.every((w) => w.nextStarted && !w.cancelRequested)).toBe(true);
    const finished = await Promise.all(
      runs.map((r, i) =>
        store.finishTool(r.id as never, r.lease, { toolUseId: `toolu_r${i}`, seq: 2, status: 'DONE', result: `value ${i}`, latencyMs: 2 }),
      ),
    );
    expect(finished.map((w) => w.tokensUsed)).toEqual(runs.map((_, i) => 11 + i));

    expect(sent('checkpoint_model') - model).toBeLessThan(runs.length);
    expect(sent('finish_tool') - tool).toBeLessThan(runs.length);
    for (const [i, r] of runs.entries()) {
      const steps = await db.store.steps(r.id as never);
      expect(steps.map((s) => [s.seq, s.kind, s.status, s.toolUseId, s.response])).toEqual([
        [1, 'MODEL', 'DONE', null, modelStep(1, `r${i}`, 0).content],
        [2, 'TOOL', 'DONE', `toolu_r${i}`, `value ${i}`],
      ]);
      expect(await eventTypes(r.id)).toEqual(['step.finished', 'step.started', 'tool.started', 'tool.finished', 'step.finished']);
      // Stored as the worker wrote it (key order and all): a resumed run replays the same conversation.
      const { rows } = await db.pool.query(`SELECT response FROM durable_agent.run_step WHERE run_id = $1 AND seq = 1`, [r.id]);
      expect(rows[0].response).toBe(JSON.stringify(modelStep(1, `r${i}`, 0).content));
      expect(await db.records.state(r.id as never)).toMatchObject({ tokensUsed: 11 + i, costUsd: 0.5 });
    }
  });

  it('fence each run on its own: a run claimed by another worker meanwhile writes nothing, the others land', async () => {
    const runs = await claimed(6);
    // The first writes go out alone while slots are free; the last ones share a batch: 4 and 5 are in it.
    const lost = runs[5]!;
    await expireLease(db.pool, lost.id);
    const [taken] = await db.store.claim({ worker: 'other', leaseMs: 60_000 }, 1);
    expect(taken?.id).toBe(lost.id);

    const before = sent('checkpoint_model');
    const outcomes = await Promise.allSettled(
      runs.map((r, i) => store.checkpointModel(r.id as never, r.lease, modelStep(1, `f${i}`, 5), { startNext: nextTool(`f${i}`) })),
    );
    expect(sent('checkpoint_model') - before).toBe(5);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
    expect((outcomes[5] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect(await db.store.steps(lost.id as never)).toEqual([]);
    expect(await eventTypes(lost.id)).toEqual([]);
    for (const r of runs.filter((r) => r !== lost))
      expect((await db.store.steps(r.id as never)).map((s) => s.kind)).toEqual(['MODEL', 'TOOL']);

    const results = await Promise.allSettled(
      runs.map((r, i) =>
        store.finishTool(r.id as never, r.lease, {
          toolUseId: `toolu_f${i === 4 ? 'x' : i}`,
          seq: 2,
          status: 'DONE',
          result: 'ok',
          latencyMs: 1,
        }),
      ),
    );
    expect(results.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected']);
    expect((results[5] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect((results[4] as PromiseRejectedResult).reason).toBeInstanceOf(StepNotStartedError);
    expect((await db.store.steps(runs[4]!.id as never)).map((s) => s.status)).toEqual(['DONE', 'STARTED']);
  });

  it('a write the database refuses fails alone: the other runs of its batch land', async () => {
    const runs = await claimed(8);
    // Step 1 of run 5 is there already: writing it again breaks the step's primary key.
    await store.checkpointModel(runs[5]!.id as never, runs[5]!.lease, modelStep(1, 'first', 1));
    const before = sent('checkpoint_model_alone'); // steps that start no tool call
    const outcomes = await Promise.allSettled(runs.map((r, i) => store.checkpointModel(r.id as never, r.lease, modelStep(1, `p${i}`, 3))));
    expect(outcomes.map((o) => o.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect((outcomes[5] as PromiseRejectedResult).reason).toMatchObject({ code: '23505' });
    // Four alone while slots were free, the other four in one batch that failed, then each of them alone.
    expect(sent('checkpoint_model_alone') - before).toBe(4 + 1 + 4);
    expect(await db.records.state(runs[5]!.id as never)).toMatchObject({ tokensUsed: 2 });
    for (const [i, r] of runs.entries()) {
      if (i !== 5) expect((await db.store.steps(r.id as never)).map((s) => s.response)).toEqual([modelStep(1, `p${i}`, 0).content]);
    }
  });

  it("write each claimed run's run.started, the lost one's excepted, and say which runs are followed", async () => {
    const runs = await claimed(6);
    const lost = runs[5]!;
    await expireLease(db.pool, lost.id);
    await db.store.claim({ worker: 'other', leaseMs: 60_000 }, 1);
    await db.pool.query(
      `INSERT INTO durable_agent.run_event_watch (run_id, watcher, expires_at) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')`,
      [runs[4]!.id],
    );
    const before = sent('events_claimed');

    const outcomes = await Promise.allSettled(runs.map((r) => store.eventsClaimed(r.id as never, r.lease, 1)));
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value.followed : 'lost'))).toEqual([false, false, false, false, true, 'lost']);
    expect((outcomes[5] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect(sent('events_claimed') - before).toBeLessThan(runs.length);
    for (const r of runs) expect(await eventTypes(r.id, true)).toEqual(r === lost ? [] : ['run.started']);
  });

  it('skip the next tool call of a run whose cancel is pending, in a batch with runs that go on', async () => {
    const runs = await claimed(6);
    await db.pool.query(`UPDATE durable_agent.run SET cancel_requested = true WHERE id = $1`, [runs[5]!.id]);
    const written = await Promise.all(
      runs.map((r, i) => store.checkpointModel(r.id as never, r.lease, modelStep(1, `c${i}`, 5), { startNext: nextTool(`c${i}`) })),
    );
    expect(written.map((w) => [w.nextStarted, w.cancelRequested])).toEqual([...Array(5).fill([true, false]), [false, true]]);
    expect((await db.store.steps(runs[5]!.id as never)).map((s) => s.kind)).toEqual(['MODEL']);
    expect(await eventTypes(runs[5]!.id)).toEqual(['step.finished']);
    expect(await eventTypes(runs[4]!.id)).toEqual(['step.finished', 'step.started', 'tool.started']);
  });

  it("land the results of a run's parallel tool calls, with other runs' at the same time", async () => {
    const runs = await claimed(3);
    const [a] = runs;
    await store.checkpointModel(a!.id as never, a!.lease, modelStep(1, 'p', 1));
    for (const [seq, use] of [
      [2, 'toolu_p1'],
      [3, 'toolu_p2'],
      [4, 'toolu_p3'],
    ] as const) {
      await store.startTool(a!.id as never, a!.lease, { seq, toolUseId: use, toolName: 'lookup' });
    }
    for (const r of runs.slice(1)) await store.startTool(r.id as never, r.lease, { seq: 1, toolUseId: 'toolu_o', toolName: 'lookup' });
    const results = await Promise.all([
      ...['toolu_p1', 'toolu_p2', 'toolu_p3'].map((use) =>
        store.finishTool(a!.id as never, a!.lease, { toolUseId: use, status: 'DONE', result: use, latencyMs: 1 }),
      ),
      ...runs
        .slice(1)
        .map((r) => store.finishTool(r.id as never, r.lease, { toolUseId: 'toolu_o', status: 'DONE', result: 'o', latencyMs: 1 })),
    ]);
    expect(results).toHaveLength(5);
    expect((await db.store.steps(a!.id as never)).map((s) => [s.seq, s.status, s.response])).toEqual([
      [1, 'DONE', modelStep(1, 'p', 0).content],
      [2, 'DONE', 'toolu_p1'],
      [3, 'DONE', 'toolu_p2'],
      [4, 'DONE', 'toolu_p3'],
    ]);
    for (const r of runs.slice(1)) expect((await db.store.steps(r.id as never)).map((s) => s.status)).toEqual(['DONE']);
  });

  it('end runs in a batch: the run ends with its last step, run.finished after the step, a followed run announced', async () => {
    const runs = await claimed(6);
    await db.pool.query(
      `INSERT INTO durable_agent.run_event_watch (run_id, watcher, expires_at) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')`,
      [runs[5]!.id],
    );
    const listener = new (await import('pg')).default.Client({ connectionString: db.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query('LISTEN durable_agent_run_event');
    const before = sent('checkpoint_model_final');

    const ends = await Promise.all(
      runs.map((r, i) =>
        store.checkpointModel(r.id as never, r.lease, modelStep(1, `e${i}`, 4), { end: { status: 'SUCCEEDED', output: `out ${i}` } }),
      ),
    );
    expect(ends.every((e) => !e.nextStarted)).toBe(true);
    expect(sent('checkpoint_model_final') - before).toBe(5);
    for (const [i, r] of runs.entries()) {
      expect(await db.records.state(r.id as never)).toMatchObject({
        status: 'SUCCEEDED',
        output: `out ${i}`,
        tokensUsed: 5,
        lockedUntil: null,
      });
      expect(await eventTypes(r.id)).toEqual(['step.finished', 'run.finished']);
    }
    await waitFor('the followed run announced', async () => heard.some((h) => h.startsWith(runs[5]!.id)));
    expect(heard.every((h) => h.startsWith(runs[5]!.id))).toBe(true);
    await listener.end();
  });

  it('tell a lone write whose run is taken over while it waits for the row that the lease is lost, writing nothing', async () => {
    const runs = await claimed(1);
    const [r] = runs;
    await store.startTool(r!.id as never, r!.lease, { seq: 1, toolUseId: 'toolu_t', toolName: 'lookup' });
    const takeover = await db.pool.connect();
    await takeover.query('BEGIN');
    await takeover.query(`UPDATE durable_agent.run SET locked_by = 'other', lease_token = gen_random_uuid() WHERE id = $1`, [r!.id]);
    // Settled as a pair from the start: either may reject while the COMMIT's own answer is on its way.
    const writes = Promise.allSettled([
      store.checkpointModel(r!.id as never, r!.lease, modelStep(2, 't', 1)),
      store.finishTool(r!.id as never, r!.lease, { toolUseId: 'toolu_t', status: 'DONE', result: 'late', latencyMs: 1 }),
    ]);
    await waitFor('both writes waiting on the run row', async () => {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return rows[0].n === 2;
    });
    await takeover.query('COMMIT');
    takeover.release();
    const [model, tool] = await writes;
    expect((model as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect((tool as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect((await db.store.steps(r!.id as never)).map((s) => [s.seq, s.status])).toEqual([[1, 'STARTED']]);
  });
});
