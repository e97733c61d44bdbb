import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { armCrashPoint, CrashPointError, disarmCrashPoints } from '../../src/engine/crash-points.ts';
import { LeaseLostError } from '../../src/domain/errors.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

// A database per test: `runOnce` claims whatever run is claimable, so a run another test left behind
// must not be there to be picked up.
let db: TestDatabase;
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  disarmCrashPoints();
  await db.close();
});

/** A tool that records each execution's idempotency key. */
const recordingTool = (name: string, executed: string[], opts: { idempotent?: boolean } = {}) =>
  defineTool({
    name,
    description: 'records its calls',
    inputSchema: { type: 'object' },
    ...opts,
    async execute(_input, ctx) {
      executed.push(ctx.idempotencyKey);
      return `${name} ran`;
    },
  });

describe('resume after a crash', () => {
  it('resumes after a crash inside a tool without repeating the model call', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', { q: 'x' }, 100, 20).thenText('done', 150, 5);
    const executed: string[] = [];
    const crashOnce = defineTool({
      name: 'lookup',
      description: 'looks x up',
      inputSchema: { type: 'object' },
      async execute(_input, ctx) {
        executed.push(ctx.idempotencyKey);
        if (executed.length === 1) throw new SimulatedCrash('worker A dies here');
        return 'found';
      },
    });
    const run = await newRun(db.records, 'find x');

    await expect(testWorker(db.store, llm, [crashOnce], { name: 'A' }).runOnce()).rejects.toThrow(SimulatedCrash);
    await expireLease(db.pool, run.id);
    const b = await testWorker(db.store, llm, [crashOnce], { name: 'B' }).runOnce();

    expect(b).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    const final = await db.records.state(run.id);
    expect(final.status).toBe('SUCCEEDED');
    expect(final.output).toBe('done');
    expect(final.attempts).toBe(2);
    expect(final.tokensUsed).toBe(100 + 20 + 150 + 5);
    expect(llm.seen).toHaveLength(2); // the first model call was not repeated
    expect(executed).toEqual(['toolu_1', 'toolu_1']);
    const steps = await db.store.steps(run.id);
    expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
      [1, 'MODEL', 'DONE', 'A'],
      [2, 'TOOL', 'DONE', 'B'],
      [3, 'MODEL', 'DONE', 'B'],
    ]);
    // B's model call carried the tool result for A's tool_use, as one user message.
    expect(llm.seen[1]!.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found' }],
    });
  });

  it('repeats exactly the one model call whose checkpoint a crash prevented (crash after the reply, before the commit)', async () => {
    const llm = new ScriptedLlm().thenText('first answer, lost in the crash').thenText('second answer');
    const run = await newRun(db.records);
    armCrashPoint({ point: 'after-model-response', runId: run.id });

    await expect(testWorker(db.store, llm, [], { name: 'A' }).runOnce()).rejects.toThrow(CrashPointError);
    expect(await db.store.steps(run.id)).toEqual([]);
    expect((await db.records.state(run.id)).tokensUsed).toBe(0);
    await expireLease(db.pool, run.id);
    await testWorker(db.store, llm, [], { name: 'B' }).runOnce();

    expect(llm.seen).toHaveLength(2);
    expect(llm.seen[1]!.messages).toEqual(llm.seen[0]!.messages); // the same call, repeated once
    const final = await db.records.state(run.id);
    expect(final).toMatchObject({ status: 'SUCCEEDED', output: 'second answer', tokensUsed: 155 });
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.worker])).toEqual([[1, 'B']]);
  });

  it('repeats nothing when the crash comes right after the checkpoint committed (the reply to the commit lost)', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}, 100, 20).thenText('done', 150, 5);
    const executed: string[] = [];
    const run = await newRun(db.records);
    armCrashPoint({ point: 'after-checkpoint', runId: run.id });

    await expect(testWorker(db.store, llm, [recordingTool('lookup', executed)], { name: 'A' }).runOnce()).rejects.toThrow(CrashPointError);
    // The checkpoint is in: the model step, its tokens, and the STARTED row of the (idempotent) tool written with it.
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.kind, s.status])).toEqual([
      [1, 'MODEL', 'DONE'],
      [2, 'TOOL', 'STARTED'],
    ]);
    expect((await db.records.state(run.id)).tokensUsed).toBe(120);
    expect(executed).toEqual([]);
    await expireLease(db.pool, run.id);
    expect(await testWorker(db.store, llm, [recordingTool('lookup', executed)], { name: 'B' }).runOnce()).toEqual({
      runId: run.id,
      status: 'SUCCEEDED',
    });

    expect(llm.seen).toHaveLength(2); // the first model call was not repeated
    expect(executed).toEqual(['toolu_1']);
    expect(await db.records.state(run.id)).toMatchObject({ output: 'done', tokensUsed: 275, attempts: 2 });
  });

  it('runs a non-idempotent tool normally after a crash before its STARTED row was written', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_pay', 'charge', {}).thenText('paid');
    const charges: string[] = [];
    const run = await newRun(db.records);
    armCrashPoint({ point: 'before-tool-start', runId: run.id });

    await expect(
      testWorker(db.store, llm, [recordingTool('charge', charges, { idempotent: false })], { name: 'A' }).runOnce(),
    ).rejects.toThrow(CrashPointError);
    expect((await db.store.steps(run.id)).map((s) => s.kind)).toEqual(['MODEL']); // nothing says it started
    await expireLease(db.pool, run.id);
    expect(
      (await testWorker(db.store, llm, [recordingTool('charge', charges, { idempotent: false })], { name: 'B' }).runOnce())?.status,
    ).toBe('SUCCEEDED');
    expect(charges).toEqual(['toolu_pay']);
    expect(llm.seen).toHaveLength(2);
  });

  it.each(['after-tool-effect', 'before-tool-finish'] as const)(
    'runs an idempotent tool again with the same key after a crash at %s, and never the model call before it',
    async (point) => {
      const llm = new ScriptedLlm()
        .thenToolUses([
          { id: 'toolu_a', name: 'lookup', input: {} },
          { id: 'toolu_b', name: 'lookup', input: {} },
        ])
        .thenText('both');
      const executed: string[] = [];
      const run = await newRun(db.records);
      armCrashPoint({ point, runId: run.id, hit: 2 }); // during the second of the two parallel calls

      await expect(testWorker(db.store, llm, [recordingTool('lookup', executed)], { name: 'A' }).runOnce()).rejects.toThrow(
        CrashPointError,
      );
      expect((await db.store.steps(run.id)).map((s) => [s.toolUseId, s.status])).toEqual([
        [null, 'DONE'],
        ['toolu_a', 'DONE'],
        ['toolu_b', 'STARTED'],
      ]);
      await expireLease(db.pool, run.id);
      expect((await testWorker(db.store, llm, [recordingTool('lookup', executed)], { name: 'B' }).runOnce())?.status).toBe('SUCCEEDED');

      expect(executed).toEqual(['toolu_a', 'toolu_b', 'toolu_b']); // the effect repeats once, under its key
      expect(llm.seen).toHaveLength(2);
      expect(llm.seen[1]!.messages.at(-1)).toEqual({
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_a', content: 'lookup ran' },
          { type: 'tool_result', tool_use_id: 'toolu_b', content: 'lookup ran' },
        ],
      });
    },
  );
});

describe('fencing', () => {
  const cp = (seq: number) => ({
    seq,
    request: { model: 'm', maxTokens: 10, systemDigest: null, toolsDigest: null },
    content: [{ type: 'text', text: 'late' }],
    stopReason: 'end_turn',
    usage: usage(10, 10),
    budgetTokens: 20,
    attempts: 1,
    costUsd: 0.5,
    latencyMs: 5,
  });

  it('rejects a late checkpoint from a worker whose lapsed lease another took over, writing nothing', async () => {
    const run = await newRun(db.records);
    const [claimedA] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    expect(claimedA?.id).toBe(run.id);
    await expireLease(db.pool, run.id);
    const [claimedB] = await db.store.claim({ worker: 'B', leaseMs: 30_000 }, 10);
    expect(claimedB?.id).toBe(run.id);
    const a = claimedA!.lease;
    const b = claimedB!.lease;

    await expect(db.store.checkpointModel(run.id, a, cp(1))).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.startTool(run.id, a, { seq: 1, toolUseId: 't', toolName: 'x' })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.finish(run.id, a, { status: 'SUCCEEDED', output: 'A wins' })).rejects.toBeInstanceOf(LeaseLostError);
    expect(await db.store.renewLeases(a, [{ runId: run.id, token: a.token }])).toEqual([]); // not renewed: lost
    await db.store.release(run.id, a); // a stale hand-back changes nothing either

    const state = await db.records.state(run.id);
    expect(state).toMatchObject({ status: 'RUNNING', lockedBy: 'B', tokensUsed: 0, costUsd: 0, output: null });
    expect(await db.store.steps(run.id)).toEqual([]);
    // B, the owner, writes fine.
    await db.store.checkpointModel(run.id, b, cp(1));
    expect((await db.records.state(run.id)).tokensUsed).toBe(20);
  });

  it('a renewal writes only the leases that run out soon, and answers every run still held', async () => {
    const [one, two] = [await newRun(db.records), await newRun(db.records)];
    const claimed = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    const lease = (id: RunId) => claimed.find((c) => c.id === id)!.lease;
    const held = [one, two].map((r) => ({ runId: r.id, token: lease(r.id).token }));
    // `two` was not written for a while: its lease runs out in a second. `one` has a cancel pending.
    await db.pool.query(`UPDATE durable_agent.run SET locked_until = now() + interval '1 second' WHERE id = $1`, [two.id]);
    await db.pool.query(`UPDATE durable_agent.run SET cancel_requested = true WHERE id = $1`, [one.id]);
    const rowOf = async (id: RunId) =>
      (
        await db.pool.query<{ until: Date; xmin: string }>(
          `SELECT locked_until AS until, xmin::text FROM durable_agent.run WHERE id = $1`,
          [id],
        )
      ).rows[0]!;
    const [oneBefore, twoBefore] = [await rowOf(one.id), await rowOf(two.id)];

    const answer = await db.store.renewLeases(lease(one.id), held, 25_000);
    expect(answer.map((r) => r.runId).sort()).toEqual([one.id, two.id].sort());
    expect(answer.find((r) => r.runId === one.id)).toMatchObject({ cancelRequested: true });
    expect(await rowOf(one.id)).toEqual(oneBefore); // still 30 s ahead: checked, not written
    const twoAfter = await rowOf(two.id);
    expect(twoAfter.xmin).not.toBe(twoBefore.xmin);
    expect(twoAfter.until.getTime() - twoBefore.until.getTime()).toBeGreaterThan(25_000);

    // Taken over by B: not answered, fresh lease or not, so A's keeper knows it lost it.
    await expireLease(db.pool, one.id);
    const [byB] = await db.store.claim({ worker: 'B', leaseMs: 30_000 }, 10);
    expect(byB?.id).toBe(one.id);
    expect((await db.store.renewLeases(lease(one.id), held, 25_000)).map((r) => r.runId)).toEqual([two.id]);
    const twoRenewed = await rowOf(two.id);
    expect(await db.store.renewLeases(lease(one.id), held)).toHaveLength(1); // null: renew every one still held…
    expect((await rowOf(two.id)).xmin).not.toBe(twoRenewed.xmin); // …due or not
    expect((await db.records.state(one.id)).lockedBy).toBe('B');
  });

  it('a renewal does not wait for a run a step is writing: the run is answered as held, its lease left to that write', async () => {
    const run = await newRun(db.records);
    const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    const held = [{ runId: run.id, token: claimed!.lease.token }];
    await db.pool.query(`UPDATE durable_agent.run SET locked_until = now() + interval '1 second' WHERE id = $1`, [run.id]);
    const writer = await db.pool.connect();
    try {
      await writer.query('BEGIN');
      await writer.query('SELECT 1 FROM durable_agent.run WHERE id = $1 FOR NO KEY UPDATE', [run.id]); // a step write in flight
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<'waited for the row'>((resolve) => (timer = setTimeout(() => resolve('waited for the row'), 10_000)));
      const answer = await Promise.race([db.store.renewLeases(claimed!.lease, held, 25_000), waited]);
      clearTimeout(timer);
      expect(answer).toMatchObject([{ runId: run.id, token: claimed!.lease.token }]);
    } finally {
      await writer.query('ROLLBACK');
      writer.release();
    }
    const { rows } = await db.pool.query<{ left: number }>(
      `SELECT extract(epoch FROM locked_until - now()) AS left FROM durable_agent.run WHERE id = $1`,
      [run.id],
    );
    expect(rows[0]!.left).toBeLessThan(2); // skipped, not renewed: the next round renews it if no step did
    expect(await db.store.renewLeases(claimed!.lease, held, 25_000)).toHaveLength(1);
    const after = await db.pool.query<{ left: number }>(
      `SELECT extract(epoch FROM locked_until - now()) AS left FROM durable_agent.run WHERE id = $1`,
      [run.id],
    );
    expect(after.rows[0]!.left).toBeGreaterThan(25);
  });

  it('fences a stale driver even when its own worker claimed the run again (same worker name)', async () => {
    const run = await newRun(db.records);
    const [first] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    await expireLease(db.pool, run.id); // e.g. the database was unreachable for longer than the lease
    const [second] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    expect(second?.id).toBe(run.id);
    expect(second!.lease.token).not.toBe(first!.lease.token);
    const stale = first!.lease;
    await expect(db.store.checkpointModel(run.id, stale, cp(1))).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.startTool(run.id, stale, { seq: 1, toolUseId: 't', toolName: 'x' })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.finishTool(run.id, stale, { toolUseId: 't', status: 'DONE', result: 'r', latencyMs: 1 })).rejects.toBeInstanceOf(
      LeaseLostError,
    );
    expect(await db.store.renewLeases(stale, [{ runId: run.id, token: stale.token }])).toEqual([]);
    await expect(db.store.finish(run.id, stale, { status: 'SUCCEEDED' })).rejects.toBeInstanceOf(LeaseLostError);
    expect(await db.store.release(run.id, stale)).toBe(false);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'A', tokensUsed: 0 });
    await db.store.checkpointModel(run.id, second!.lease, cp(1));
    // A worker never claims a run it is still driving, lapsed lease or not.
    await expireLease(db.pool, run.id);
    expect(await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10, [run.id])).toEqual([]);
    await db.store.finish(run.id, second!.lease, { status: 'CANCELLED', error: 'test over' });
  });

  it('a driver whose model call outlives its lease stops with LeaseLostError when another worker took over', async () => {
    const run = await newRun(db.records, 'slow');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let calling!: () => void;
    const aIsCalling = new Promise<void>((r) => (calling = r));
    const llm = new ScriptedLlm()
      .then(async () => {
        calling();
        await gate;
        return response([{ type: 'text', text: 'A, late' }], 'end_turn', usage(1, 1));
      })
      .thenText('B answers');
    // No heartbeat can save A: its lease is made to lapse while its call is in flight, and B claims at once.
    const a = testWorker(db.store, llm, [], { name: 'A', leaseMs: 60_000 });
    const attemptA = a.runOnce();
    await aIsCalling;
    await expireLease(db.pool, run.id);
    const b = await testWorker(db.store, llm, [], { name: 'B' }).runOnce();
    expect(b?.status).toBe('SUCCEEDED');
    release();
    await expect(attemptA).rejects.toBeInstanceOf(LeaseLostError);
    const steps = await db.store.steps(run.id as RunId);
    expect(steps.map((s) => [s.worker, (s.response as unknown as { text: string }[])[0]!.text])).toEqual([['B', 'B answers']]);
    expect((await db.records.state(run.id)).output).toBe('B answers');
  });
});
