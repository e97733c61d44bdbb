/**
 * How an attempt that does not finish its run ends: the cause recorded on the run, the lease released
 * at once, the time of the next attempt — and a release that can neither overflow nor fail silently.
 */
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { logEvents } from '../../src/observability/log-events.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { apiServer } from '../support/api-server.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let api: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  api = apiServer(db, { agent: 'test-agent', model: 'm', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 10 });
});
afterAll(async () => {
  await api.close();
  await db.close();
});

const getRun = async (id: string) => (await api.inject({ method: 'GET', url: `/api/runs/${id}` })).json();

/** A logger whose lines the test can read. */
function capturedLogger() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { lines, logger: createLogger({ level: 'info', destination }) };
}

describe('a crash of the driver', () => {
  it('records the cause on the run, releases the lease at once and counts the attempt', async () => {
    const run = await newRun(db.records, 'the model client has a bug');
    const llm = new ScriptedLlm(() => {
      throw new TypeError("Cannot read properties of undefined (reading 'content')");
    });
    const ended: { runId: string; reason: string }[] = [];
    const w = testWorker(db.store, llm, [], {
      name: 'A',
      leaseMs: 60_000,
      events: [{ attemptEnded: (e) => ended.push({ runId: e.runId, reason: e.reason }) }],
    });
    await expect(w.runOnce()).rejects.toThrow(TypeError);

    const after = await db.records.state(run.id);
    // Claimable now, not when the minute-long lease would have lapsed.
    expect(after).toMatchObject({ status: 'QUEUED', lockedBy: null, lockedUntil: null, attempts: 1 });
    expect(after.lastError).toMatchObject({ message: "TypeError: Cannot read properties of undefined (reading 'content')", attempt: 1 });
    expect(ended).toEqual([{ runId: run.id, reason: 'crash' }]);
    const json = await getRun(run.id);
    expect(json.lastError).toEqual({ message: after.lastError!.message, at: after.lastError!.at.toISOString(), attempt: 1 });
    expect(json.nextAttemptAt).toBeNull(); // due at once
    await db.records.cancel(run.id); // out of the way of the next test's worker
  });

  it('still ends a run that crashes every driver at the attempt limit, with the last cause in its error', async () => {
    const run = await newRun(db.records, 'poison');
    const { lines, logger } = capturedLogger();
    const llm = new ScriptedLlm(() => {
      throw new Error('this input breaks the client');
    });
    const w = testWorker(db.store, llm, [], {
      name: 'A',
      leaseMs: 60_000,
      maxRunAttempts: 3,
      pollIntervalMs: 20,
      logger,
      events: [logEvents(logger)],
    });
    await w.start();
    await waitFor('the poison run to fail', async () => (await db.records.state(run.id)).status === 'FAILED', 10_000);
    await w.stop();
    const final = await db.records.state(run.id);
    expect(final.error).toBe('abandoned: claimed 3 times without finishing (limit 3); last error: Error: this input breaks the client');
    expect(final.lastError).toMatchObject({ attempt: 3 });
    expect(llm.seen).toHaveLength(3);
    // Each crash was logged with the run it happened to.
    const crashes = lines.filter((l) => l.event === 'attempt_ended' && l.run_id === run.id);
    expect(crashes).toHaveLength(3);
    expect((crashes[0]!.err as { message: string }).message).toBe('this input breaks the client');
  });
});

describe('release', () => {
  it('takes a delay past the int4 range without overflowing', async () => {
    const run = await newRun(db.records, 'rate limited for a month', { timeoutSeconds: 40 * 86_400 });
    const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 1, []);
    const delayMs = 2 ** 31 + 5_000; // ~24.9 days
    const released = await db.store.release(run.id, claimed!.lease, {
      countAttempt: false,
      providerRequeue: true,
      delayMs,
      error: 'HTTP 429',
    });
    expect(released).toMatchObject({ status: 'QUEUED' });
    const waiting = await db.records.state(run.id);
    expect(Math.abs(waiting.runAt.getTime() - waiting.updatedAt.getTime() - delayMs)).toBeLessThan(1_000);
    expect((await getRun(run.id)).nextAttemptAt).toBe(waiting.runAt.toISOString());
  });

  it('requeues to the deadline a run whose wait would end past it, whatever the wait', async () => {
    for (const delayMs of [3_600_000, 1e300, Number.POSITIVE_INFINITY, Number.NaN]) {
      const run = await newRun(db.records, `wait ${delayMs}`, { timeoutSeconds: 60 });
      const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 1, []);
      expect(claimed?.id).toBe(run.id);
      expect(await db.store.release(run.id, claimed!.lease, { countAttempt: false, delayMs })).toMatchObject({ status: 'QUEUED' });
      const waiting = await db.records.state(run.id);
      expect(waiting.runAt).toEqual(waiting.deadlineAt);
      expect(waiting.nextAttemptAt).toEqual(waiting.deadlineAt);
      await db.records.cancel(run.id); // out of the way of the next round's claim
    }
  });

  it('makes a run whose deadline already passed claimable now, to time out', async () => {
    const run = await newRun(db.records, 'too late', { timeoutSeconds: 1 });
    const [claimed] = await db.store.claim({ worker: 'A', leaseMs: 30_000 }, 1, []);
    await db.pool.query(`UPDATE durable_agent.run SET deadline_at = now() - interval '1 second' WHERE id = $1`, [run.id]);
    await db.store.release(run.id, claimed!.lease, { countAttempt: false, delayMs: 30_000 });
    expect((await db.records.state(run.id)).nextAttemptAt).toBeNull();
    expect((await testWorker(db.store, new ScriptedLlm(), [], { name: 'B' }).runOnce())?.status).toBe('TIMED_OUT');
  });

  it('is tried again and logged when it fails, so the run does not sit RUNNING', async () => {
    const run = await newRun(db.records, 'release fails twice');
    let failures = 0;
    const flaky: typeof db.store = Object.create(db.store, {
      release: {
        value: (...args: Parameters<typeof db.store.release>) =>
          ++failures <= 2
            ? Promise.reject(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' }))
            : db.store.release(...args),
      },
    });
    const { lines, logger } = capturedLogger();
    const llm = new ScriptedLlm(() => {
      throw new Error('crash');
    });
    await expect(testWorker(flaky, llm, [], { name: 'A', leaseMs: 60_000, logger }).runOnce()).rejects.toThrow('crash');
    expect(await db.records.state(run.id as RunId)).toMatchObject({ status: 'QUEUED', lockedBy: null });
    const logged = lines.filter((l) => l.msg === 'release failed; trying again');
    expect(logged.map((l) => l.run_id)).toEqual([run.id, run.id]);
  });
});
