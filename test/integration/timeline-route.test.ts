import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import type { RunRecords } from '../../src/store/run-records.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

it('GET /api/runs/{id}/timeline reads the steps without their bodies: a 5 MB tool result is never selected', async () => {
  const run = await newRun(db.records);
  const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1);
  await db.store.startTool(run.id, claimed!.lease, { seq: 1, toolUseId: 'toolu_big', toolName: 'fetch' });
  await db.store.finishTool(run.id, claimed!.lease, {
    toolUseId: 'toolu_big',
    status: 'DONE',
    result: 'x'.repeat(5_000_000),
    latencyMs: 1,
  });
  const bodyReads: string[] = [];
  // Every read that selects bodies is refused, so the route can only answer from the timeline read.
  const store: RunRecords = Object.create(db.records, {
    stepsThrough: { value: async () => bodyReads.push('stepsThrough') && Promise.reject(new Error('stepsThrough selects bodies')) },
  });
  const api = createServer({
    store,
    listing: new RunListing(db.pool),
    defaults: { agent: 'demo', model: 'm', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 10 },
    checkDatabase: async () => {},
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    logger: false,
  });
  try {
    const res = await api.inject(`/api/runs/${run.id}/timeline`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject([{ seq: 1, kind: 'TOOL', status: 'DONE', toolUseId: 'toolu_big' }]);
    expect(res.body.length).toBeLessThan(1000);
    expect(bodyReads).toEqual([]);
  } finally {
    await api.close();
  }
});
