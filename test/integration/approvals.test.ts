import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { defineTool } from '../../src/tools/types.ts';
import { apiServer } from '../support/api-server.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const DEFAULTS = { agent: 'test-agent', model: 'default-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 };

let db: TestDatabase;
let app: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  app = apiServer(db, DEFAULTS);
});
afterAll(async () => {
  await app.close();
  await db.close();
});

const decide = (runId: string, toolUseId: string, body: unknown) =>
  app.inject({
    method: 'POST',
    url: `/api/runs/${runId}/tool-calls/${encodeURIComponent(toolUseId)}/decision`,
    payload: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
const getRun = async (id: string) => (await app.inject({ method: 'GET', url: `/api/runs/${id}` })).json();

/** A tool that needs approval and counts its executions. */
function closeTool(executed: string[], extra: { approvalTimeoutSeconds?: number } = {}) {
  return defineTool<{ ticketId: string }>({
    name: 'close_ticket',
    description: 'closes a ticket',
    inputSchema: { type: 'object', properties: { ticketId: { type: 'string' } } },
    needsApproval: true,
    ...extra,
    async execute(input, ctx) {
      executed.push(`${input.ticketId}:${ctx.idempotencyKey}`);
      return `closed ${input.ticketId}`;
    },
  });
}

describe('approvals', () => {
  it('waits holding nothing, and runs an approved call once when the worker runs it after the decision', async () => {
    const executed: string[] = [];
    const llm = new ScriptedLlm().thenToolUse('toolu_a', 'close_ticket', { ticketId: 'T-1' }).thenText('closed it');
    const worker = testWorker(db.store, llm, [closeTool(executed)], { name: 'W' });
    const run = await newRun(db.records, 'close T-1');
    expect((await worker.runOnce())?.status).toBeNull();

    const waiting = await getRun(run.id);
    expect(waiting).toMatchObject({
      status: 'WAITING',
      waiting: {
        kind: 'approval',
        since: expect.any(String),
        toolCalls: [{ toolUseId: 'toolu_a', toolName: 'close_ticket', input: { ticketId: 'T-1' } }],
      },
    });
    const row = (await db.pool.query('SELECT locked_by, lease_token, run_at FROM durable_agent.run WHERE id = $1', [run.id])).rows[0];
    expect(row.locked_by).toBeNull();
    expect(row.lease_token).toBeNull();
    expect(executed).toEqual([]);
    expect(await worker.runOnce()).toBeNull(); // not claimable while it waits
    const listed = (await app.inject({ method: 'GET', url: '/api/runs?status=WAITING' })).json();
    expect(listed.runs.map((r: { id: string }) => r.id)).toContain(run.id);

    const res = await decide(run.id, 'toolu_a', { decision: 'approve' });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ id: run.id, status: 'QUEUED' });
    expect((await decide(run.id, 'toolu_a', { decision: 'approve' })).statusCode).toBe(202); // the same decision twice
    expect((await decide(run.id, 'toolu_a', { decision: 'deny', reason: 'no' })).statusCode).toBe(409); // contradicts

    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');
    expect(executed).toEqual(['T-1:toolu_a']);
    expect(llm.seen).toHaveLength(2);
    expect((await getRun(run.id)).waiting).toBeNull();
  });

  it('denies with a reason: the tool never runs and the model gets an is_error tool_result holding the reason', async () => {
    const executed: string[] = [];
    const llm = new ScriptedLlm().thenToolUse('toolu_d', 'close_ticket', { ticketId: 'T-2' }).thenText('ok, left it open');
    const worker = testWorker(db.store, llm, [closeTool(executed)], { name: 'W' });
    const run = await newRun(db.records, 'close T-2');
    await worker.runOnce();
    expect((await decide(run.id, 'toolu_d', { decision: 'deny', reason: 'T-2 is still being worked on' })).statusCode).toBe(202);
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');
    expect(executed).toEqual([]);
    const result = (llm.seen[1]!.messages.at(-1)!.content as unknown as { type: string; is_error?: boolean; content: string }[])[0]!;
    expect(result).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_d', is_error: true });
    expect(result.content).toContain('T-2 is still being worked on');
  });

  it('answers 404 for an unknown run or tool call, 400 for a bad body, 409 for a call that is not waiting', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_x', 'close_ticket', { ticketId: 'T-3' });
    const worker = testWorker(db.store, llm, [closeTool([])], { name: 'W' });
    const run = await newRun(db.records, 'close T-3');
    await worker.runOnce();
    expect((await decide('00000000-0000-4000-8000-000000000000', 'toolu_x', { decision: 'approve' })).statusCode).toBe(404);
    expect((await decide(run.id, 'toolu_nope', { decision: 'approve' })).statusCode).toBe(404);
    for (const bad of [{}, { decision: 'maybe' }, { decision: 'deny' }, { decision: 'approve', extra: 1 }]) {
      expect((await decide(run.id, 'toolu_x', bad)).statusCode).toBe(400);
    }
    expect((await decide(run.id, 'toolu_x', { decision: 'complete', result: 'x' })).statusCode).toBe(409);
    // A run that never waited: the call exists but is not waiting for anyone.
    const plain = new ScriptedLlm().thenToolUse('toolu_p', 'echo', {}).thenText('done');
    const echo = defineTool({ name: 'echo', description: 'e', inputSchema: { type: 'object' }, execute: async () => 'e' });
    const other = await newRun(db.records, 'plain');
    await testWorker(db.store, plain, [echo], { name: 'W' }).runOnce();
    expect((await db.records.state(other.id)).status).toBe('SUCCEEDED');
    expect((await decide(other.id, 'toolu_p', { decision: 'approve' })).statusCode).toBe(409);
  });

  it('lists every call of a turn that needs approval, and resumes only when all are decided', async () => {
    const executed: string[] = [];
    const llm = new ScriptedLlm()
      .thenToolUses([
        { id: 'toolu_1', name: 'close_ticket', input: { ticketId: 'A' } },
        { id: 'toolu_2', name: 'lookup', input: {} },
        { id: 'toolu_3', name: 'close_ticket', input: { ticketId: 'B' } },
      ])
      .thenText('done');
    const lookups: string[] = [];
    const lookup = defineTool({
      name: 'lookup',
      description: 'l',
      inputSchema: { type: 'object' },
      execute: async (_i, ctx) => lookups.push(ctx.idempotencyKey),
    });
    const worker = testWorker(db.store, llm, [closeTool(executed), lookup], { name: 'W' });
    const run = await newRun(db.records, 'close A and B');
    await worker.runOnce();
    const w = await getRun(run.id);
    expect(w.waiting.toolCalls.map((c: { toolUseId: string }) => c.toolUseId)).toEqual(['toolu_1', 'toolu_3']);
    expect(lookups).toEqual([]); // nothing of the turn runs while it waits

    expect((await decide(run.id, 'toolu_3', { decision: 'deny', reason: 'B stays open' })).json()).toEqual({
      id: run.id,
      status: 'WAITING',
    });
    expect(await worker.runOnce()).toBeNull();
    expect((await decide(run.id, 'toolu_1', { decision: 'approve' })).json()).toEqual({ id: run.id, status: 'QUEUED' });
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');
    expect(executed).toEqual(['A:toolu_1']);
    expect(lookups).toEqual(['toolu_2']);
    const results = llm.seen[1]!.messages.at(-1)!.content as unknown as { tool_use_id: string; is_error?: boolean }[];
    expect(results.map((r) => [r.tool_use_id, r.is_error === true])).toEqual([
      ['toolu_1', false],
      ['toolu_2', false],
      ['toolu_3', true],
    ]);
  });

  it('denies a call whose approval timed out with the reason "approval timed out"', async () => {
    const executed: string[] = [];
    const llm = new ScriptedLlm().thenToolUse('toolu_t', 'close_ticket', { ticketId: 'T-4' }).thenText('it timed out');
    const worker = testWorker(db.store, llm, [closeTool(executed, { approvalTimeoutSeconds: 1 })], { name: 'W', databaseUrl: db.url });
    const run = await newRun(db.records, 'close T-4');
    await worker.start();
    await waitFor('the run to wait', async () => (await db.records.state(run.id)).status === 'WAITING');
    expect((await getRun(run.id)).waiting.expiresAt).toEqual(expect.any(String));
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 10_000);
    await worker.stop();
    expect(executed).toEqual([]);
    const result = (llm.seen[1]!.messages.at(-1)!.content as unknown as { content: string; is_error?: boolean }[])[0]!;
    expect(result.is_error).toBe(true);
    expect(result.content).toContain('approval timed out');
    expect((await decide(run.id, 'toolu_t', { decision: 'approve' })).statusCode).toBe(409);
  });

  it('cancels a waiting run at once', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_c2', 'close_ticket', { ticketId: 'T-6' });
    const run = await newRun(db.records, 'close T-6');
    await testWorker(db.store, llm, [closeTool([])], { name: 'W' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('WAITING');
    const res = await app.inject({ method: 'POST', url: `/api/runs/${run.id}/cancel` });
    expect(res.statusCode).toBe(202);
    expect(res.json().status).toBe('CANCELLED');
    const cancelled = await db.records.state(run.id as RunId);
    expect(cancelled.finishedAt).not.toBeNull();
    expect(cancelled.error).toMatch(/cancelled while waiting/);
    expect((await decide(run.id, 'toolu_c2', { decision: 'approve' })).statusCode).toBe(409);
  });

  it('does not count the time waited against the deadline', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_c', 'close_ticket', { ticketId: 'T-5' });
    const run = await newRun(db.records, 'close T-5');
    await testWorker(db.store, llm, [closeTool([])], { name: 'W' }).runOnce();
    const before = await db.records.state(run.id);
    await db.pool.query(
      `UPDATE durable_agent.run SET waiting = jsonb_set(waiting, '{since}', to_jsonb(now() - interval '1 hour')) WHERE id = $1`,
      [run.id],
    );
    expect((await decide(run.id, 'toolu_c', { decision: 'approve' })).statusCode).toBe(202);
    const after = await db.records.state(run.id);
    expect(after.deadlineAt.getTime() - before.deadlineAt.getTime()).toBeGreaterThanOrEqual(3_600_000);
    await db.records.cancel(run.id);
  });
});
