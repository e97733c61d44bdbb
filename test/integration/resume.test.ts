import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain.ts';
import { LeaseLostError } from '../../src/errors.ts';
import type { EngineStore } from '../../src/store/ports.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker } from '../support/engine.ts';
import { ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
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
    const run = await newRun(db.store, 'find x');

    await expect(testWorker(db.store, llm, [crashOnce], { name: 'A' }).runOnce()).rejects.toThrow(SimulatedCrash);
    await expireLease(db.pool, run.id);
    const b = await testWorker(db.store, llm, [crashOnce], { name: 'B' }).runOnce();

    expect(b).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    const final = await db.store.state(run.id);
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

  it('repeats exactly the one model call whose checkpoint a crash prevented', async () => {
    const llm = new ScriptedLlm().thenText('first answer, lost in the crash').thenText('second answer');
    let crashes = 0;
    // The crash lands after the model answered and before its checkpoint commits.
    const crashingStore: EngineStore = Object.create(db.store, {
      checkpointModel: {
        value: async () => {
          crashes++;
          throw new SimulatedCrash('died before the checkpoint');
        },
      },
    });
    const run = await newRun(db.store);

    await expect(testWorker(crashingStore, llm, [], { name: 'A' }).runOnce()).rejects.toThrow(SimulatedCrash);
    expect(await db.store.steps(run.id)).toEqual([]);
    expect((await db.store.state(run.id)).tokensUsed).toBe(0);
    await expireLease(db.pool, run.id);
    await testWorker(db.store, llm, [], { name: 'B' }).runOnce();

    expect(crashes).toBe(1);
    expect(llm.seen).toHaveLength(2);
    expect(llm.seen[1]!.messages).toEqual(llm.seen[0]!.messages); // the same call, repeated once
    const final = await db.store.state(run.id);
    expect(final.status).toBe('SUCCEEDED');
    expect(final.output).toBe('second answer');
    expect(await db.store.steps(run.id)).toHaveLength(1);
  });
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

  it("rejects a late checkpoint from a worker whose lapsed lease another took over, writing nothing", async () => {
    const run = await newRun(db.store);
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
    await expect(db.store.renewLease(run.id, a)).rejects.toBeInstanceOf(LeaseLostError);
    await db.store.release(run.id, a); // a stale hand-back changes nothing either

    const state = await db.store.state(run.id);
    expect(state).toMatchObject({ status: 'RUNNING', lockedBy: 'B', tokensUsed: 0, costUsd: 0, output: null });
    expect(await db.store.steps(run.id)).toEqual([]);
    // B, the owner, writes fine.
    await db.store.checkpointModel(run.id, b, cp(1));
    expect((await db.store.state(run.id)).tokensUsed).toBe(20);
  });

  it('fences a stale driver even when its own worker claimed the run again (same worker name)', async () => {
    const run = await newRun(db.store);
    const [first] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    await expireLease(db.pool, run.id); // e.g. the database was unreachable for longer than the lease
    const [second] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10);
    expect(second?.id).toBe(run.id);
    expect(second!.lease.token).not.toBe(first!.lease.token);
    const stale = first!.lease;
    await expect(db.store.checkpointModel(run.id, stale, cp(1))).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.startTool(run.id, stale, { seq: 1, toolUseId: 't', toolName: 'x' })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.finishTool(run.id, stale, { toolUseId: 't', status: 'DONE', result: 'r', latencyMs: 1 })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.renewLease(run.id, stale)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(db.store.finish(run.id, stale, { status: 'SUCCEEDED' })).rejects.toBeInstanceOf(LeaseLostError);
    expect(await db.store.release(run.id, stale)).toBe(false);
    expect(await db.store.state(run.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'A', tokensUsed: 0 });
    await db.store.checkpointModel(run.id, second!.lease, cp(1));
    // A worker never claims a run it is still driving, lapsed lease or not.
    await expireLease(db.pool, run.id);
    expect(await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 10, [run.id])).toEqual([]);
    await db.store.finish(run.id, second!.lease, { status: 'CANCELLED', error: 'test over' });
  });

  it('a driver whose model call outlives its lease stops with LeaseLostError when another worker took over', async () => {
    const run = await newRun(db.store, 'slow');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const llm = new ScriptedLlm()
      .then(async () => {
        await gate;
        return (await import('../support/scripted-llm.ts')).response([{ type: 'text', text: 'A, late' }], 'end_turn', usage(1, 1));
      })
      .thenText('B answers');
    // No heartbeat can save A: its lease is far shorter than the call and B claims as soon as it lapses.
    const a = testWorker(db.store, llm, [], { name: 'A', leaseMs: 60_000 });
    const attemptA = a.runOnce();
    await new Promise((r) => setTimeout(r, 100));
    await expireLease(db.pool, run.id);
    const b = await testWorker(db.store, llm, [], { name: 'B' }).runOnce();
    expect(b?.status).toBe('SUCCEEDED');
    release();
    await expect(attemptA).rejects.toBeInstanceOf(LeaseLostError);
    const steps = await db.store.steps(run.id as RunId);
    expect(steps.map((s) => [s.worker, (s.response as unknown as { text: string }[])[0]!.text])).toEqual([['B', 'B answers']]);
    expect((await db.store.state(run.id)).output).toBe('B answers');
  });
});
