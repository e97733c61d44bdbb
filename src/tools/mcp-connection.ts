/**
 * One worker's connection to one MCP server: opened on first use, shared by every run the worker
 * drives, opened again after it is lost. A server that cannot be reached makes the call fail with a
 * ToolError (the model gets an is_error result); it never ends the run.
 *
 * After a failed call the connection is dropped and the call is tried once more on a new one only
 * when that cannot run the tool twice: the request never reached the server (a refused connection,
 * a session the restarted server no longer knows), or the tool is idempotent (the same key again).
 * A non-idempotent call lost mid-way is reported to the model as possibly done.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ToolError } from '../domain/errors.ts';
import { MAX_TIMER_MS } from '../util/sleep.ts';
import type { Logger } from '../observability/logger.ts';
import { describeServer, type McpServer } from './mcp-config.ts';
import type { McpToolInfo } from './mcp-tools.ts';

export const DEFAULT_MCP_CONNECT_TIMEOUT_MS = 30_000;
/** The SDK's own per-request limit is 60 s; the tool executor's timeout and the run's signal bound a call instead. */
const NO_SDK_TIMEOUT_MS = MAX_TIMER_MS;
/** The key under which a call's `_meta` carries its idempotency key (the model's tool_use id). */
export const IDEMPOTENCY_KEY_META = 'idempotencyKey';

const CONNECTION_CLOSED = -32000;
const REQUEST_TIMEOUT = -32001;

export interface McpConnectionOptions {
  logger: Logger;
  /** The tools the server offers may have changed (it said so, or it was connected again). */
  onToolsChanged?: () => void;
  /** Makes the transport; by default stdio for a command, Streamable HTTP for a URL (tests pass their own). */
  transport?: (server: McpServer) => Promise<Transport>;
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** `promise`, or the signal's reason as soon as it aborts (a connection being opened is left to finish for the next call). */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A failure that shows the request never reached the server, so sending it again cannot run the tool twice. */
function notDelivered(e: unknown): boolean {
  const err = e as { code?: unknown; cause?: { code?: unknown }; name?: string; message?: string };
  if (err?.name === 'StreamableHTTPError' || e?.constructor?.name === 'StreamableHTTPError') return err.code === 404; // the session is gone
  if (err?.cause?.code === 'ECONNREFUSED') return true;
  return err?.message === 'Not connected';
}

/** An answer from the server (an error of the protocol about this call): the connection itself is fine. */
function serverAnswered(e: unknown): boolean {
  const err = e as { code?: unknown };
  return (
    e?.constructor?.name === 'McpError' && typeof err.code === 'number' && err.code !== CONNECTION_CLOSED && err.code !== REQUEST_TIMEOUT
  );
}

async function defaultTransport(server: McpServer, logger: Logger): Promise<Transport> {
  if ('url' in server && server.url !== undefined) {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    return new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { ...server.headers } } });
  }
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const s = server as Extract<McpServer, { command: string }>;
  const transport = new StdioClientTransport({
    command: s.command,
    ...(s.args ? { args: [...s.args] } : {}),
    ...(s.env ? { env: { ...s.env } } : {}),
    ...(s.cwd ? { cwd: s.cwd } : {}),
    stderr: 'pipe',
  });
  // What the server writes to stderr is its log: kept, one line each, under its name.
  let partial = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim()) logger.info({ mcp_server: server.name, line: line.slice(0, 2000) }, 'MCP server stderr');
  });
  return transport;
}

export class McpConnection {
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private closed = false;
  private connections = 0;

  constructor(
    readonly server: McpServer,
    private readonly opts: McpConnectionOptions,
  ) {}

  /** The open connection, or a new one (one attempt shared by every caller meanwhile). */
  connected(): Promise<Client> {
    if (this.closed) return Promise.reject(new ToolError(`the connection to MCP server "${this.server.name}" is closed`));
    if (this.client) return Promise.resolve(this.client);
    return (this.connecting ??= this.open().finally(() => (this.connecting = null)));
  }

  private async open(): Promise<Client> {
    const { server, opts } = this;
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const client = new Client(
      { name: 'durable-agent', version: '1' },
      { listChanged: { tools: { autoRefresh: false, onChanged: () => opts.onToolsChanged?.() } } },
    );
    client.onclose = () => {
      if (this.client === client) this.client = null;
    };
    try {
      const transport = await (opts.transport ? opts.transport(server) : defaultTransport(server, opts.logger));
      await client.connect(transport, { timeout: server.connectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS });
    } catch (e) {
      await client.close().catch(() => {});
      throw new ToolError(`MCP server "${server.name}" is unavailable: ${message(e)}`);
    }
    if (this.closed) {
      await client.close().catch(() => {});
      throw new ToolError(`the connection to MCP server "${server.name}" is closed`);
    }
    this.client = client;
    opts.logger.info({ mcp_server: server.name, server: describeServer(server) }, 'MCP server connected');
    // Connected again: the server may have been restarted with other tools.
    if (this.connections++ > 0) opts.onToolsChanged?.();
    return client;
  }

  /** Forgets a connection that failed, so the next call opens a new one. */
  private drop(client: Client): void {
    if (this.client !== client) return;
    this.client = null;
    client.close().catch(() => {});
  }

  /** Every tool the server offers, page by page. */
  async listTools(): Promise<McpToolInfo[]> {
    const client = await this.connected();
    const tools: McpToolInfo[] = [];
    let cursor: string | undefined;
    try {
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, {
          timeout: this.server.connectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS,
        });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
    } catch (e) {
      if (!serverAnswered(e)) this.drop(client);
      throw e;
    }
    return tools;
  }

  /** Calls a tool with the idempotency key in `_meta`; see the file's comment for when it is sent twice. */
  async callTool(
    name: string,
    input: Record<string, unknown>,
    /** `log`: the calling tool's logger (its lines name the run and step), instead of the connection's. */
    call: { idempotencyKey: string; signal: AbortSignal; idempotent: boolean; log?: Logger },
  ): Promise<CallToolResult> {
    const send = async (client: Client) =>
      (await client.callTool({ name, arguments: input, _meta: { [IDEMPOTENCY_KEY_META]: call.idempotencyKey } }, undefined, {
        signal: call.signal,
        timeout: NO_SDK_TIMEOUT_MS,
      })) as CallToolResult;
    const client = await unlessAborted(this.connected(), call.signal);
    try {
      return await send(client);
    } catch (e) {
      if (call.signal.aborted || serverAnswered(e)) throw e;
      this.drop(client);
      const again = notDelivered(e) || call.idempotent;
      (call.log ?? this.opts.logger).warn(
        { mcp_server: this.server.name, tool_name: name, err_message: message(e), retried: again },
        'MCP call failed on its connection; the connection is dropped',
      );
      if (!again) {
        throw new ToolError(
          `the connection to MCP server "${this.server.name}" failed during the call (${message(e)}); the tool may or may not have run`,
        );
      }
      return send(await unlessAborted(this.connected(), call.signal));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client ?? (await this.connecting?.catch(() => null)) ?? null;
    this.client = null;
    await client?.close().catch(() => {});
  }
}
