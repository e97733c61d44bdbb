/**
 * A run back in the queue between attempts, as GET /api/runs/{id} shows it: `error` stays empty until
 * the run is finished, and `attempts` counts the attempt its `lastError` names.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunJson } from '../../src/api/schemas.ts';
import { createLlmClient } from '../../src/llm/index.ts';
import { apiServer } from '../support/api-server.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { startFakeAnthropic } from '../support/fake-anthropic.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let app: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  app = apiServer(db, { agent: 'demo', model: 'test-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 });
});
afterAll(async () => {
  await app.close();
  await db.close();
});

async function shown(id: string): Promise<RunJson> {
  const res = await app.inject(`/api/runs/${id}`);
  expect(res.statusCode).toBe(200);
  return res.json();
}

/** A model endpoint nothing listens on: every call is refused. */
async function unreachableModel() {
  const closed = await startFakeAnthropic();
  await closed.close();
  return createLlmClient({
    llmProvider: 'anthropic',
    anthropicApiKey: 'sk-test',
    anthropicBaseUrl: closed.url,
    demoLatencyMs: 0,
    stepTimeoutMs: 5_000,
    maxAttempts: 1,
    retryBaseMs: 1,
    retryCapMs: 1,
    llmStreaming: false,
  });
}

describe('a run requeued after its model was unreachable', () => {
  it('shows the attempt it made, its cause in lastError only, and finishes with that attempt counted once', async () => {
    const run = await newRun(db.records, 'the model is down');
    const down = testWorker(db.store, await unreachableModel(), [], { name: 'A', requeueDelayMs: 0 });
    for (let i = 0; i < 2; i++) expect(await down.runOnce()).toEqual({ runId: run.id, status: null });

    const queued = await shown(run.id);
    expect(queued).toMatchObject({ status: 'QUEUED', finishedAt: null, error: null, attempts: 1, providerRequeues: 2 });
    expect(queued.lastError).toMatchObject({ message: expect.stringMatching(/ECONNREFUSED/), attempt: 1 });

    const up = testWorker(db.store, new ScriptedLlm().thenText('through'), [], { name: 'B' });
    expect(await up.runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });
    const done = await shown(run.id);
    // The outage's attempts were given back: one claim counted, as many as without the outage.
    expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'through', error: null, attempts: 1, providerRequeues: 2 });
  });

  it('keeps error empty and the attempt counted after a crash of the driver, until the run ends', async () => {
    const run = await newRun(db.records, 'crashes once', { agent: 'crashy' });
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1, [], ['crashy']);
    expect(claimed?.id).toBe(run.id);
    expect(await db.store.release(run.id, claimed!.lease, { countAttempt: true, error: 'TypeError: boom' })).toMatchObject({
      status: 'QUEUED',
    });
    const queued = await shown(run.id);
    expect(queued).toMatchObject({ status: 'QUEUED', error: null, attempts: 1, lastError: { message: 'TypeError: boom', attempt: 1 } });

    const [again] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1, [], ['crashy']);
    expect(again).toMatchObject({ id: run.id, attempts: 2 });
    await db.store.release(run.id, again!.lease, { countAttempt: false, providerRequeue: true, error: 'model call failed' });
    expect(await shown(run.id)).toMatchObject({
      status: 'QUEUED',
      error: null,
      attempts: 2,
      lastError: { message: 'model call failed', attempt: 2 },
    });
  });
});
