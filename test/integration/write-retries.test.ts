/**
 * The engine's writes under connection faults, against a real database: a write that never arrived
 * is tried again; a write that committed but whose reply was lost is found and counted once; a lease
 * taken over meanwhile still fences the retry.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DatabaseUnavailableError, LeaseLostError } from '../../src/domain/errors.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { TicketStore } from '../../src/demo/tickets-store.ts';
import { demoTools } from '../../src/demo/demo-tools.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, testWorker } from '../support/engine.ts';
import { type FlakyPool, flakyPool } from '../support/flaky-pool.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let flaky: FlakyPool;
let store: RunStore;
beforeEach(async () => {
  db = await testDatabase();
  flaky = flakyPool(db.pool);
  store = new RunStore(flaky.pool);
});
afterEach(async () => {
  await db.close();
});

const lookup = (executions: string[]) =>
  defineTool({
    name: 'lookup',
    description: 'looks x up',
    inputSchema: { type: 'object' },
    async execute(_input, ctx) {
      executions.push(ctx.idempotencyKey);
      return 'found';
    },
  });

// A model step's checkpoint goes out in the form it needs: with or without streamed events, a next tool call.
const MODEL_STEP = /^durable_agent_checkpoint_model(_streamed)?(_alone)?$/;
const FINAL_MODEL_STEP = /^durable_agent_checkpoint_model_final(_streamed)?$/;

const adminShutdown = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

describe('a write whose reply was lost after it committed', () => {
  it('a model checkpoint: found on the retry, counted once, and the run goes on from it', async () => {
    const run = await newRun(db.records);
    const executions: string[] = [];
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}, 100, 20).thenText('done', 150, 5);
    flaky.inject({ match: MODEL_STEP, when: 'after' });

    expect((await testWorker(store, llm, [lookup(executions)], { name: 'A' }).runOnce())?.status).toBe('SUCCEEDED');

    expect(flaky.fired).toBe(1);
    expect(llm.seen).toHaveLength(2);
    expect(executions).toEqual(['toolu_1']);
    expect(await db.records.state(run.id)).toMatchObject({ tokensUsed: 275, attempts: 1, output: 'done' });
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.kind, s.status])).toEqual([
      [1, 'MODEL', 'DONE'],
      [2, 'TOOL', 'DONE'],
      [3, 'MODEL', 'DONE'],
    ]);
  });

  it('the final checkpoint, which also ended the run', async () => {
    const run = await newRun(db.records);
    const finished: string[] = [];
    const llm = new ScriptedLlm().thenText('the answer', 150, 5);
    flaky.inject({ match: FINAL_MODEL_STEP, when: 'after' });

    const w = testWorker(store, llm, [], { name: 'A', events: [{ runFinished: (e) => finished.push(e.status) }] });
    expect((await w.runOnce())?.status).toBe('SUCCEEDED');

    expect(flaky.fired).toBe(1);
    expect(llm.seen).toHaveLength(1);
    expect(finished).toEqual(['SUCCEEDED']);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'SUCCEEDED', output: 'the answer', tokensUsed: 155 });
    expect(await db.store.steps(run.id)).toHaveLength(1);
  });

  it("a tool step's result: the tool is not run again", async () => {
    const run = await newRun(db.records);
    const executions: string[] = [];
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}).thenText('done');
    flaky.inject({ match: 'durable_agent_finish_tool', when: 'after' });

    expect((await testWorker(store, llm, [lookup(executions)], { name: 'A' }).runOnce())?.status).toBe('SUCCEEDED');

    expect(flaky.fired).toBe(1);
    expect(executions).toEqual(['toolu_1']);
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status, s.response])).toEqual([
      ['MODEL', 'DONE', expect.any(Array)],
      ['TOOL', 'DONE', 'found'],
      ['MODEL', 'DONE', expect.any(Array)],
    ]);
  });

  it('the end of a run', async () => {
    const run = await newRun(db.records, 'cap', { maxSteps: 1 });
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {});
    flaky.inject({ match: 'durable_agent_finish', when: 'after' });

    expect((await testWorker(store, llm, [lookup([])], { name: 'A' }).runOnce())?.status).toBe('FAILED');

    expect(flaky.fired).toBe(1);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'FAILED', error: 'step cap reached (1 of 1 steps)' });
  });
});

describe('a write that never reached the server', () => {
  it('is tried again until it goes through', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}).thenText('done');
    flaky.inject({ match: MODEL_STEP, when: 'before', times: 2, error: adminShutdown });
    flaky.inject({ match: 'durable_agent_finish_tool', when: 'before', times: 2 });

    expect((await testWorker(store, llm, [lookup([])], { name: 'A' }).runOnce())?.status).toBe('SUCCEEDED');

    expect(flaky.fired).toBe(4);
    expect(llm.seen).toHaveLength(2);
    expect(await db.records.state(run.id)).toMatchObject({ status: 'SUCCEEDED', attempts: 1 });
  });

  it('is fenced on the retry when the lease lapsed and another worker claimed the run meanwhile', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().thenText('A answers, too late');
    flaky.inject({
      match: FINAL_MODEL_STEP,
      when: 'before',
      onFire: async () => {
        await expireLease(db.pool, run.id);
        expect(await db.store.claim({ worker: 'B', leaseMs: 30_000 }, 1)).toHaveLength(1);
      },
    });

    await expect(testWorker(store, llm, [], { name: 'A' }).runOnce()).rejects.toBeInstanceOf(LeaseLostError);

    expect(await db.records.state(run.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'B', tokensUsed: 0, output: null });
    expect(await db.store.steps(run.id)).toEqual([]);
  });
});

describe('the built-in tools', () => {
  it('retry a query that failed on the connection instead of answering the model with an error', async () => {
    const tools = demoTools(new TicketStore(flaky.pool));
    const listTickets = tools.find((t) => t.name === 'list_tickets')!;
    flaky.inject({ match: 'FROM durable_agent.demo_ticket', when: 'before', times: 2 });

    const tickets = (await listTickets.execute(
      { customer: 'acme', overdue: true },
      { idempotencyKey: 'k', runId: 'r' as never, signal: new AbortController().signal, log: createLogger({ level: 'silent' }) },
    )) as { id: string }[];

    expect(flaky.fired).toBe(2);
    expect(tickets.map((t) => t.id)).toEqual(['ACME-101', 'ACME-102', 'ACME-104']);
  });

  it('end the attempt when the database stays unreachable: the cause recorded, the attempt not counted, the call left STARTED to run again', async () => {
    const run = await newRun(db.records);
    const tools = demoTools(new TicketStore(flaky.pool), { attempts: 3, baseMs: 1, capMs: 1 });
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'get_ticket', { id: 'ACME-101' });
    flaky.inject({ match: 'FROM durable_agent.demo_ticket', when: 'before', times: 3 });

    await expect(testWorker(db.store, llm, tools, { name: 'A' }).runOnce()).rejects.toThrow(DatabaseUnavailableError);

    expect(flaky.fired).toBe(3);
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'STARTED'],
    ]);
    // Back in the queue at once: an outage is not the run's fault, so the attempt is given back (the
    // next claim continues it rather than counting another).
    const after = await db.records.state(run.id);
    expect(after).toMatchObject({ status: 'QUEUED', attempts: 1, lockedBy: null, error: null });
    expect(after.lastError).toMatchObject({ message: expect.stringMatching(/stayed unreachable/), attempt: 1 });
  });
});
