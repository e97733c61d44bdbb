/**
 * `durable-agent/client` against a real server on real PostgreSQL: the typed HTTP client creates,
 * reads, lists, decides, cancels and follows runs as a front end would, and says what went wrong in
 * one error when the server refuses or cannot be reached.
 */
import net from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { ApiError, createClient, foldEvents, type Client, type RunEvent, type UnknownRunEvent } from '../../src/client/index.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const KEY = 'dak_client_test_key';

let db: TestDatabase;
let rt: AgentRuntime;
let api: Client;
const executed: unknown[] = [];

beforeAll(async () => {
  db = await testDatabase();
  const close = tool<{ ticketId: string }>({
    name: 'close_ticket',
    description: 'Closes a ticket.',
    inputSchema: { type: 'object', properties: { ticketId: { type: 'string' } }, required: ['ticketId'] },
    needsApproval: true,
    execute: async (input) => {
      executed.push(input);
      return `closed ${input.ticketId}`;
    },
  });
  const llm = new ScriptedLlm().thenToolUse('toolu_c1', 'close_ticket', { ticketId: 'T-7' }).thenText('Closed T-7.');
  rt = await createRuntime({
    agents: [defineAgent({ name: 'desk', system: 'You close tickets.', tools: [close] })],
    api: { port: 0, host: '127.0.0.1' },
    databaseUrl: db.url,
    llm,
    logger: pino({ level: process.env.CLIENT_TEST_LOG ?? 'silent' }),
    authenticate: (request) => (request.headers.authorization === `Bearer ${KEY}` ? 'acme' : null),
  });
  api = createClient({ baseUrl: `${rt.url}/`, apiKey: KEY });
});
afterAll(async () => {
  await rt?.close();
  await db?.close();
});

/** A port nothing listens on: one the system just gave out and took back. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('createClient', () => {
  it('creates a run, follows its events through an approval, decides, and reads the run, its steps and its page', async () => {
    const created = await api.runs.create({ input: 'Close T-7.', metadata: { user: 'u1' } }, { idempotencyKey: 'close-t7' });
    expect(created).toEqual({ id: expect.any(String), status: 'QUEUED' });
    // The same key and body answer the same run.
    expect(await api.runs.create({ input: 'Close T-7.', metadata: { user: 'u1' } }, { idempotencyKey: 'close-t7' })).toEqual({
      id: created.id,
      status: expect.any(String),
    });

    const seen: (RunEvent | UnknownRunEvent)[] = [];
    for await (const e of api.runs.events(created.id, { retryMs: 50 })) {
      seen.push(e);
      if (e.type === 'run.waiting') {
        const waiting = await api.runs.get(created.id);
        expect(waiting).toMatchObject({
          status: 'WAITING',
          tenant: 'acme',
          metadata: { user: 'u1' },
          waiting: { kind: 'approval', toolCalls: [{ toolUseId: 'toolu_c1', toolName: 'close_ticket', input: { ticketId: 'T-7' } }] },
        });
        expect(await api.runs.decide(created.id, 'toolu_c1', { decision: 'approve' })).toEqual({ id: created.id, status: 'QUEUED' });
      }
    }
    expect(seen.map((e) => e.type)).toEqual(
      expect.arrayContaining(['run.started', 'tool.started', 'tool.finished', 'run.waiting', 'run.resumed', 'run.finished']),
    );
    expect(foldEvents(seen).finished).toMatchObject({ status: 'SUCCEEDED', output: 'Closed T-7.' });
    expect(executed).toEqual([{ ticketId: 'T-7' }]);

    const run = await api.runs.get(created.id);
    expect(run).toMatchObject({ id: created.id, agent: 'desk', status: 'SUCCEEDED', output: 'Closed T-7.', waiting: null });
    const timeline = await api.runs.timeline(created.id);
    expect(timeline.map((s) => [s.seq, s.kind, s.status, s.toolName])).toEqual([
      [1, 'MODEL', 'DONE', null],
      [2, 'TOOL', 'DONE', 'close_ticket'],
      [3, 'MODEL', 'DONE', null],
    ]);
    expect(await api.runs.step(created.id, 2)).toMatchObject({
      seq: 2,
      request: { toolUseId: 'toolu_c1', name: 'close_ticket', input: { ticketId: 'T-7' } },
      response: 'closed T-7',
    });
    const page = await api.runs.eventPage(created.id, { after: seen[0]!.id, limit: 2 });
    expect(page).toEqual({ events: seen.slice(1, 3), finished: false });

    const listed = await api.runs.list({ status: 'SUCCEEDED', limit: 5 });
    expect(listed.runs.map((r) => r.id)).toEqual([created.id]);
    expect(listed.nextCursor).toBeNull();
    expect((await api.runs.list({ status: 'QUEUED' })).runs).toEqual([]);

    await api.runs.delete(created.id);
    await expect(api.runs.get(created.id)).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });

  it("cancels a queued run, and refuses a second cancel with the server's code and message", async () => {
    const { id } = await api.runs.create({ input: 'Later.', startAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(await api.runs.cancel(id)).toEqual({ id, status: 'CANCELLED', cancelRequested: true });
    const refused = await api.runs.cancel(id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({
      status: 409,
      code: 'conflict',
      message: expect.stringMatching(new RegExp(`^POST /api/runs/${id}/cancel: 409 `)),
    });
  });

  it('gives the failing fields of a 400, the 401 of a missing key, and an unreachable server as status null', async () => {
    const invalid = await api.runs.create({ input: '', tokenBudget: -1 }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({
      status: 400,
      code: 'invalid_request',
      issues: expect.arrayContaining([expect.objectContaining({ path: 'tokenBudget' })]),
    });

    await expect(createClient({ baseUrl: rt.url! }).runs.list()).rejects.toMatchObject({ status: 401 });

    const port = await closedPort();
    const closed = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: KEY });
    const unreachable = await closed.runs.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(unreachable).toBeInstanceOf(ApiError);
    expect(unreachable).toMatchObject({
      status: null,
      message: expect.stringMatching(/^GET \/api\/runs\/[0-9a-f-]+: cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)$/),
    });
    expect(JSON.stringify(unreachable) + String(unreachable)).not.toContain(KEY);
  });
});
