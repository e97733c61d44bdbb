/**
 * An MCP server as a tool source: its tools listed when the worker starts, listed again when the
 * server says they changed or the worker connects to it again. A server that cannot be reached at
 * start offers no tools and is tried again in the background, with growing pauses, until it can.
 */
import type { Logger } from '../observability/logger.ts';
import { McpConnection, type McpConnectionOptions } from './mcp-connection.ts';
import { describeServer, type McpServer } from './mcp-config.ts';
import { mcpTools } from './mcp-tools.ts';
import type { ToolSource } from './tool-source.ts';
import type { Tool } from './types.ts';

export interface McpSourceOptions {
  logger: Logger;
  /** First pause before connecting again after a failed start, doubling up to `retryCapMs`. Default 1000. */
  retryBaseMs?: number;
  /** Default 60000. */
  retryCapMs?: number;
  transport?: McpConnectionOptions['transport'];
}

/** What decides whether the model's tools changed: definitions and durability, in order. */
const fingerprint = (tools: readonly Tool[]) =>
  JSON.stringify(
    tools.map((t) => [t.name, t.description, t.inputSchema, t.idempotent, typeof t.needsApproval === 'function' ? 'fn' : t.needsApproval]),
  );

export class McpToolSource implements ToolSource {
  private readonly connection: McpConnection;
  private listed: Tool[] = [];
  private readonly listeners: (() => void)[] = [];
  private starting: Promise<void> | null = null;
  private listing: Promise<void> | null = null;
  private listAgain = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private closed = false;

  constructor(
    private readonly server: McpServer,
    private readonly opts: McpSourceOptions,
  ) {
    this.retryMs = opts.retryBaseMs ?? 1000;
    this.connection = new McpConnection(server, {
      logger: opts.logger,
      onToolsChanged: () => void this.refresh().catch(() => {}),
      ...(opts.transport ? { transport: opts.transport } : {}),
    });
  }

  get name(): string {
    return this.server.name;
  }

  start(): Promise<void> {
    return (this.starting ??= this.refresh().catch((e: Error) => {
      this.opts.logger.warn(
        { mcp_server: this.server.name, server: describeServer(this.server), err_message: e.message },
        'MCP server unavailable at start: its tools are not offered until it answers',
      );
      this.retryLater();
    }));
  }

  tools(): readonly Tool[] {
    return this.listed;
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.connection.close();
  }

  private retryLater(): void {
    if (this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.refresh().catch(() => this.retryLater());
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, this.opts.retryCapMs ?? 60_000);
  }

  /** Lists the tools (once at a time; a request meanwhile lists again after) and tells listeners of a change. */
  private refresh(): Promise<void> {
    if (this.listing) {
      this.listAgain = true;
      return this.listing;
    }
    this.listing = (async () => {
      try {
        do {
          this.listAgain = false;
          const infos = await this.connection.listTools();
          this.adopt(
            mcpTools(this.server, infos, (name, input, ctx, idempotent) =>
              this.connection.callTool(name, input, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal, idempotent, log: ctx.log }),
            ),
          );
        } while (this.listAgain && !this.closed);
      } finally {
        this.listing = null;
      }
    })();
    return this.listing;
  }

  private adopt(tools: Tool[]): void {
    this.retryMs = this.opts.retryBaseMs ?? 1000;
    if (fingerprint(tools) === fingerprint(this.listed)) return;
    this.listed = tools;
    this.opts.logger.info({ mcp_server: this.server.name, tools: tools.map((t) => t.name) }, 'MCP server tools listed');
    for (const l of this.listeners) l();
  }
}

/** The sources for an agent's MCP servers (nothing connects until the worker starts them). */
export function mcpToolSources(servers: readonly McpServer[], opts: McpSourceOptions): ToolSource[] {
  return servers.map((s) => new McpToolSource(s, opts));
}
