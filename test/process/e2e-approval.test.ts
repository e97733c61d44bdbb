/**
 * The README's approval, end to end with real processes: the demo agent is asked to close a ticket,
 * the run waits for approval, every process is stopped and started again, and the approval (an HTTP
 * POST, as with curl) lets the run finish: the tool runs exactly once, the model call before the wait
 * is not repeated.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { CliProcesses, cleanEnv, exitWithin, freePort, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const procs = new CliProcesses();
let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await procs.killAll();
  await db.close();
});

async function serve(name: string, port: number) {
  const p = procs.start(name, ['serve'], cleanEnv({ DATABASE_URL: db.url, PORT: String(port), DEMO_LATENCY_MS: '10', WORKER_NAME: name }));
  await waitForOutput(p, /durable-agent listening on/, 120_000);
  return p;
}

const json = async (url: string, init?: RequestInit) => {
  const res = await fetch(url, init);
  return { status: res.status, body: (await res.json()) as any };
};
const post = (url: string, body: unknown) =>
  json(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

it('approves a close_ticket after every process was stopped and started again; the tool runs once, the model call is not repeated', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const first = await serve('serve-1', port);
  const created = await post(`${base}/api/runs`, { input: 'Close ticket ACME-104 because the webhook fix shipped' });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const waiting = await until(
    'the run to wait for approval',
    async () => {
      const { body } = await json(`${base}/api/runs/${id}`);
      return body.status === 'WAITING' && body;
    },
    30_000,
  );
  expect(waiting.waiting).toMatchObject({
    kind: 'approval',
    toolCalls: [{ toolName: 'close_ticket', input: { ticketId: 'ACME-104', resolution: 'the webhook fix shipped' } }],
  });
  const toolUseId = waiting.waiting.toolCalls[0].toolUseId as string;

  first.child.kill('SIGTERM');
  expect(await exitWithin(first, 30_000)).toEqual({ code: 0, signal: null });
  const ticket = async () => (await db.pool.query(`SELECT status FROM durable_agent.demo_ticket WHERE id = 'ACME-104'`)).rows[0].status;
  expect(await ticket()).toBe('open');

  await serve('serve-2', port);
  const approved = await post(`${base}/api/runs/${id}/tool-calls/${toolUseId}/decision`, { decision: 'approve' });
  expect(approved).toEqual({ status: 202, body: { id, status: 'QUEUED' } });
  const done = await until(
    'the run to finish',
    async () => {
      const { body } = await json(`${base}/api/runs/${id}`);
      return body.status === 'SUCCEEDED' && body;
    },
    30_000,
  );
  expect(done.output).toContain('[demo model]');

  const steps = await db.store.steps(id as RunId);
  expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'serve-1'],
    [2, 'TOOL', 'DONE', 'serve-2'],
    [3, 'MODEL', 'DONE', 'serve-2'],
  ]);
  expect(steps.every((s) => s.attempts === 1)).toBe(true);
  expect(await ticket()).toBe('closed');
  const comments = await db.pool.query(`SELECT body FROM durable_agent.demo_ticket_comment WHERE ticket_id = 'ACME-104'`);
  expect(comments.rows).toEqual([{ body: 'Closed: the webhook fix shipped' }]);
}, 240_000);
