import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { sleepTool } from '../../src/tools/sleep-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm, toolThenTextLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

const sleeping = (seconds: number) => toolThenTextLlm('sleep', { seconds });

describe('the sleep tool and delayed starts', () => {
  it('wakes a sleeping run at wakeAt with a worker that polls once a minute, after its first worker stopped', async () => {
    const run = await newRun(db.records, 'sleep 2');
    const a = testWorker(db.store, sleeping(2), [sleepTool()], { name: 'A', pollIntervalMs: 60_000, databaseUrl: db.url });
    await a.start();
    const waiting = await waitFor('the run to sleep', async () => {
      const r = await db.records.state(run.id);
      return r.status === 'WAITING' && r;
    });
    await a.stop();
    expect(waiting.waiting).toMatchObject({ kind: 'timer', wakeAt: expect.any(Date) });
    expect(waiting.lockedBy).toBeNull();
    expect(waiting.attempts).toBe(1); // given back: the claim that wakes the run continues this attempt
    const b = testWorker(db.store, sleeping(2), [sleepTool()], { name: 'B', pollIntervalMs: 60_000, databaseUrl: db.url });
    await b.start();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    await b.stop();
    expect((await db.records.state(run.id)).attempts).toBe(1); // waiting is not an attempt: many sleeps never reach the abandon limit
    const tool = (await db.store.steps(run.id as RunId))[1]!;
    expect(tool).toMatchObject({ kind: 'TOOL', status: 'DONE', response: 'slept 2 seconds', worker: 'B' });
    const late = tool.finishedAt!.getTime() - waiting.waiting!.wakeAt!.getTime();
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(2_000);
  });

  it('cancels a sleeping run at once', async () => {
    const run = await newRun(db.records, 'sleep long');
    await testWorker(db.store, sleeping(3600), [sleepTool()], { name: 'A' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('WAITING');
    const cancelled = await db.records.cancel(run.id);
    expect(cancelled.status).toBe('CANCELLED');
    expect(cancelled.finishedAt).not.toBeNull();
  });

  it('gives the model an is_error result for a sleep it cannot take, without waiting', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_s', 'sleep', { seconds: 0 }).thenText('ok');
    const run = await newRun(db.records, 'sleep 0');
    expect((await testWorker(db.store, llm, [sleepTool()], { name: 'A' }).runOnce())?.status).toBe('SUCCEEDED');
    const tool = (await db.store.steps(run.id as RunId))[1]!;
    expect(tool.status).toBe('ERROR');
    expect(tool.response).toMatch(/invalid input for sleep: seconds/);
  });

  it('does not claim a run before its startAt', async () => {
    const startAt = new Date(Date.now() + 1_500);
    const run = await newRun(db.records, 'later', { startAt });
    const llm = new ScriptedLlm().thenText('started');
    const w = testWorker(db.store, llm, [], { name: 'A', pollIntervalMs: 60_000, databaseUrl: db.url });
    await w.start();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
    await w.stop();
    const [step] = await db.store.steps(run.id as RunId);
    expect(step!.startedAt.getTime()).toBeGreaterThanOrEqual(startAt.getTime());
    const r = await db.records.state(run.id);
    expect(r.deadlineAt.getTime() - startAt.getTime()).toBeGreaterThanOrEqual(299_000); // timeoutSeconds counts from startAt
  });

  it('counts a run that came due since the last claim looked as due now, so an idle worker does not wait a poll interval for it', async () => {
    const run = await newRun(db.records, 'due a moment ago', { startAt: new Date(Date.now() + 300) });
    // It comes due (by the database's clock) after a claim 500 ms ago looked.
    await waitFor(
      'the run to come due',
      async () =>
        (await db.pool.query<{ due: boolean }>('SELECT run_at <= now() AS due FROM durable_agent.run WHERE id = $1', [run.id])).rows[0]!
          .due,
      5_000,
    );
    expect(await db.store.nextDueInMs(500)).toBe(0);
    // Looking back no further than now, it is no longer "next": the claim takes it, the timer needn't.
    expect(await db.store.nextDueInMs(0)).not.toBe(0);
    await db.records.cancel(run.id);
  });
});
