/**
 * An MCP server's tools as the agent's tools (pure: no I/O). The server's input schema is what the
 * model is told; its annotations decide durability, as hints the agent may correct per tool:
 *
 *   idempotentHint or readOnlyHint → idempotent: re-run with the same key after a crash
 *   neither                        → non-idempotent: after a crash mid-call, never re-run by guess
 *   destructiveHint: true          → needs approval (unless the agent says otherwise)
 *
 * A tool without annotations is taken as non-idempotent and not needing approval.
 */
import type { CallToolResult, Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import { ToolError } from '../domain/errors.ts';
import type { McpServer } from './mcp-config.ts';
import type { NeedsApproval, Tool, ToolContext } from './types.ts';

export type { McpToolInfo };

/** Calls one tool on the server by its own name; resolves with the server's result. */
export type McpCall = (
  mcpName: string,
  input: Record<string, unknown>,
  context: ToolContext,
  idempotent: boolean,
) => Promise<CallToolResult>;

/** The name the model knows the tool by: the agent's prefix, then the server's name with what the model's API refuses replaced by `_`. */
export function agentToolName(server: McpServer, mcpName: string): string {
  return `${server.toolPrefix ?? ''}${mcpName}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
}

export function durabilityOf(server: McpServer, info: McpToolInfo): { idempotent: boolean; needsApproval: NeedsApproval } {
  const hints = info.annotations ?? {};
  const override = server.overrides?.[info.name] ?? {};
  return {
    idempotent: override.idempotent ?? (hints.idempotentHint === true || hints.readOnlyHint === true),
    needsApproval: override.needsApproval ?? server.needsApproval ?? (hints.destructiveHint === true && hints.readOnlyHint !== true),
  };
}

function describe(block: CallToolResult['content'][number]): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type} ${block.mimeType}, ${Math.floor((block.data.length * 3) / 4)} bytes, not shown]`;
    case 'resource':
      return 'text' in block.resource && typeof block.resource.text === 'string'
        ? block.resource.text
        : `[resource ${block.resource.uri}${block.resource.mimeType ? ` (${block.resource.mimeType})` : ''}, binary, not shown]`;
    case 'resource_link':
      return `[resource ${block.uri}${block.name ? ` "${block.name}"` : ''}]`;
    default:
      return JSON.stringify(block);
  }
}

/**
 * The text the model sees for a result: its content blocks one per paragraph (what cannot be shown is
 * named), or its structured content as JSON when it has no blocks. A result the server marks as an
 * error throws, so the model gets it as an is_error result.
 */
export function resultText(result: CallToolResult): string {
  const blocks = Array.isArray(result.content) ? result.content : [];
  const text = blocks.length
    ? blocks.map(describe).join('\n\n')
    : result.structuredContent !== undefined
      ? JSON.stringify(result.structuredContent)
      : '';
  if (result.isError) throw new ToolError(text || 'the tool reported an error and said nothing more');
  return text;
}

/** The agent's tool for one of the server's tools. */
export function mcpTool(server: McpServer, info: McpToolInfo, call: McpCall): Tool {
  const { $schema: _dialect, ...inputSchema } = info.inputSchema as Record<string, unknown>;
  const { idempotent, needsApproval } = durabilityOf(server, info);
  const description =
    info.description?.trim() || info.annotations?.title || info.title || `${info.name} (from the MCP server "${server.name}")`;
  return {
    name: agentToolName(server, info.name),
    description,
    inputSchema,
    idempotent,
    needsApproval,
    execute: async (input: Record<string, unknown>, context: ToolContext) => resultText(await call(info.name, input, context, idempotent)),
  };
}

/** The server's tools the agent takes (its `include` list, if any), in the server's order. */
export function mcpTools(server: McpServer, infos: readonly McpToolInfo[], call: McpCall): Tool[] {
  const wanted = server.include ? new Set(server.include) : null;
  return infos.filter((t) => !wanted || wanted.has(t.name)).map((t) => mcpTool(server, t, call));
}
