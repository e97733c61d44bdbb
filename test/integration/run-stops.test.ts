/**
 * What stops a run in flight from outside its driver — a cancel, its deadline, a lost lease, a shutdown —
 * reaches the model call or tool it is in the middle of, and the run ends the way its cause says.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunId, TerminalStatus } from '../../src/domain/types.ts';
import type { EngineEvents } from '../../src/ports/engine-events.ts';
import { CancelSignal, DeadlineSignal } from '../../src/engine/run-stops.ts';
import { LeaseLostError } from '../../src/domain/errors.ts';
import type { LlmCallOptions, LlmRequest } from '../../src/llm/types.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker as newWorker, waitFor } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

// Every worker is stopped after its test, even a failing one, so no test's worker drives another's runs.
const workers: ReturnType<typeof newWorker>[] = [];
const testWorker = (...args: Parameters<typeof newWorker>) => {
  const w = newWorker(...args);
  workers.push(w);
  return w;
};
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
});

/** Resolves once the worker's LISTEN connection is up: a NOTIFY sent before it would be missed. */
const listening = () =>
  waitFor('the LISTEN connection', async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'durable-agent-listener' AND query LIKE 'LISTEN %run_cancel%'`,
    );
    return rows[0]!.n > 0;
  });

/** A model call that runs until its signal fires, and says when and why it was stopped. */
function hangingCall() {
  let started!: () => void;
  const inFlight = new Promise<void>((r) => (started = r));
  const stopped: { reason: unknown; at: number }[] = [];
  const reply = (_req: LlmRequest, options?: LlmCallOptions) =>
    new Promise<never>((_, reject) => {
      const signal = options!.signal!;
      signal.addEventListener('abort', () => {
        stopped.push({ reason: signal.reason, at: performance.now() });
        reject(signal.reason);
      });
      started();
    });
  return { reply, inFlight, stopped };
}

function finishedEvents(): { events: EngineEvents; finished: { runId: string; status: TerminalStatus }[] } {
  const finished: { runId: string; status: TerminalStatus }[] = [];
  return { finished, events: { runFinished: ({ run, status }) => finished.push({ runId: run.id, status }) } };
}

const statusOf = async (id: string) => (await db.records.state(id as RunId)).status;

describe('cancel reaches the step in flight', () => {
  it('through NOTIFY: the model call is aborted at once and the run ends CANCELLED', async () => {
    const run = await newRun(db.records, 'cancel me mid-call');
    const call = hangingCall();
    const { events, finished } = finishedEvents();
    // The lease is a minute long, so a renewal (every 20 s) cannot be what delivers the cancel.
    const w = testWorker(db.store, new ScriptedLlm().then(call.reply), [], {
      name: 'A',
      leaseMs: 60_000,
      databaseUrl: db.url,
      events: [events],
    });
    await w.start();
    await listening();
    await call.inFlight;
    const cancelledAt = performance.now();
    await db.records.cancel(run.id);
    await waitFor('the run to end CANCELLED', async () => (await statusOf(run.id)) === 'CANCELLED', 5_000);
    await w.stop();
    expect(call.stopped).toHaveLength(1);
    expect(call.stopped[0]!.reason).toBeInstanceOf(CancelSignal);
    expect(call.stopped[0]!.at - cancelledAt).toBeLessThan(5_000);
    expect(finished).toEqual([{ runId: run.id, status: 'CANCELLED' }]);
    expect(await db.records.state(run.id)).toMatchObject({ error: 'cancelled on request', attempts: 1, lockedBy: null });
  });

  it('through the lease renewal when the notification is missed', async () => {
    const run = await newRun(db.records, 'cancel me, nobody listening');
    const call = hangingCall();
    const w = testWorker(db.store, new ScriptedLlm().then(call.reply), [], { name: 'A', leaseMs: 900 }); // no LISTEN
    await w.start();
    await call.inFlight;
    await db.records.cancel(run.id);
    await waitFor('the run to end CANCELLED', async () => (await statusOf(run.id)) === 'CANCELLED', 5_000);
    await w.stop();
    expect(call.stopped.map((s) => s.reason)).toEqual([expect.any(CancelSignal)]);
  });

  it('lets a non-idempotent tool in flight finish and records it before the run ends CANCELLED', async () => {
    const run = await newRun(db.records, 'cancel me mid-payment');
    let started!: () => void;
    const inTool = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const paid = new Promise<void>((r) => (release = r));
    const charge = defineTool({
      name: 'charge_card',
      description: 'cannot be repeated safely',
      inputSchema: { type: 'object' },
      idempotent: false,
      async execute() {
        started();
        await paid;
        return 'charged';
      },
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_pay', 'charge_card', {});
    const w = testWorker(db.store, llm, [charge], { name: 'A', databaseUrl: db.url });
    await w.start();
    await listening();
    await inTool;
    await db.records.cancel(run.id);
    release();
    await waitFor('the run to end CANCELLED', async () => (await statusOf(run.id)) === 'CANCELLED', 5_000);
    await w.stop();
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status, s.response])).toEqual([
      ['MODEL', 'DONE', expect.any(Array)],
      ['TOOL', 'DONE', 'charged'],
    ]);
    expect(llm.seen).toHaveLength(1);
  });

  it('ends a handed-back run whose cancel was pending CANCELLED, and reports it finished', async () => {
    const run = await newRun(db.records, 'cancel pending at shutdown');
    const call = hangingCall();
    const { events, finished } = finishedEvents();
    // Neither LISTEN nor a renewal within the test: the cancel is still pending when the worker hands back.
    const w = testWorker(db.store, new ScriptedLlm().then(call.reply), [], {
      name: 'A',
      leaseMs: 60_000,
      shutdownGraceMs: 0,
      events: [events],
    });
    await w.start();
    await call.inFlight;
    await db.records.cancel(run.id);
    await w.stop();
    expect(await db.records.state(run.id)).toMatchObject({ status: 'CANCELLED', error: 'cancelled on request' });
    expect(finished).toEqual([{ runId: run.id, status: 'CANCELLED' }]);
  });
});

describe('the deadline reaches the step in flight', () => {
  it('aborts the model call at the deadline and ends the run TIMED_OUT', async () => {
    const run = await newRun(db.records, 'too slow', { timeoutSeconds: 1 });
    const call = hangingCall();
    const { events, finished } = finishedEvents();
    const w = testWorker(db.store, new ScriptedLlm().then(call.reply), [], { name: 'A', leaseMs: 60_000, events: [events] });
    await w.start();
    await waitFor('the run to end TIMED_OUT', async () => (await statusOf(run.id)) === 'TIMED_OUT', 5_000);
    await w.stop();
    expect(call.stopped.map((s) => s.reason)).toEqual([expect.any(DeadlineSignal)]);
    const final = await db.records.state(run.id);
    expect(final.error).toBe(`deadline ${final.deadlineAt.toISOString()} passed`);
    expect(finished).toEqual([{ runId: run.id, status: 'TIMED_OUT' }]);
  });
});

describe('a lease lost under a live worker', () => {
  it('is detected by the renewal and aborts the model call in flight; the attempt is given back', async () => {
    const run = await newRun(db.records, 'taken over while it waits on the model');
    const call = hangingCall();
    const lost: string[] = [];
    const w = testWorker(db.store, new ScriptedLlm().then(call.reply), [], {
      name: 'A',
      leaseMs: 600,
      databaseUrl: db.url,
      events: [{ leaseLost: ({ runId }) => lost.push(runId) }],
    });
    await w.start();
    await call.inFlight;
    // As if A had stalled past its lease: B finds the lease lapsed and claims the run.
    const [taken] = await waitFor('B to take the run over', async () => {
      await db.pool.query(`UPDATE durable_agent.run SET locked_until = now() - interval '1 second' WHERE id = $1`, [run.id]);
      const claimed = await db.store.claim({ worker: 'B', leaseMs: 60_000 }, 1);
      return claimed.length ? claimed : null;
    });
    expect(taken).toMatchObject({ id: run.id, attempts: 2 });
    await waitFor('the call in flight to be aborted', async () => call.stopped.length === 1, 5_000);
    expect(call.stopped[0]!.reason).toBeInstanceOf(LeaseLostError);
    await waitFor('A to give the lost attempt back', async () => (await db.records.state(run.id)).attempts === 1, 5_000);
    await w.stop();
    expect(lost).toEqual([run.id]);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'B' }); // B's lease is untouched
    expect(await db.store.forgiveLapsedAttempt(run.id, taken!.lease)).toBe(false); // only the lost lease's claim, once
  });
});

describe('the shutdown grace expiring', () => {
  it('hands runs back, lets a non-idempotent tool finish, and stops waiting for a step that ignores its signal at the force limit', async () => {
    const honours = await newRun(db.records, 'honours its signal');
    const ignores = await newRun(db.records, 'ignores its signal');
    const pays = await newRun(db.records, 'pays');
    let started = 0;
    let charges = 0;
    let paying!: () => void;
    const inTool = new Promise<void>((r) => (paying = r));
    const charge = defineTool({
      name: 'charge_card',
      description: 'cannot be repeated safely; outlives grace and force limit',
      inputSchema: { type: 'object' },
      idempotent: false,
      async execute() {
        paying();
        // Kept: a charge that outlasts the grace and the force limit is the scenario.
        await new Promise((r) => setTimeout(r, 1_500));
        charges++;
        return 'charged';
      },
    });
    const llm = new ScriptedLlm((req, options) => {
      started++;
      const input = req.messages[0]!.content;
      if (input === 'pays')
        return response([{ type: 'tool_use', id: 'toolu_pay', name: 'charge_card', input: {} }], 'tool_use', usage(10, 5));
      if (input === 'ignores its signal') return new Promise(() => {}); // deaf to its signal, never settles
      return new Promise((_, reject) => options!.signal!.addEventListener('abort', () => reject(options!.signal!.reason)));
    });
    const w = testWorker(db.store, llm, [charge], { name: 'A', concurrency: 3, shutdownGraceMs: 100, shutdownForceMs: 400 });
    await w.start();
    await inTool;
    await waitFor('all three runs to be in a step', async () => started === 3);
    await w.stop();

    expect(charges).toBe(1);
    for (const run of [honours, ignores, pays]) {
      expect(await db.records.state(run.id)).toMatchObject({ status: 'QUEUED', lockedBy: null, attempts: 1 });
    }
    expect((await db.store.steps(pays.id)).map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'DONE'],
    ]);
    expect(await db.store.steps(ignores.id)).toEqual([]);
  });
});
