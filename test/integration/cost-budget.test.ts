import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.ts';
import { MIN_REPLY_TOKENS } from '../../src/core/cost-clamp.ts';
import { PriceTable } from '../../src/llm/prices.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { defineTool } from '../../src/tools/types.ts';
import { createRuns } from '../../src/runs/runs.ts';
import { InputError } from '../../src/domain/errors.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

// USD per million tokens: $1 in, $10 out (cache writes at $1.25, as providers charge).
const prices = new PriceTable({ 'priced-model': { input: 1, output: 10, cacheWrite: 1.25, cacheRead: 0.1 } });
const costOf = prices.costOf.bind(prices);
const echo = defineTool({ name: 'echo', description: 'echoes', inputSchema: { type: 'object' }, execute: async () => 'echoed' });

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

describe('a run with a money budget', () => {
  it('stops before the step after the call that crossed its budget, FAILED with the figures', async () => {
    const run = await newRun(db.records, 'spend', { model: 'priced-model', costBudgetUsd: 0.01 });
    // 9000 in + 200 out = 0.009 + 0.002 = 0.011 USD: over the 0.01 budget after the first call.
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'echo', {}, 9000, 200).thenText('never asked');
    const metrics = createMetrics({ countRunsByStatus: async () => ({}), queueDepth: async () => ({}) }, { models: ['priced-model'] });
    await testWorker(db.store, llm, [echo], { name: 'W', costOf, events: [metrics.events] }).runOnce();
    const final = await db.records.state(run.id);
    expect(final.status).toBe('FAILED');
    expect(final.error).toBe('cost budget exhausted (0.011 USD of 0.01 USD spent)');
    expect(final.costUsd).toBeCloseTo(0.011, 8);
    expect(final.costBudgetUsd).toBe(0.01);
    expect(llm.seen).toHaveLength(1);
    expect((await db.store.steps(run.id)).map((s) => s.kind)).toEqual(['MODEL']); // the tool never ran
    const text = (await metrics.render()).body;
    expect(text).toMatch(/agent_runs_stopped_by_budget_total\{budget="cost"\} 1/);
  });

  it("clamps max_tokens so the call's worst case fits what is left", async () => {
    const budget = 0.002;
    const run = await newRun(db.records, 'be brief', { model: 'priced-model', costBudgetUsd: budget });
    // The model writes as much as it is allowed, and is billed for an input as long as the request's bytes.
    const llm = new ScriptedLlm().then((req) => {
      const inputTokens = Buffer.byteLength(JSON.stringify({ system: req.system, tools: req.tools, messages: req.messages }));
      return response([{ type: 'text', text: 'x'.repeat(10) }], 'max_tokens', usage(inputTokens, req.maxTokens));
    });
    await testWorker(db.store, llm, [echo], { name: 'W', costOf }).runOnce();
    const maxTokens = llm.seen[0]!.maxTokens;
    expect(maxTokens).toBeLessThan(1024); // the agent's own max_tokens would not have fitted
    expect(maxTokens).toBeGreaterThanOrEqual(MIN_REPLY_TOKENS);
    const final = await db.records.state(run.id);
    expect(final.status).toBe('SUCCEEDED');
    expect(final.costUsd).toBeLessThanOrEqual(budget);
  });

  it('stops before calling when not even a minimal call fits, and the model is never asked', async () => {
    const run = await newRun(db.records, 'nothing fits', { model: 'priced-model', costBudgetUsd: 0.00001 });
    const llm = new ScriptedLlm();
    await testWorker(db.store, llm, [echo], { name: 'W', costOf }).runOnce();
    const final = await db.records.state(run.id);
    expect(final.status).toBe('FAILED');
    expect(final.error).toMatch(/^cost budget exhausted: the next model call could cost up to [\d.e-]+ USD .* only 0.00001 USD is left$/);
    expect(llm.seen).toHaveLength(0);
    expect(final.costUsd).toBe(0);
  });

  it('keeps a run without a money budget unclamped', async () => {
    const run = await newRun(db.records, 'no limit', { model: 'priced-model' });
    const llm = new ScriptedLlm().thenText('fine', 100000, 100);
    await testWorker(db.store, llm, [], { name: 'W', costOf }).runOnce();
    expect(llm.seen[0]!.maxTokens).toBe(1024);
    expect((await db.records.state(run.id)).status).toBe('SUCCEEDED');
  });
});

describe('creating a run with a money budget', () => {
  const defaults = {
    agent: 'a',
    model: 'priced-model',
    tokenBudget: 5000,
    timeoutSeconds: 60,
    maxSteps: 10,
    isPriced: (m: string) => prices.priceOf(m) !== null,
  };
  let app: FastifyInstance;
  beforeAll(() => {
    const metrics = createMetrics(new RunStats(db.pool), { models: [] });
    app = createServer({
      store: db.records,
      listing: new RunListing(db.pool),
      defaults,
      checkDatabase: async () => {},
      metrics: () => metrics.render(),
      logger: false,
    });
  });
  afterAll(async () => {
    await app.close();
  });
  const post = (body: unknown) =>
    app.inject({ method: 'POST', url: '/api/runs', payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  it('shows the budget next to the cost', async () => {
    const res = await post({ input: 'x', costBudgetUsd: 2.5 });
    expect(res.statusCode).toBe(201);
    const got = (await app.inject({ method: 'GET', url: `/api/runs/${res.json().id}` })).json();
    expect(got).toMatchObject({ costUsd: 0, costBudgetUsd: 2.5 });
    const none = (await app.inject({ method: 'GET', url: `/api/runs/${(await post({ input: 'x' })).json().id}` })).json();
    expect(none.costBudgetUsd).toBeNull();
  });

  it('refuses a budget for a model without a price, naming the model', async () => {
    const res = await post({ input: 'x', model: 'mystery-model', costBudgetUsd: 1 });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain('"mystery-model" has no price');
    // The same model without a budget is fine.
    expect((await post({ input: 'x', model: 'mystery-model' })).statusCode).toBe(201);
  });

  it('refuses budgets out of range', async () => {
    for (const costBudgetUsd of [0, -1, 10_000.01, 'lots']) expect((await post({ input: 'x', costBudgetUsd })).statusCode).toBe(400);
    expect((await post({ input: 'x', costBudgetUsd: 10_000 })).statusCode).toBe(201);
  });

  it('applies DEFAULT_COST_BUDGET_USD, in the library too, and refuses it for an unpriced model', async () => {
    const runs = createRuns({
      store: db.records,
      listing: new RunListing(db.pool),
      defaults: { ...defaults, costBudgetUsd: 0.5 },
      waits: null as never,
    });
    expect((await runs.create({ input: 'x' })).costBudgetUsd).toBe(0.5);
    expect((await runs.create({ input: 'x', costBudgetUsd: 3 })).costBudgetUsd).toBe(3);
    await expect(runs.create({ input: 'x', model: 'mystery-model' })).rejects.toThrow(InputError);
    await expect(runs.create({ input: 'x', model: 'mystery-model' })).rejects.toThrow(
      /DEFAULT_COST_BUDGET_USD applies, but model "mystery-model" has no price/,
    );
  });
});
