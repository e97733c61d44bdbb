/**
 * The driver's decisions end to end, through a worker and a real database: what a stop reason means
 * when the content says otherwise, what the budget and the cost count, and the deadline between steps.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Usage } from '../../src/domain/types.ts';
import type { EngineEvents } from '../../src/ports/engine-events.ts';
import { LlmError } from '../../src/domain/errors.ts';
import type { LlmCallOptions } from '../../src/llm/types.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await db.close();
});

const lookup = (executions: string[] = []) =>
  defineTool({
    name: 'lookup',
    description: 'looks something up',
    inputSchema: { type: 'object' },
    async execute(_input, ctx) {
      executions.push(ctx.idempotencyKey);
      return 'found it';
    },
  });

/** One cent per token of any kind: easy to check sums. */
const centPerToken = (_model: string, u: Usage) =>
  (u.inputTokens + u.outputTokens + u.cacheCreationInputTokens + u.cacheReadInputTokens) / 100;

describe('stop reasons and content', () => {
  it.each(['end_turn', 'stop_sequence'])(
    'runs the tools a reply asks for under %s and sends their results back before finishing',
    async (stopReason) => {
      const run = await newRun(db.records);
      const executions: string[] = [];
      const warnings: Parameters<NonNullable<EngineEvents['stepWarning']>>[0][] = [];
      const llm = new ScriptedLlm()
        .then(() =>
          response(
            [
              { type: 'text', text: 'let me look' },
              { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} },
            ],
            stopReason,
            usage(10, 2),
          ),
        )
        .thenText('the answer, having seen the result');

      const done = await testWorker(db.store, llm, [lookup(executions)], {
        name: 'W',
        events: [{ stepWarning: (e) => warnings.push(e) }],
      }).runOnce();

      expect(done?.status).toBe('SUCCEEDED');
      expect(executions).toEqual(['toolu_1']);
      expect(llm.seen).toHaveLength(2);
      expect(llm.seen[1]!.messages.at(-1)).toEqual({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found it' }],
      });
      expect((await db.records.state(run.id)).output).toBe('the answer, having seen the result');
      expect(warnings.map((w) => [w.seq, w.warning, w.detail])).toEqual([
        [1, 'tool-use-under-stop-reason', expect.stringContaining(`"${stopReason}"`)],
      ]);
    },
  );

  it('fails at once a reply that stops for tool use but holds no tool_use block', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm(() => response([{ type: 'text', text: 'I will use a tool' }], 'tool_use', usage(10, 2)));

    expect((await testWorker(db.store, llm, [lookup()], { name: 'W' }).runOnce())?.status).toBe('FAILED');

    expect(llm.seen).toHaveLength(1);
    const final = await db.records.state(run.id);
    expect(final.error).toBe('the model stopped to use a tool (stop_reason "tool_use") but its reply holds no tool_use block');
    expect(final).toMatchObject({ output: 'I will use a tool', stopReason: 'tool_use', tokensUsed: 12 });
  });
});

describe('budget and cost', () => {
  it("asks for no more output than the budget has left, and records the request's max_tokens as sent", async () => {
    await newRun(db.records, 'budget', { tokenBudget: 300 });
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}, 200, 20).thenText('done', 50, 5);

    expect((await testWorker(db.store, llm, [lookup()], { name: 'W' }).runOnce())?.status).toBe('SUCCEEDED');

    expect(llm.seen.map((r) => r.maxTokens)).toEqual([300, 80]); // MAX_TOKENS is 1024; then 300 - 220 left
    const [run] = (await db.pool.query('SELECT id FROM durable_agent.run')).rows as { id: string }[];
    const steps = await db.store.steps(run!.id as never);
    expect(steps.filter((s) => s.kind === 'MODEL').map((s) => s.request?.maxTokens)).toEqual([300, 80]);
  });

  it("counts the usage of a call's failed attempts in the step, the run's tokens and its cost", async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().then(() => ({
      ...response([{ type: 'text', text: 'after a retry' }], 'end_turn', usage(100, 10)),
      attempts: 2,
      failedAttemptsUsage: usage(100, 40), // the first attempt was cut off mid-stream, and billed
    }));

    await testWorker(db.store, llm, [], { name: 'W', costOf: centPerToken }).runOnce();

    expect(await db.records.state(run.id)).toMatchObject({ status: 'SUCCEEDED', tokensUsed: 250, costUsd: 2.5 });
    expect((await db.store.steps(run.id))[0]).toMatchObject({ inputTokens: 200, outputTokens: 50, costUsd: 2.5, attempts: 2 });
  });

  it('counts what failed attempts were billed when the call fails for good', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().thenFail(new LlmError(400, 'prompt is too long', { type: 'invalid_request_error', usage: usage(70, 5) }));

    expect((await testWorker(db.store, llm, [], { name: 'W', costOf: centPerToken }).runOnce())?.status).toBe('FAILED');

    expect(await db.records.state(run.id)).toMatchObject({ tokensUsed: 75, costUsd: 0.75 });
  });

  it('hands what a requeued call was billed to the release', async () => {
    await newRun(db.records);
    const requeues: unknown[] = [];
    const llm = new ScriptedLlm().thenFail(new LlmError(529, 'Overloaded', { type: 'overloaded_error', usage: usage(30, 0) }));
    const events: EngineEvents = { attemptEnded: (e) => e.reason === 'requeued' && requeues.push(e.error) };

    await testWorker(db.store, llm, [], { name: 'W', costOf: centPerToken, events: [events] }).runOnce();

    expect(requeues).toMatchObject([{ unrecorded: { usage: usage(30, 0), costUsd: 0.3 } }]);
  });

  it("passes the run's deadline to the model call", async () => {
    const run = await newRun(db.records);
    let options: LlmCallOptions | undefined;
    const llm = new ScriptedLlm().then((_req, o) => {
      options = o;
      return response([{ type: 'text', text: 'ok' }], 'end_turn', usage(1, 1));
    });
    await testWorker(db.store, llm, [], { name: 'W' }).runOnce();
    expect(options?.deadlineAt).toEqual(run.deadlineAt);
  });
});

describe('the deadline', () => {
  it('ends a run TIMED_OUT when its deadline passes between steps, without another model call', async () => {
    const run = await newRun(db.records, 'slow work', { timeoutSeconds: 60 });
    let clock = Date.now();
    const slowTool = defineTool({
      name: 'lookup',
      description: 'takes two minutes (on the test clock)',
      inputSchema: { type: 'object' },
      async execute() {
        clock = run.deadlineAt.getTime() + 1;
        return 'found it, too late';
      },
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', {}).thenText('never asked');

    const done = await testWorker(db.store, llm, [slowTool], { name: 'W', now: () => new Date(clock) }).runOnce();

    expect(done?.status).toBe('TIMED_OUT');
    expect(llm.seen).toHaveLength(1);
    const final = await db.records.state(run.id);
    expect(final).toMatchObject({ status: 'TIMED_OUT', error: `deadline ${run.deadlineAt.toISOString()} passed` });
    expect((await db.store.steps(run.id)).map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'DONE'],
    ]);
  });
});

describe('tool results', () => {
  it('stores at most 1 MiB of a result and sends the model exactly the text stored, with the note', async () => {
    const run = await newRun(db.records);
    const huge = defineTool({
      name: 'fetch',
      description: 'a 3 MB page',
      inputSchema: { type: 'object' },
      execute: async () => 'p'.repeat(3_000_000),
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'fetch', {}).thenText('read it');

    expect((await testWorker(db.store, llm, [huge], { name: 'W' }).runOnce())?.status).toBe('SUCCEEDED');

    const stored = (await db.store.steps(run.id))[1]!.response as string;
    expect(Buffer.byteLength(stored)).toBeLessThanOrEqual(1024 * 1024);
    expect(stored).toMatch(/\[result cut: the tool returned 3000000 bytes; only the first \d+ are shown above\]$/);
    expect(llm.seen[1]!.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: stored }],
    });
  });
});
