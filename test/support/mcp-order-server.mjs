/**
 * An MCP server for tests, built with the SDK's server side: an order desk with a read-only lookup
 * (idempotent), a destructive cancel (non-idempotent, needs approval), and an unannotated refund
 * (non-idempotent). Every call is reported with its `_meta`; the tool named by $MCP_TEST_HANG never
 * answers (for crash tests).
 *
 * Run as a program, it serves stdio and appends one JSON line per call to $MCP_TEST_CALLS; it writes
 * its pid to $MCP_TEST_PIDFILE; and it refuses to start (exits 3) while the file $MCP_TEST_DOWN exists,
 * standing in for a server that is down. Imported, `orderServer()` gives a server to put on any transport.
 */
import fs from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

/** @param {{ onCall(call: { tool: string, args: unknown, meta: unknown, pid: number }): void, hangs?: (tool: string) => boolean }} options */
export function orderServer(options) {
  const server = new McpServer({ name: 'order-desk', version: '1.0.0' });
  // A call is reported as it arrives; a tool told to hang then never answers (the worker is killed meanwhile).
  const report = async (tool, args, extra) => {
    options.onCall({ tool, args, meta: extra._meta ?? null, pid: process.pid });
    if (options.hangs?.(tool)) await new Promise(() => {});
  };
  server.registerTool(
    'lookup_order',
    {
      description: 'The status of an order.',
      inputSchema: { orderId: z.string().describe('like A-100') },
      annotations: { readOnlyHint: true, idempotentHint: true },
    },
    async (args, extra) => {
      await report('lookup_order', args, extra);
      return { content: [{ type: 'text', text: `order ${args.orderId}: shipped` }] };
    },
  );
  server.registerTool(
    'cancel_order',
    {
      description: 'Cancels an order for good.',
      inputSchema: { orderId: z.string(), reason: z.string().optional() },
      annotations: { destructiveHint: true, idempotentHint: false },
    },
    async (args, extra) => {
      await report('cancel_order', args, extra);
      if (args.orderId === 'A-404') return { isError: true, content: [{ type: 'text', text: `no order ${args.orderId}` }] };
      return { content: [{ type: 'text', text: `order ${args.orderId} cancelled` }], structuredContent: { cancelled: true } };
    },
  );
  server.registerTool(
    'refund_order',
    { description: 'Refunds an order.', inputSchema: { orderId: z.string(), amount: z.number() } },
    async (args, extra) => {
      await report('refund_order', args, extra);
      return { content: [{ type: 'text', text: `refunded ${args.amount} on ${args.orderId}` }] };
    },
  );
  return server;
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${fs.realpathSync(process.argv[1])}`).href;
if (isMain) {
  const { MCP_TEST_CALLS, MCP_TEST_PIDFILE, MCP_TEST_DOWN, MCP_TEST_HANG } = process.env;
  if (MCP_TEST_DOWN && fs.existsSync(MCP_TEST_DOWN)) {
    process.stderr.write('order-desk: down for maintenance\n');
    process.exit(3);
  }
  if (MCP_TEST_PIDFILE) fs.writeFileSync(MCP_TEST_PIDFILE, String(process.pid));
  const server = orderServer({
    onCall: (call) => MCP_TEST_CALLS && fs.appendFileSync(MCP_TEST_CALLS, `${JSON.stringify(call)}\n`),
    hangs: (tool) => tool === MCP_TEST_HANG,
  });
  await server.connect(new StdioServerTransport());
  process.stderr.write('order-desk: serving on stdio\n');
  // The client went away (the worker stopped or was killed): so does the server.
  process.stdin.on('end', () => process.exit(0));
}
