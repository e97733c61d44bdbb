import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker, waitFor, workerListening } from '../support/engine.ts';
import { ScriptedLlm, toolThenTextLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

const sleepTool = (ms: number, onRun?: (runId: string) => void) =>
  defineTool({
    name: 'sleep',
    description: 'waits',
    inputSchema: { type: 'object' },
    async execute(_input, ctx) {
      onRun?.(ctx.runId);
      // Kept: a step that takes this long (longer than a lease, say) is the scenario.
      await new Promise((r) => setTimeout(r, ms));
      return 'slept';
    },
  });

describe('worker', () => {
  it('keeps the lease of a step that runs longer than the lease while its worker is alive (heartbeat)', async () => {
    const run = await newRun(db.records, 'long step');
    const llm = toolThenTextLlm('sleep');
    const a = testWorker(db.store, llm, [sleepTool(2_500)], { name: 'A', leaseMs: 600 });
    const b = testWorker(db.store, llm, [sleepTool(0)], { name: 'B', leaseMs: 600, pollIntervalMs: 50 });
    await a.start();
    await waitFor('A to start the tool', async () => (await db.store.steps(run.id)).some((s) => s.kind === 'TOOL'));
    await b.start(); // B polls every 50 ms for lapsed leases for the whole 2.5 s step
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    await Promise.all([a.stop(), b.stop()]);
    const final = await db.records.state(run.id);
    expect(final.attempts).toBe(1);
    expect((await db.store.steps(run.id)).map((s) => s.worker)).toEqual(['A', 'A', 'A']);
  });

  it('drives 200 runs with three workers: all SUCCEEDED, never two live owners, no duplicate or missing seq', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 200; i++) ids.add((await newRun(db.records, `run ${i}`)).id);
    const live = new Map<string, string>();
    let overlaps = 0;
    const tracking = (worker: string) =>
      defineTool({
        name: 'sleep',
        description: 'marks who is driving the run while it works',
        inputSchema: { type: 'object' },
        async execute(_input, ctx) {
          if (live.has(ctx.runId)) overlaps++;
          live.set(ctx.runId, worker);
          // Kept: the work takes a moment, a window in which a second owner would be seen.
          await new Promise((r) => setTimeout(r, 2));
          live.delete(ctx.runId);
          return worker;
        },
      });
    const workers = ['W1', 'W2', 'W3'].map((name) =>
      testWorker(db.store, toolThenTextLlm('sleep'), [tracking(name)], {
        name,
        concurrency: 8,
        leaseMs: 5_000,
        subscribeUrl: db.url,
      }),
    );
    await Promise.all(workers.map((w) => w.start()));
    await waitFor(
      'all runs to finish',
      async () => {
        const { rows } = await db.pool.query(
          `SELECT count(*)::int AS n FROM durable_agent.run WHERE id = ANY($1) AND status = 'SUCCEEDED'`,
          [[...ids]],
        );
        return rows[0].n === 200;
      },
      60_000,
    );
    await Promise.all(workers.map((w) => w.stop()));

    expect(overlaps).toBe(0);
    const { rows } = await db.pool.query<{ id: string; attempts: number; seqs: number[]; workers: string[] }>(
      `SELECT r.id, r.attempts, array_agg(s.seq ORDER BY s.seq) AS seqs, array_agg(DISTINCT s.worker) AS workers
       FROM durable_agent.run r JOIN durable_agent.run_step s ON s.run_id = r.id WHERE r.id = ANY($1) GROUP BY r.id, r.attempts`,
      [[...ids]],
    );
    expect(rows).toHaveLength(200);
    for (const r of rows) {
      expect(r.seqs).toEqual([1, 2, 3]);
      expect(r.attempts).toBe(1);
      expect(r.workers).toHaveLength(1);
    }
    const byWorker = new Set(rows.map((r) => r.workers[0]));
    expect(byWorker.size).toBe(3); // the load was shared
  });

  it('fails a poison run after the attempt limit while other runs flow', async () => {
    const poison = await newRun(db.records, 'poison');
    const healthy = await Promise.all([1, 2, 3].map((i) => newRun(db.records, `healthy ${i}`)));
    let crashes = 0;
    const killer = defineTool({
      name: 'sleep',
      description: 'kills the worker on the poison run',
      inputSchema: { type: 'object' },
      async execute(_input, ctx) {
        if (ctx.runId === poison.id) {
          crashes++;
          throw new SimulatedCrash('this input kills every worker');
        }
        return 'ok';
      },
    });
    const w = testWorker(db.store, toolThenTextLlm('sleep'), [killer], { name: 'P', leaseMs: 200, pollIntervalMs: 50, maxRunAttempts: 3 });
    await w.start();
    await waitFor('the poison run to be failed', async () => (await db.records.state(poison.id)).status === 'FAILED', 20_000);
    await waitFor('the healthy runs', async () =>
      (await Promise.all(healthy.map((r) => db.records.state(r.id)))).every((r) => r.status === 'SUCCEEDED'),
    );
    await w.stop();
    const final = await db.records.state(poison.id);
    expect(final.error).toMatch(/abandoned: claimed 3 times without finishing \(limit 3\)/);
    expect(crashes).toBe(3);
  });

  it('hands its runs back on shutdown so another worker continues at once, without counting an attempt', async () => {
    const run = await newRun(db.records, 'handback');
    let started!: () => void;
    const toolStarted = new Promise<void>((r) => (started = r));
    const llm = toolThenTextLlm('sleep');
    const a = testWorker(db.store, llm, [sleepTool(300, () => started())], { name: 'A', leaseMs: 60_000, shutdownGraceMs: 5_000 });
    await a.start();
    await toolStarted;
    await a.stop(); // the in-flight tool finishes within the grace period, then the run is handed back
    const handedBack = await db.records.state(run.id);
    // The attempt keeps its number while the run waits; B's claim continues it rather than counting another.
    expect(handedBack).toMatchObject({ status: 'QUEUED', lockedBy: null, attempts: 1 });
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'DONE'],
    ]);
    const b = await testWorker(db.store, llm, [sleepTool(0)], { name: 'B' }).runOnce();
    expect(b?.status).toBe('SUCCEEDED');
    expect(llm.seen).toHaveLength(2);
    expect((await db.records.state(run.id)).attempts).toBe(1);
  });

  it('does not re-run a STARTED non-idempotent tool after a crash: the run waits for a human to decide', async () => {
    const run = await newRun(db.records, 'pay');
    let charges = 0;
    const charge = defineTool({
      name: 'charge_card',
      description: 'charges a card; the payment API has no idempotency key',
      inputSchema: { type: 'object' },
      idempotent: false,
      async execute() {
        charges++;
        throw new SimulatedCrash('died after charging, before recording');
      },
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_pay', 'charge_card', { cents: 500 });
    await expect(testWorker(db.store, llm, [charge], { name: 'A' }).runOnce()).rejects.toThrow(SimulatedCrash);
    await expireLease(db.pool, run.id);
    expect((await testWorker(db.store, llm, [charge], { name: 'B' }).runOnce())?.status).toBeNull();
    expect(charges).toBe(1);
    const waiting = await db.records.state(run.id);
    expect(waiting.status).toBe('WAITING');
    expect(waiting.waiting).toMatchObject({
      kind: 'decision',
      toolCalls: [{ toolUseId: 'toolu_pay', toolName: 'charge_card', input: { cents: 500 } }],
    });
  });

  it('stops at the next guard: cancel, token budget, step cap', async () => {
    const cancelled = await newRun(db.records, 'cancel me');
    const llm = new ScriptedLlm().then(async () => {
      await db.records.cancel(cancelled.id as RunId);
      return (await import('../support/scripted-llm.ts')).response([{ type: 'tool_use', id: 't1', name: 'sleep', input: {} }], 'tool_use', {
        inputTokens: 1,
        outputTokens: 1,
        cacheCreationInputTokens: 0,
        cacheReadInputTokens: 0,
      });
    });
    expect((await testWorker(db.store, llm, [sleepTool(0)], { name: 'A' }).runOnce())?.status).toBe('CANCELLED');
    expect(await db.store.steps(cancelled.id)).toHaveLength(1); // the tool never ran

    const budget = await newRun(db.records, 'budget', { tokenBudget: 150 });
    const looping = new ScriptedLlm((req) => ({
      id: null,
      model: 'm',
      requestId: null,
      attempts: 1,
      stopReason: 'tool_use',
      content: [{ type: 'tool_use', id: `t${req.messages.length}`, name: 'sleep', input: {} }],
      usage: { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 50 },
    }));
    expect((await testWorker(db.store, looping, [sleepTool(0)], { name: 'A' }).runOnce())?.status).toBe('FAILED');
    const b = await db.records.state(budget.id);
    expect(b.error).toBe('token budget exhausted (240 of 150 tokens used)'); // cache reads do not count
    expect(await db.store.steps(budget.id)).toHaveLength(3); // 120 < 150 allowed one more model step: overshoot bounded by one step

    const capped = await newRun(db.records, 'cap', { maxSteps: 3 });
    expect((await testWorker(db.store, looping, [sleepTool(0)], { name: 'A' }).runOnce())?.status).toBe('FAILED');
    expect((await db.records.state(capped.id)).error).toBe('step cap reached (3 of 3 steps)');
  });

  it('wakes on NOTIFY instead of waiting for the poll', async () => {
    let claims = 0;
    const store = new Proxy(db.store, {
      get: (target, key) =>
        key === 'claim'
          ? (...args: Parameters<typeof target.claim>) => target.claim(...args).finally(() => claims++)
          : Reflect.get(target, key, target),
    });
    const w = testWorker(store, toolThenTextLlm('sleep'), [sleepTool(0)], { name: 'N', pollIntervalMs: 60_000, subscribeUrl: db.url });
    await w.start();
    // Its LISTEN connection up, and the claims of its start and of that connection over (both found
    // nothing): the next poll is a minute away.
    await workerListening(db.pool);
    await waitFor('the claims of its start and its connection', () => claims >= 2, 5_000);
    const run = await newRun(db.records, 'notify');
    await waitFor('the notified worker to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 10_000);
    await w.stop();
  });
});

describe('model outages', () => {
  it('puts a run back in the queue when the model keeps failing in a passing way, and finishes it later', async () => {
    const { LlmError } = await import('../../src/domain/errors.ts');
    const run = await newRun(db.records, 'overloaded');
    const llm = new ScriptedLlm()
      .thenFail(new LlmError(529, 'Overloaded', { type: 'overloaded_error', retryAfterMs: 300 }))
      .thenText('finally');
    const w = testWorker(db.store, llm, [], { name: 'A', requeueDelayMs: 50 });
    expect(await w.runOnce()).toEqual({ runId: run.id, status: null });
    const waiting = await db.records.state(run.id);
    // The provider's failure is not the run's: the attempt is given back (the next claim continues it),
    // the requeue counted apart, the cause in lastError; `error` waits for the run's end.
    expect(waiting).toMatchObject({ status: 'QUEUED', attempts: 1, providerRequeues: 1, lockedBy: null, error: null });
    expect(waiting.lastError).toMatchObject({ message: expect.stringMatching(/HTTP 529 overloaded_error\): Overloaded/), attempt: 1 });
    expect(waiting.runAt.getTime() - waiting.updatedAt.getTime()).toBeGreaterThanOrEqual(299); // its retry-after
    expect(waiting.nextAttemptAt).toEqual(waiting.runAt);
    expect(await w.runOnce()).toBeNull(); // not claimable before then
    await waitFor('the retry-after to pass', async () => (await db.records.state(run.id)).nextAttemptAt === null);
    expect(await w.runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    expect(await db.records.state(run.id)).toMatchObject({ status: 'SUCCEEDED', output: 'finally', attempts: 1, providerRequeues: 1 });
  });

  it('does not count requeues caused by the provider against the attempt limit', async () => {
    const { LlmError } = await import('../../src/domain/errors.ts');
    const run = await newRun(db.records, 'a long outage');
    const llm = new ScriptedLlm();
    for (let i = 0; i < 4; i++) llm.thenFail(new LlmError(529, 'Overloaded', { type: 'overloaded_error' }));
    llm.thenText('through at last');
    const w = testWorker(db.store, llm, [], { name: 'A', requeueDelayMs: 0, maxRunAttempts: 1 });
    for (let i = 0; i < 4; i++) expect(await w.runOnce()).toEqual({ runId: run.id, status: null });
    expect(await w.runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    expect(await db.records.state(run.id)).toMatchObject({ status: 'SUCCEEDED', attempts: 1, providerRequeues: 4 });
  });

  it('keeps trying through an outage that never ends until the deadline, then times out with the cause', async () => {
    const { LlmError } = await import('../../src/domain/errors.ts');
    const run = await newRun(db.records, 'never gets through', { timeoutSeconds: 3 });
    const llm = new ScriptedLlm(() => {
      throw new LlmError(503, 'Service Unavailable', { type: 'api_error' });
    });
    const w = testWorker(db.store, llm, [], { name: 'A', requeueDelayMs: 50, maxRunAttempts: 2, pollIntervalMs: 20 });
    await w.start();
    await waitFor('the run to time out', async () => (await db.records.state(run.id)).status === 'TIMED_OUT', 20_000);
    await w.stop();
    const final = await db.records.state(run.id);
    expect(final.error).toMatch(/^deadline .* passed$/);
    expect(final.lastError?.message).toMatch(/model call failed \(HTTP 503 api_error\): Service Unavailable/);
    expect(final.providerRequeues).toBeGreaterThan(2); // more than the attempt limit allows claims
    // Each failed call requeued the run, but the last one when it failed at the deadline itself: the
    // run then timed out instead of being requeued.
    expect(llm.seen.length - final.providerRequeues).toBeGreaterThanOrEqual(0);
    expect(llm.seen.length - final.providerRequeues).toBeLessThanOrEqual(1);
  });

  it('requeues a run whose provider asks for a wait past its deadline to the deadline, where it times out', async () => {
    const { LlmError } = await import('../../src/domain/errors.ts');
    const run = await newRun(db.records, 'retry in an hour', { timeoutSeconds: 2 });
    const llm = new ScriptedLlm().thenFail(new LlmError(429, 'Rate limited', { type: 'rate_limit_error', retryAfterMs: 3_600_000 }));
    const w = testWorker(db.store, llm, [], { name: 'A' });
    expect(await w.runOnce()).toEqual({ runId: run.id, status: null });
    const waiting = await db.records.state(run.id);
    expect(waiting).toMatchObject({ status: 'QUEUED', runAt: waiting.deadlineAt, nextAttemptAt: waiting.deadlineAt });
    await db.records.cancel(run.id); // a cancel while it waits takes effect at once
    expect(await db.records.state(run.id)).toMatchObject({ status: 'CANCELLED', nextAttemptAt: null });
  });
});

describe('shutdown and bad logs', () => {
  it('lets a non-idempotent tool finish at shutdown instead of cutting it off, then hands the run back', async () => {
    const run = await newRun(db.records, 'pay at shutdown');
    let started!: () => void;
    const inTool = new Promise<void>((r) => (started = r));
    let charges = 0;
    const charge = defineTool({
      name: 'charge_card',
      description: 'charges a card; cannot be repeated safely',
      inputSchema: { type: 'object' },
      idempotent: false,
      async execute(_input, ctx) {
        started();
        // Kept: a charge that outlasts the 50 ms grace is the scenario.
        await new Promise((r) => setTimeout(r, 400));
        charges++;
        return ctx.signal.aborted ? 'charged (the worker was stopping)' : 'charged';
      },
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_pay', 'charge_card', {}).thenText('paid');
    const a = testWorker(db.store, llm, [charge], { name: 'A', shutdownGraceMs: 50 });
    await a.start();
    await inTool;
    await a.stop(); // the grace period ends while the charge is in flight
    expect(charges).toBe(1);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'QUEUED', attempts: 1 });
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'DONE'],
    ]);
    expect((await testWorker(db.store, llm, [charge], { name: 'B' }).runOnce())?.status).toBe('SUCCEEDED');
    expect(charges).toBe(1);
    expect((await db.records.state(run.id)).attempts).toBe(1);
  });

  it('fails a run whose log cannot be replayed at once, instead of crashing on it until abandoned', async () => {
    const run = await newRun(db.records, 'broken log');
    await db.pool.query(
      `INSERT INTO durable_agent.run_step (run_id, seq, kind, status, tool_name, tool_use_id, response) VALUES ($1, 1, 'TOOL', 'DONE', 'x', 'toolu_nobody_asked', 'r')`,
      [run.id],
    );
    const llm = new ScriptedLlm();
    expect((await testWorker(db.store, llm, [], { name: 'A' }).runOnce())?.status).toBe('FAILED');
    const final = await db.records.state(run.id);
    expect(final).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(final.error).toMatch(/log is inconsistent: step 1: tool step for toolu_nobody_asked/);
    expect(llm.seen).toHaveLength(0);
  });
});

describe('claiming', () => {
  it('never claims again a run it is still driving, even when the lease lapsed (e.g. heartbeats failed)', async () => {
    const run = await newRun(db.records, 'lease lapses under a live driver');
    let executions = 0;
    const slow = sleepTool(1_200, () => executions++); // outlives the 300 ms lease
    // Lease renewals fail (the database is flaky for a while), so the 300 ms lease lapses mid-tool.
    const flaky: typeof db.store = Object.create(db.store, {
      renewLeases: { value: async () => Promise.reject(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' })) },
    });
    const w = testWorker(flaky, toolThenTextLlm('sleep'), [slow], { name: 'A', leaseMs: 300, pollIntervalMs: 50 });
    await w.start();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    await w.stop();
    expect(executions).toBe(1);
    expect((await db.records.state(run.id)).attempts).toBe(1);
  });

  it('ends a handed-back run whose cancel was pending instead of queueing it again', async () => {
    const run = await newRun(db.records, 'cancel then shutdown');
    const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 1);
    expect(claimed?.id).toBe(run.id);
    await db.records.cancel(run.id);
    expect(await db.store.release(run.id, claimed!.lease)).toMatchObject({ status: 'CANCELLED' });
    expect(await db.records.state(run.id)).toMatchObject({ status: 'CANCELLED', error: 'cancelled on request', lockedBy: null });
  });
});
