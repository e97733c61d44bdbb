import { describe, expect, it, vi } from 'vitest';
import { checkAgents, defineAgent } from '../../src/agents/define-agent.ts';
import { ConfigError, ToolError } from '../../src/domain/errors.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { type McpServer, type McpServerOptions } from '../../src/tools/mcp-config.ts';
import { agentToolName, durabilityOf, type McpToolInfo, mcpTools, resultText } from '../../src/tools/mcp-tools.ts';

const server = (extra: Partial<McpServerOptions> = {}): McpServer => ({ name: 'orders', command: 'node', ...extra }) as McpServer;
const info = (name: string, annotations?: McpToolInfo['annotations']): McpToolInfo => ({
  name,
  inputSchema: {
    type: 'object',
    properties: { id: { type: 'string' } },
    $schema: 'http://json-schema.org/draft-07/schema#',
  } as McpToolInfo['inputSchema'],
  ...(annotations ? { annotations } : {}),
});

describe('annotations decide durability', () => {
  it.each([
    ['read-only', { readOnlyHint: true }, { idempotent: true, needsApproval: false }],
    ['idempotent', { idempotentHint: true }, { idempotent: true, needsApproval: false }],
    ['destructive', { destructiveHint: true, idempotentHint: false }, { idempotent: false, needsApproval: true }],
    ['destructive but idempotent', { destructiveHint: true, idempotentHint: true }, { idempotent: true, needsApproval: true }],
    [
      'read-only and (meaninglessly) destructive',
      { readOnlyHint: true, destructiveHint: true },
      { idempotent: true, needsApproval: false },
    ],
    ['not annotated', undefined, { idempotent: false, needsApproval: false }],
  ])('%s', (_, annotations, expected) => {
    expect(durabilityOf(server(), info('t', annotations))).toEqual(expected);
  });

  it('lets the agent say otherwise, for the whole server or for one tool', () => {
    expect(durabilityOf(server({ needsApproval: false }), info('t', { destructiveHint: true }))).toMatchObject({ needsApproval: false });
    expect(durabilityOf(server({ needsApproval: true }), info('t', { readOnlyHint: true }))).toMatchObject({ needsApproval: true });
    const judge = () => true;
    const s = server({ overrides: { t: { idempotent: true, needsApproval: judge } } });
    expect(durabilityOf(s, info('t'))).toEqual({ idempotent: true, needsApproval: judge });
    expect(durabilityOf(s, info('other'))).toEqual({ idempotent: false, needsApproval: false });
  });
});

describe('the agent tool for a server tool', () => {
  it('keeps the input schema (without its dialect), calls the server by its own name and renders the result', async () => {
    const call = vi.fn(async () => ({ content: [{ type: 'text' as const, text: 'ok' }] }));
    const [t] = mcpTools(server({ toolPrefix: 'o_' }), [info('files.read', { readOnlyHint: true })], call);
    expect(t).toMatchObject({ name: 'o_files_read', description: 'files.read (from the MCP server "orders")', idempotent: true });
    expect(t!.inputSchema).toEqual({ type: 'object', properties: { id: { type: 'string' } } });
    const ctx = {
      idempotencyKey: 'toolu_1',
      runId: 'r' as never,
      signal: new AbortController().signal,
      log: createLogger({ level: 'silent' }),
    };
    await expect(t!.execute({ id: 'x' }, ctx)).resolves.toBe('ok');
    expect(call).toHaveBeenCalledWith('files.read', { id: 'x' }, ctx, true);
  });

  it('names tools the way the model API accepts', () => {
    expect(agentToolName(server(), 'a'.repeat(100))).toHaveLength(64);
    expect(agentToolName(server(), 'git/log:all')).toBe('git_log_all');
  });

  it('takes only the included tools', () => {
    const tools = mcpTools(server({ include: ['b'] }), [info('a'), info('b')], vi.fn());
    expect(tools.map((t) => t.name)).toEqual(['b']);
  });
});

describe('a result as the model sees it', () => {
  it('joins its blocks and names what it cannot show', () => {
    const text = resultText({
      content: [
        { type: 'text', text: 'first' },
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'file:///a.txt', text: 'inside a' } },
        { type: 'resource_link', uri: 'file:///b.bin', name: 'b' },
      ],
    });
    expect(text).toBe('first\n\n[image image/png, 3 bytes, not shown]\n\ninside a\n\n[resource file:///b.bin "b"]');
  });

  it('falls back to structured content, and throws a result marked as an error', () => {
    expect(resultText({ content: [], structuredContent: { n: 1 } })).toBe('{"n":1}');
    expect(() => resultText({ isError: true, content: [{ type: 'text', text: 'no such order' }] })).toThrow(new ToolError('no such order'));
  });
});

describe('defineAgent with MCP servers', () => {
  const agent = (mcpServers: unknown) => defineAgent({ name: 'a', system: 's', tools: [], mcpServers } as never);

  it('keeps a stdio and an HTTP server', () => {
    const a = agent([
      { name: 'files', command: 'npx', args: ['-y', 'some-server'] },
      { name: 'search', url: 'https://mcp.example.com/mcp', headers: { authorization: 'Bearer x' } },
    ]);
    expect(a.mcpServers.map((s) => s.name)).toEqual(['files', 'search']);
    expect(Object.isFrozen(a.mcpServers[0])).toBe(true);
  });

  it('keeps them for an agent of a --config module, given as a plain object', () => {
    const [a] = checkAgents(
      [{ name: 'a', system: 's', tools: [], mcpServers: [{ name: 'files', command: 'npx' }] }],
      '--config agents.mjs',
    );
    expect(a!.mcpServers).toEqual([{ name: 'files', command: 'npx' }]);
    expect(() => checkAgents([{ name: 'a', system: 's', tools: [], mcpServers: [{ name: 'files' }] }], '--config agents.mjs')).toThrow(
      /^--config agents.mjs: invalid agent "a": mcpServers.0: give either command/,
    );
  });

  it.each([
    [[{ name: 'x' }], /mcpServers.0: give either command/],
    [[{ name: 'x', command: 'a', url: 'http://h/' }], /give either command/],
    [[{ name: 'x', url: 'ftp://h/' }], /mcpServers.0.url: must be an http\(s\) URL/],
    [[{ name: 'x', url: 'http://h/', args: ['a'] }], /args only apply to a command/],
    [
      [
        { name: 'x', command: 'a' },
        { name: 'x', url: 'http://h/' },
      ],
      /two MCP servers are named "x"/,
    ],
    [[{ name: 'x', command: 'a', overrides: { t: { needsApproval: 'yes' } } }], /needsApproval/],
    [[{ name: 'x', command: 'a', toolPrefix: 'has space' }], /toolPrefix/],
  ])('refuses %j', (servers, message) => {
    expect(() => agent(servers)).toThrow(ConfigError);
    expect(() => agent(servers)).toThrow(message);
  });
});
