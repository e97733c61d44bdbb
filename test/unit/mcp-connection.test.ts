/**
 * When an MCP call is sent again after its connection fails, against servers in this process (the
 * SDK's in-memory transport): a server that dies mid-call, one that never comes up, one that answers.
 */
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ToolError } from '../../src/domain/errors.ts';
import type { McpServer } from '../../src/tools/mcp-config.ts';
import { McpConnection } from '../../src/tools/mcp-connection.ts';
import { silentLogger } from '../support/engine.ts';
// @ts-expect-error a plain JavaScript module, so it can run as the server's own process
import { orderServer } from '../support/mcp-order-server.mjs';

interface Call {
  tool: string;
  meta: { idempotencyKey?: string } | null;
}

const server: McpServer = { name: 'orders', command: 'unused', connectTimeoutMs: 2000 };

/** Each connection gets a new server; the first one's calls never answer, and it dies once it has one. */
function servers(opts: { firstDiesMidCall?: boolean; down?: boolean } = {}) {
  const calls: Call[] = [];
  let opened = 0;
  const transport = async () => {
    if (opts.down) throw new Error('connect ECONNREFUSED 127.0.0.1:1');
    const [client, side] = InMemoryTransport.createLinkedPair();
    const dies = opts.firstDiesMidCall === true && opened === 0;
    opened++;
    const s = orderServer({
      onCall: (c: Call) => {
        calls.push(c);
        if (dies) setImmediate(() => void side.close());
      },
      hangs: () => dies,
    });
    await s.connect(side);
    return client;
  };
  return { calls, transport, opened: () => opened };
}

const connections: McpConnection[] = [];
afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.close()));
});

function connect(transport: () => Promise<InMemoryTransport>) {
  const c = new McpConnection(server, { logger: silentLogger, transport });
  connections.push(c);
  return c;
}

const call = (idempotent: boolean, key = 'toolu_1') => ({ idempotencyKey: key, signal: new AbortController().signal, idempotent });

describe('a call whose connection fails mid-way', () => {
  it('is sent again on a new connection, with the same key, when the tool is idempotent', async () => {
    const s = servers({ firstDiesMidCall: true });
    const c = connect(s.transport);
    const result = await c.callTool('lookup_order', { orderId: 'A-1' }, call(true));
    expect(result.content).toEqual([{ type: 'text', text: 'order A-1: shipped' }]);
    expect(s.calls.map((x) => [x.tool, x.meta?.idempotencyKey])).toEqual([
      ['lookup_order', 'toolu_1'],
      ['lookup_order', 'toolu_1'],
    ]);
    expect(s.opened()).toBe(2);
  });

  it('is not sent again when the tool is not idempotent: the model hears it may have run', async () => {
    const s = servers({ firstDiesMidCall: true });
    const c = connect(s.transport);
    const failed = c.callTool('refund_order', { orderId: 'A-1', amount: 5 }, call(false));
    await expect(failed).rejects.toThrow(ToolError);
    await expect(failed).rejects.toThrow(/failed during the call .*the tool may or may not have run/);
    expect(s.calls.map((x) => x.tool)).toEqual(['refund_order']);
    // The next call opens a new connection.
    await expect(c.callTool('lookup_order', { orderId: 'A-2' }, call(true, 'toolu_2'))).resolves.toMatchObject({
      content: [{ text: 'order A-2: shipped' }],
    });
  });
});

it('a server that cannot be reached fails the call with a ToolError naming it', async () => {
  const c = connect(servers({ down: true }).transport);
  await expect(c.callTool('lookup_order', { orderId: 'A-1' }, call(true))).rejects.toThrow(
    new ToolError('MCP server "orders" is unavailable: connect ECONNREFUSED 127.0.0.1:1'),
  );
});

it('shares one connection among calls, and lists every tool', async () => {
  const s = servers();
  const c = connect(s.transport);
  const [tools] = await Promise.all([
    c.listTools(),
    c.callTool('lookup_order', { orderId: 'A-1' }, call(true)),
    c.callTool('lookup_order', { orderId: 'A-2' }, call(true, 'toolu_2')),
  ]);
  expect(tools.map((t) => t.name)).toEqual(['lookup_order', 'cancel_order', 'refund_order']);
  expect(s.calls).toHaveLength(2);
  expect(s.opened()).toBe(1);
});
