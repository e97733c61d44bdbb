/**
 * Values PostgreSQL cannot store, or that break a constraint, must not make a run pay again and again:
 * each test drives a run with a real worker (short lease, attempt limit 3) and counts the model calls.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Run } from '../../src/domain/types.ts';
import { replay } from '../../src/core/replay.ts';
import { LlmError } from '../../src/domain/errors.ts';
import type { LlmClient } from '../../src/llm/types.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await db.close();
});

const FFFD = '\uFFFD';

/** Drives `run` with a worker that would give a crash-looping run up after 3 claims; returns the run as it ended. */
async function driveToEnd(run: Run, llm: LlmClient, tools: Tool[] = []): Promise<Run> {
  const w = testWorker(db.store, llm, tools, { name: 'W', leaseMs: 300, pollIntervalMs: 50, maxRunAttempts: 3 });
  await w.start();
  try {
    await waitFor('the run to end', async () => !['QUEUED', 'RUNNING'].includes((await db.records.state(run.id)).status), 30_000);
  } finally {
    await w.stop();
  }
  return db.records.state(run.id);
}

const echo = (executions: string[]) =>
  defineTool({
    name: 'echo',
    description: 'returns its text',
    inputSchema: { type: 'object' },
    async execute(input: { text: string }, ctx) {
      executions.push(ctx.idempotencyKey);
      return input.text;
    },
  });

describe('text PostgreSQL cannot store', () => {
  it('stores a model reply holding U+0000 with U+FFFD and finishes after one call', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().then(() => response([{ type: 'text', text: 'a\u0000b' }], 'end_turn', usage(10, 2)));

    const final = await driveToEnd(run, llm);

    expect(llm.seen).toHaveLength(1);
    expect(final).toMatchObject({ status: 'SUCCEEDED', output: `a${FFFD}b`, attempts: 1, tokensUsed: 12 });
    expect((await db.store.steps(run.id))[0]!.response).toEqual([{ type: 'text', text: `a${FFFD}b` }]);
  });

  it('cleans NULs and lone surrogates in tool_use ids, names, inputs and results, and sends the model what the log holds', async () => {
    const run = await newRun(db.records);
    const executions: string[] = [];
    const llm = new ScriptedLlm()
      .then(() =>
        response(
          [
            { type: 'text', text: 'look\ud800' },
            { type: 'tool_use', id: 'toolu_\u0000x', name: 'echo', input: { text: 'bin\u0000ary \udc00 file' } },
          ],
          'tool_use',
          usage(10, 2),
        ),
      )
      .thenText('done');

    const final = await driveToEnd(run, llm, [echo(executions)]);

    expect(final).toMatchObject({ status: 'SUCCEEDED', output: 'done', attempts: 1 });
    expect(llm.seen).toHaveLength(2);
    expect(executions).toEqual([`toolu_${FFFD}x`]);
    const steps = await db.store.steps(run.id);
    expect(steps.map((s) => [s.kind, s.toolUseId, s.response])).toEqual([
      [
        'MODEL',
        null,
        [
          { type: 'text', text: `look${FFFD}` },
          { type: 'tool_use', id: `toolu_${FFFD}x`, name: 'echo', input: { text: `bin${FFFD}ary ${FFFD} file` } },
        ],
      ],
      ['TOOL', `toolu_${FFFD}x`, `bin${FFFD}ary ${FFFD} file`],
      ['MODEL', null, [{ type: 'text', text: 'done' }]],
    ]);
    // The worker never knew anything the log does not: its second request is the log's replay.
    expect(llm.seen[1]!.messages).toEqual(replay(run.input, steps.slice(0, 2)).messages);
  });
});

describe("a provider's error message", () => {
  it('holding U+0000 is stored with U+FFFD when the run is requeued: one call per claim, the cause kept', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm()
      .thenFail(new LlmError(429, 'slow\u0000down', { type: 'rate_limit_error', retryAfterMs: 1 }))
      .thenText('done');
    const w = testWorker(db.store, llm, [], { name: 'W', leaseMs: 300, pollIntervalMs: 50, maxRunAttempts: 3, requeueDelayMs: 1 });
    await w.start();
    try {
      await waitFor('the run to end', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
    } finally {
      await w.stop();
    }
    const final = await db.records.state(run.id);
    expect(llm.seen).toHaveLength(2);
    expect(final).toMatchObject({ attempts: 1, providerRequeues: 1 });
    expect(final.lastError?.message).toContain(`slow${FFFD}down`);
  });
});

describe('a reused tool_use id', () => {
  it('fails the run at once, naming the id, when the model reuses an id from an earlier turn', async () => {
    const run = await newRun(db.records);
    const executions: string[] = [];
    const llm = new ScriptedLlm(() =>
      response([{ type: 'tool_use', id: 'toolu_same', name: 'echo', input: { text: 'x' } }], 'tool_use', usage(10, 2)),
    );

    const final = await driveToEnd(run, llm, [echo(executions)]);

    expect(llm.seen).toHaveLength(2); // the turn that reused the id is the last one paid for
    expect(executions).toEqual(['toolu_same']);
    expect(final.status).toBe('FAILED');
    expect(final.error).toBe(
      'the model used tool_use id "toolu_same" in step 3, already used in step 1; tool_use ids must be unique in a conversation, so the run cannot go on',
    );
    expect(final.tokensUsed).toBe(24); // both calls counted
    expect((await db.store.steps(run.id)).map((s) => [s.seq, s.kind])).toEqual([
      [1, 'MODEL'],
      [2, 'TOOL'],
      [3, 'MODEL'],
    ]);
  });

  it('fails the run at once when one turn uses an id twice, running neither call', async () => {
    const run = await newRun(db.records);
    const executions: string[] = [];
    const twice = [
      { type: 'tool_use', id: 'toolu_d', name: 'echo', input: { text: '1' } },
      { type: 'tool_use', id: 'toolu_d', name: 'echo', input: { text: '2' } },
    ];
    const llm = new ScriptedLlm(() => response(twice, 'tool_use', usage(10, 2)));

    const final = await driveToEnd(run, llm, [echo(executions)]);

    expect(llm.seen).toHaveLength(1);
    expect(executions).toEqual([]);
    expect(final).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(final.error).toMatch(/tool_use id "toolu_d" twice in step 1/);
  });
});

describe('token counts out of range', () => {
  it('counts a negative usage as 0 instead of lowering tokensUsed', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().then(() => response([{ type: 'text', text: 'ok' }], 'end_turn', usage(-5000, 7)));
    const final = await driveToEnd(run, llm);
    expect(final).toMatchObject({ status: 'SUCCEEDED', tokensUsed: 7 });
    expect((await db.store.steps(run.id))[0]).toMatchObject({ inputTokens: 0, outputTokens: 7 });
  });

  it('clamps a count past the int4 range and finishes after one call', async () => {
    const run = await newRun(db.records);
    const llm = new ScriptedLlm().then(() => response([{ type: 'text', text: 'ok' }], 'end_turn', usage(2 ** 33, 1.6)));
    const final = await driveToEnd(run, llm);
    expect(llm.seen).toHaveLength(1);
    expect(final).toMatchObject({ status: 'SUCCEEDED', tokensUsed: 2 ** 31 - 1 + 2 });
    expect((await db.store.steps(run.id))[0]).toMatchObject({ inputTokens: 2 ** 31 - 1, outputTokens: 2 });
  });
});

describe('a write the database refuses for good', () => {
  it('fails the run at once with the cause, counting the paid call, instead of calling the model again', async () => {
    await db.pool.query(`ALTER TABLE durable_agent.run_step ADD CONSTRAINT refuses_forbidden CHECK (response NOT LIKE '%forbidden%')`);
    const run = await newRun(db.records);
    const llm = new ScriptedLlm(() => response([{ type: 'text', text: 'a forbidden answer' }], 'end_turn', usage(40, 2)));

    const final = await driveToEnd(run, llm);

    expect(llm.seen).toHaveLength(1);
    expect(final).toMatchObject({ status: 'FAILED', attempts: 1, tokensUsed: 42 });
    expect(final.error).toMatch(/^could not record model step 1: .*violates check constraint "refuses_forbidden" \(SQLSTATE 23514\)$/);
    expect(await db.store.steps(run.id)).toEqual([]);
  });

  it('fails the run at once when a tool result cannot be recorded, running the tool once', async () => {
    await db.pool.query(`ALTER TABLE durable_agent.run_step ADD CONSTRAINT refuses_forbidden CHECK (response NOT LIKE '%forbidden%')`);
    const run = await newRun(db.records);
    const executions: string[] = [];
    const refused = defineTool({
      name: 'fetch',
      description: 'returns what the database refuses',
      inputSchema: { type: 'object' },
      async execute(_input, ctx) {
        executions.push(ctx.idempotencyKey);
        return 'a forbidden page';
      },
    });
    const llm = new ScriptedLlm(() => response([{ type: 'tool_use', id: 'toolu_1', name: 'fetch', input: {} }], 'tool_use', usage(10, 2)));

    const final = await driveToEnd(run, llm, [refused]);

    expect(executions).toEqual(['toolu_1']);
    expect(llm.seen).toHaveLength(1);
    expect(final).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(final.error).toMatch(/^could not record the result of tool call toolu_1: .*\(SQLSTATE 23514\)$/);
  });
});
