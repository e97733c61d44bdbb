import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { armCrashPoint, CrashPointError, disarmCrashPoints } from '../../src/engine/crash-points.ts';
import { TicketStore } from '../../src/demo/tickets-store.ts';
import { demoTools } from '../../src/demo/demo-tools.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import type { Tool } from '../../src/tools/types.ts';
import type { RunId } from '../../src/domain/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, testWorker } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let tools: Tool[];
beforeAll(async () => {
  db = await testDatabase();
  tools = demoTools(new TicketStore(db.pool));
});
afterAll(async () => {
  await db.close();
});
afterEach(() => disarmCrashPoints());

const ctx = () => ({ runId: 'r' as RunId, signal: new AbortController().signal });
const call = (name: string, input: unknown, key = `toolu_${name}`) =>
  new ToolExecutor(tools, 5_000).execute({ type: 'tool_use', id: key, name, input }, ctx());

describe('demo tools', () => {
  it('lists the overdue acme tickets', async () => {
    const out = await call('list_tickets', { customer: 'acme', overdue: true });
    expect(out.status).toBe('DONE');
    const tickets = JSON.parse(out.result) as { id: string; overdue: boolean; status: string }[];
    expect(tickets.map((t) => t.id)).toEqual(['ACME-101', 'ACME-102', 'ACME-104']);
    expect(tickets.every((t) => t.overdue && t.status === 'open')).toBe(true);
  });

  it('shows one ticket, and says so for an unknown one or bad input', async () => {
    expect(JSON.parse((await call('get_ticket', { id: 'acme-102' })).result)).toMatchObject({ id: 'ACME-102', comments: [] });
    expect(await call('get_ticket', { id: 'ACME-999' })).toEqual({ status: 'ERROR', result: 'error: no ticket ACME-999' });
    expect((await call('list_tickets', { overdue: 'yes' })).result).toMatch(/^error: invalid input: overdue/);
  });

  it('comments once per idempotency key, even when a crash makes the step run twice', async () => {
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_comment_1', 'add_ticket_comment', { ticketId: 'ACME-103', body: 'Looking into it.' })
      .thenText('Commented.');
    const run = await newRun(db.records, 'comment on ACME-103');
    // Worker A dies after commenting, before the result is recorded.
    armCrashPoint({ point: 'after-tool-effect', runId: run.id });
    await expect(testWorker(db.store, llm, tools, { name: 'A' }).runOnce()).rejects.toThrow(CrashPointError);
    await expireLease(db.pool, run.id);
    expect(await testWorker(db.store, llm, tools, { name: 'B' }).runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });

    const { rows } = await db.pool.query(`SELECT body FROM durable_agent.demo_ticket_comment WHERE ticket_id = 'ACME-103'`);
    expect(rows).toEqual([{ body: 'Looking into it.' }]);
    const steps = await db.store.steps(run.id);
    expect(JSON.parse(steps[1]!.response as string)).toMatchObject({ created: false }); // the second execution found the first
  });
});
