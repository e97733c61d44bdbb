/**
 * MCP tool servers, on real PostgreSQL: an agent takes the tools of a stdio server the worker starts
 * (a script built with the SDK's server side) and of a Streamable HTTP server, calls them with the
 * idempotency key in `_meta`, keeps their definitions with its steps, survives the server going down
 * (the model gets an is_error result) and reconnects when it comes back.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import type { RunId, ToolResultBlock } from '../../src/domain/types.ts';
import type { McpServerOptions } from '../../src/tools/mcp-config.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { waitFor } from '../support/engine.ts';
// @ts-expect-error a plain JavaScript module, so it can run as the server's own process
import { orderServer } from '../support/mcp-order-server.mjs';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const SERVER_SCRIPT = fileURLToPath(new URL('../support/mcp-order-server.mjs', import.meta.url));

interface Call {
  tool: string;
  args: Record<string, unknown>;
  meta: Record<string, unknown> | null;
  pid: number;
}

let db: TestDatabase;
let dir: string;
const runtimes: AgentRuntime[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
beforeEach(async () => {
  db = await testDatabase();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-test-'));
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  for (const c of cleanups.splice(0).reverse()) await c();
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const files = () => ({ calls: path.join(dir, 'calls.jsonl'), pid: path.join(dir, 'server.pid'), down: path.join(dir, 'down') });

function stdioServer(extra: Partial<McpServerOptions> = {}): McpServerOptions {
  const f = files();
  return {
    name: 'orders',
    command: process.execPath,
    args: [SERVER_SCRIPT],
    env: { MCP_TEST_CALLS: f.calls, MCP_TEST_PIDFILE: f.pid, MCP_TEST_DOWN: f.down },
    connectTimeoutMs: 60_000, // Node starts slowly on a loaded machine
    ...extra,
  } as McpServerOptions;
}

const callsMade = (): Call[] =>
  fs.existsSync(files().calls)
    ? fs
        .readFileSync(files().calls, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Call)
    : [];

function hostLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { logger, lines };
}

async function start(mcpServers: McpServerOptions[], llm: ScriptedLlm, logger = hostLogger().logger): Promise<AgentRuntime> {
  const agent = defineAgent({ name: 'desk', system: 'You run the order desk.', tools: [], mcpServers });
  const rt = await createRuntime({ agents: [agent], api: false, databaseUrl: db.url, llm, logger });
  runtimes.push(rt);
  return rt;
}

/** The tool_results the model was sent in its request `n` (1-based), by tool_use id. */
function resultsIn(llm: ScriptedLlm, n: number): Record<string, ToolResultBlock> {
  const last = llm.seen[n - 1]!.messages.at(-1)!;
  const blocks = (Array.isArray(last.content) ? last.content : []) as ToolResultBlock[];
  return Object.fromEntries(blocks.filter((b) => b.type === 'tool_result').map((b) => [b.tool_use_id, b]));
}

async function finished(rt: AgentRuntime, input: string) {
  const run = await rt.runs.create({ input });
  return rt.runs.wait(run.id, { timeoutMs: 30_000 });
}

function killServer(): number {
  const pid = Number(fs.readFileSync(files().pid, 'utf8'));
  process.kill(pid, 'SIGKILL');
  return pid;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a stdio MCP server', () => {
  it('gives the agent its tools with their input schemas, stores their definitions with the run, and passes the idempotency key in _meta', async () => {
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_look', 'lookup_order', { orderId: 'A-1' })
      .thenToolUse('toolu_cancel', 'cancel_order', { orderId: 'A-1', reason: 'asked' })
      .thenText('Order A-1 was shipped, and is now cancelled.');
    // The agent says its cancels need no approval (the server marks them destructive).
    const rt = await start([stdioServer({ needsApproval: false })], llm);

    const done = await finished(rt, 'Cancel order A-1 after checking it.');
    expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'Order A-1 was shipped, and is now cancelled.' });

    // The model was told the server's tools with the server's schemas.
    const told = llm.seen[0]!.tools!;
    expect(told.map((t) => t.name)).toEqual(['lookup_order', 'cancel_order', 'refund_order']);
    expect(told[0]).toEqual({
      name: 'lookup_order',
      description: 'The status of an order.',
      input_schema: { type: 'object', properties: { orderId: { type: 'string', description: 'like A-100' } }, required: ['orderId'] },
    });

    // Both calls reached the server once, each with its tool_use id as the idempotency key.
    expect(callsMade().map(({ tool, args, meta }) => ({ tool, args, meta }))).toEqual([
      { tool: 'lookup_order', args: { orderId: 'A-1' }, meta: { idempotencyKey: 'toolu_look' } },
      { tool: 'cancel_order', args: { orderId: 'A-1', reason: 'asked' }, meta: { idempotencyKey: 'toolu_cancel' } },
    ]);
    expect(resultsIn(llm, 2).toolu_look).toMatchObject({ content: 'order A-1: shipped' });
    expect(resultsIn(llm, 3).toolu_cancel).toMatchObject({ content: 'order A-1 cancelled' });
    expect(resultsIn(llm, 3).toolu_cancel!.is_error).toBeFalsy();

    // The run's model steps refer to a stored text of exactly those definitions.
    const steps = await db.store.steps(done.id as RunId);
    const digests = new Set(steps.filter((s) => s.kind === 'MODEL').map((s) => (s.request as { toolsDigest: string }).toolsDigest));
    expect(digests.size).toBe(1);
    expect(JSON.parse((await db.store.blob([...digests][0]!))!)).toEqual(told);
  });

  it('runs the idempotent tool at once, and waits for approval of the destructive one before calling it', async () => {
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_look', 'lookup_order', { orderId: 'A-6' })
      .thenToolUse('toolu_cancel', 'cancel_order', { orderId: 'A-6' })
      .thenText('Cancelled A-6.');
    const rt = await start([stdioServer()], llm);
    const run = await rt.runs.create({ input: 'Cancel A-6.' });

    const waiting = await waitFor('the run to wait for approval', async () => {
      const r = await rt.runs.get(run.id);
      return r?.status === 'WAITING' && r;
    });
    expect(waiting.waiting).toMatchObject({
      kind: 'approval',
      toolCalls: [{ toolUseId: 'toolu_cancel', toolName: 'cancel_order', input: { orderId: 'A-6' } }],
    });
    expect(callsMade().map((c) => c.tool)).toEqual(['lookup_order']);

    await rt.runs.decide(run.id, 'toolu_cancel', { decision: 'approve' });
    expect(await rt.runs.wait(run.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED', output: 'Cancelled A-6.' });
    expect(callsMade().map((c) => [c.tool, c.meta?.idempotencyKey])).toEqual([
      ['lookup_order', 'toolu_look'],
      ['cancel_order', 'toolu_cancel'],
    ]);
  });

  it('answers a tool the server reports as failed with an is_error result, and the run goes on', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_404', 'cancel_order', { orderId: 'A-404' }).thenText('There is no such order.');
    const rt = await start([stdioServer({ overrides: { cancel_order: { needsApproval: false } } })], llm);
    expect(await finished(rt, 'Cancel A-404.')).toMatchObject({ status: 'SUCCEEDED' });
    expect(resultsIn(llm, 2).toolu_404).toMatchObject({ is_error: true, content: 'error: no order A-404' });
  });

  it('gives the model an is_error result while the server is down, and reconnects once it is back', async () => {
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_down', 'lookup_order', { orderId: 'A-2' })
      .thenText('The order desk is down; try later.')
      .thenToolUse('toolu_back', 'lookup_order', { orderId: 'A-2' })
      .thenText('A-2 has shipped.');
    const rt = await start([stdioServer()], llm);

    // The server dies, and cannot start again for now.
    fs.writeFileSync(files().down, '');
    const first = killServer();
    await waitFor('the server to die', async () => !alive(first));

    const down = await finished(rt, 'Where is A-2?');
    expect(down).toMatchObject({ status: 'SUCCEEDED', output: 'The order desk is down; try later.' });
    expect(resultsIn(llm, 2).toolu_down).toMatchObject({ is_error: true });
    expect(resultsIn(llm, 2).toolu_down!.content).toMatch(/MCP server "orders" is unavailable/);

    // Back up: the next call starts it again and goes through.
    fs.rmSync(files().down);
    const back = await finished(rt, 'And now?');
    expect(back).toMatchObject({ status: 'SUCCEEDED', output: 'A-2 has shipped.' });
    expect(resultsIn(llm, 4).toolu_back).toMatchObject({ content: 'order A-2: shipped' });
    const calls = callsMade();
    expect(calls.map((c) => c.meta?.idempotencyKey)).toEqual(['toolu_back']);
    expect(calls[0]!.pid).not.toBe(first);
  });

  it('offers no tools of a server that is down at start, and offers them once it answers', async () => {
    fs.writeFileSync(files().down, '');
    const { logger, lines } = hostLogger();
    const llm = new ScriptedLlm()
      .thenText('No tools yet.')
      .thenToolUse('toolu_late', 'lookup_order', { orderId: 'A-3' })
      .thenText('Shipped.');
    const rt = await start([stdioServer()], llm, logger);
    expect(await finished(rt, 'Hello?')).toMatchObject({ status: 'SUCCEEDED', output: 'No tools yet.' });
    expect(llm.seen[0]!.tools ?? []).toEqual([]);
    expect(lines.some((l) => l.mcp_server === 'orders' && /unavailable at start/.test(String(l.msg)))).toBe(true);

    fs.rmSync(files().down);
    await waitFor('the tools to be listed', async () =>
      lines.some((l) => l.mcp_server === 'orders' && l.msg === 'MCP server tools listed'),
    );
    expect(await finished(rt, 'Where is A-3?')).toMatchObject({ status: 'SUCCEEDED', output: 'Shipped.' });
    expect(llm.seen[1]!.tools!.map((t) => t.name)).toEqual(['lookup_order', 'cancel_order', 'refund_order']);
    expect(resultsIn(llm, 3).toolu_late).toMatchObject({ content: 'order A-3: shipped' });
  });

  it('takes only the tools the agent includes, under its prefix', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_p', 'desk_lookup_order', { orderId: 'A-5' }).thenText('Shipped.');
    const rt = await start([stdioServer({ toolPrefix: 'desk_', include: ['lookup_order'] })], llm);
    expect(await finished(rt, 'A-5?')).toMatchObject({ status: 'SUCCEEDED' });
    expect(llm.seen[0]!.tools!.map((t) => t.name)).toEqual(['desk_lookup_order']);
    expect(callsMade().map((c) => c.tool)).toEqual(['lookup_order']);
  });
});

/** A Streamable HTTP MCP server in this process that wants a bearer token; `restart()` forgets every session. */
async function httpOrderServer(token: string) {
  const calls: Call[] = [];
  const authorizations: string[] = [];
  let sessions = new Map<string, StreamableHTTPServerTransport>();
  const server = http.createServer((req, res) => {
    void (async () => {
      authorizations.push(String(req.headers.authorization));
      if (req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end();
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown) : undefined;
      const sid = req.headers['mcp-session-id'] as string | undefined;
      let transport = sid ? sessions.get(sid) : undefined;
      if (!transport && !sid && req.method === 'POST' && isInitializeRequest(body)) {
        const own = sessions;
        const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void own.set(id, t),
        });
        await orderServer({ onCall: (c: Call) => calls.push(c) }).connect(t);
        transport = t;
      }
      if (!transport)
        return void res
          .writeHead(404, { 'content-type': 'application/json' })
          .end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
      await transport.handleRequest(req, res, body);
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
  return {
    url,
    calls,
    authorizations,
    restart: async () => {
      await Promise.all([...sessions.values()].map((t) => t.close()));
      sessions = new Map();
    },
    close: async () => {
      await Promise.all([...sessions.values()].map((t) => t.close()));
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('a Streamable HTTP MCP server', () => {
  it('is called with the agent headers, and a session the server forgot is opened again without running a call twice', async () => {
    const desk = await httpOrderServer('s3cret');
    cleanups.push(() => desk.close());
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_h1', 'lookup_order', { orderId: 'H-1' })
      .thenText('Shipped.')
      .thenToolUse('toolu_h2', 'cancel_order', { orderId: 'H-1' })
      .thenText('Cancelled.');
    const rt = await start([{ name: 'desk', url: desk.url, headers: { authorization: 'Bearer s3cret' }, needsApproval: false }], llm);
    expect(await finished(rt, 'H-1?')).toMatchObject({ status: 'SUCCEEDED', output: 'Shipped.' });
    expect(resultsIn(llm, 2).toolu_h1).toMatchObject({ content: 'order H-1: shipped' });

    // The server restarts and knows no session: the call is sent again on a new one, and runs once.
    await desk.restart();
    expect(await finished(rt, 'Cancel H-1.')).toMatchObject({ status: 'SUCCEEDED', output: 'Cancelled.' });
    expect(resultsIn(llm, 4).toolu_h2).toMatchObject({ content: 'order H-1 cancelled' });
    expect(desk.calls.map((c) => [c.tool, c.meta?.idempotencyKey])).toEqual([
      ['lookup_order', 'toolu_h1'],
      ['cancel_order', 'toolu_h2'],
    ]);
    expect(new Set(desk.authorizations)).toEqual(new Set(['Bearer s3cret']));
  });
});
