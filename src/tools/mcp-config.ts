/**
 * MCP servers as an agent names them: a command the worker starts and talks to over stdio, or the URL
 * of a Streamable HTTP server. Checked once, where the agent is defined, so a mistake fails at start
 * with one line; the connections themselves belong to the worker (mcp-connection.ts).
 */
import { z } from 'zod';
import type { NeedsApproval } from './types.ts';

/** What a server's tool annotations decided, corrected for one tool by the agent. */
export interface McpToolOverride {
  /** Whether a call may be re-run with the same idempotency key after a crash (annotations: idempotentHint or readOnlyHint). */
  idempotent?: boolean;
  /** Whether a call waits for a person first (annotations: destructiveHint). */
  needsApproval?: NeedsApproval;
}

interface McpServerCommon {
  /** Names the server in logs and in the errors the model sees: letters, digits, `_`, `.` or `-`, at most 64. */
  name: string;
  /** Put before each of its tools' names, e.g. `"files_"`, so two servers' tools cannot clash. Default none. */
  toolPrefix?: string;
  /** Only these of its tools (the server's names); default all of them. */
  include?: readonly string[];
  /**
   * Whether its tools wait for a person's approval: every one (`true`), none (`false`), or, by default,
   * those the server annotates `destructiveHint: true`.
   */
  needsApproval?: boolean;
  /** Per tool (the server's name): what the agent says instead of the server's annotations. */
  overrides?: Readonly<Record<string, McpToolOverride>>;
  /** How long connecting (and the protocol's handshake) may take, in milliseconds. Default 30000 (a first `npx -y` may download its server). */
  connectTimeoutMs?: number;
}

/** A server the worker starts as a child process and talks to over its stdin and stdout. */
export interface McpStdioServer extends McpServerCommon {
  command: string;
  args?: readonly string[];
  /** Its environment, on top of a safe few inherited variables (PATH, HOME, …): secrets are not passed unless named here. */
  env?: Readonly<Record<string, string>>;
  /** Its working directory; default the worker's. */
  cwd?: string;
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServer extends McpServerCommon {
  url: string;
  /** Sent with every request, e.g. `{ authorization: 'Bearer …' }`; never logged. */
  headers?: Readonly<Record<string, string>>;
}

export type McpServerOptions = McpStdioServer | McpHttpServer;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const Override = z.strictObject({
  idempotent: z.boolean().optional(),
  needsApproval: z
    .union([z.boolean(), z.custom<(input: unknown) => boolean | Promise<boolean>>((f) => typeof f === 'function')], {
      message: 'must be true, false or a function of the call input',
    })
    .optional(),
});

const ServerSchema = z
  .strictObject({
    name: z.string().regex(NAME, 'use 1 to 64 letters, digits, "_", "." or "-", starting with a letter or digit'),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
    url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
    headers: z.record(z.string(), z.string()).optional(),
    toolPrefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]{0,32}$/, 'use at most 32 letters, digits, "_" or "-"')
      .optional(),
    include: z.array(z.string().min(1)).optional(),
    needsApproval: z.boolean().optional(),
    overrides: z.record(z.string(), Override).optional(),
    connectTimeoutMs: z.number().int().min(1).max(600_000).optional(),
  })
  .superRefine((s, ctx) => {
    if ((s.command === undefined) === (s.url === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'give either command (a stdio server) or url (a Streamable HTTP server)' });
    }
    const stdioOnly = (['args', 'env', 'cwd'] as const).filter((k) => s[k] !== undefined);
    if (s.url !== undefined && stdioOnly.length)
      ctx.addIssue({ code: 'custom', message: `${stdioOnly.join(', ')} only apply to a command` });
    if (s.command !== undefined && s.headers !== undefined) ctx.addIssue({ code: 'custom', message: 'headers only apply to a url' });
  });

export const McpServersSchema = z.array(ServerSchema).superRefine((servers, ctx) => {
  const seen = new Set<string>();
  for (const s of servers) {
    if (seen.has(s.name)) ctx.addIssue({ code: 'custom', message: `two MCP servers are named "${s.name}"` });
    seen.add(s.name);
  }
});

/** A checked server definition, frozen. */
export type McpServer = Readonly<McpServerOptions>;

export function freezeMcpServers(servers: z.output<typeof McpServersSchema>): readonly McpServer[] {
  return Object.freeze(servers.map((s) => Object.freeze({ ...s }) as McpServer));
}

/** What the server is, for logs: its command or URL without credentials, query or headers. */
export function describeServer(server: McpServer): string {
  if ('command' in server && server.command !== undefined) return `command ${server.command}`;
  const url = new URL((server as McpHttpServer).url);
  return `${url.protocol}//${url.host}${url.pathname}`;
}
