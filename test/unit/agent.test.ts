import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkAgents, defineAgent } from '../../src/agents/define-agent.ts';
import { ConfigError } from '../../src/domain/errors.ts';
import { anthropic, openAiCompatible } from '../../src/llm/factories.ts';
import { defineTool } from '../../src/tools/types.ts';
import { tool } from '../../src/tools/zod-tool.ts';

const weather = tool({ name: 'get_weather', description: 'Weather.', input: z.object({ city: z.string() }), execute: async () => 'sunny' });
const clock = defineTool({ name: 'now', description: 'The time.', inputSchema: { type: 'object' }, execute: async () => '12:00' });

describe('defineAgent', () => {
  it('takes zod and JSON-Schema tools, and fills what is left out with null (the runtime defaults)', () => {
    const helper = defineAgent({ name: 'helper', system: 'Be brief.', tools: [weather, clock] });
    expect(helper).toEqual({
      name: 'helper',
      system: 'Be brief.',
      tools: [weather, clock],
      model: null,
      maxTokens: null,
      modelOptions: null,
      compaction: null,
      version: null,
      llm: null,
      mcpServers: [],
      workspace: null,
    });
    expect(Object.isFrozen(helper)).toBe(true);
    expect(defineAgent({ name: 'v2.agent', system: 's', tools: [], model: 'claude-x', maxTokens: 512, version: '2026-11' })).toMatchObject({
      model: 'claude-x',
      maxTokens: 512,
      version: '2026-11',
    });
  });

  it('takes a model client of its own, made by a factory, with the model its runs call by default', () => {
    const llm = openAiCompatible({
      apiKey: 'sk-proj-test-agent-0123456789',
      baseUrl: 'http://127.0.0.1:11434/v1',
      model: 'qwen3:8b',
      provider: 'ollama',
    });
    const helper = defineAgent({ name: 'helper', system: 'Be brief.', tools: [], llm });
    expect(helper.llm).toBe(llm);
    expect([llm.provider, llm.defaultModel]).toEqual(['ollama', 'qwen3:8b']);
    expect(checkAgents([helper], 'config')[0]!.llm).toBe(llm);
    expect(() => defineAgent({ name: 'helper', system: 's', tools: [], llm: { send() {} } as never })).toThrow(
      'invalid agent "helper": llm: must be a model client, e.g. openAiCompatible({ apiKey, baseUrl, model }) or anthropic({ apiKey })',
    );
  });

  it("refuses a factory's bad options in one line that never shows the key", () => {
    expect(() => openAiCompatible({ apiKey: '' })).toThrow('openAiCompatible: apiKey: must be a non-empty string');
    const badUrl = () => openAiCompatible({ apiKey: 'sk-proj-secret-0123456789', baseUrl: 'localhost:1234/v1' });
    expect(badUrl).toThrow('openAiCompatible: baseUrl: must be an http(s) URL');
    expect(badUrl).not.toThrow(/sk-proj-secret/);
    expect(() => anthropic({ apiKey: 'sk-ant-x', retryBaseMs: 500, retryCapMs: 10 })).toThrow(
      'anthropic: retryCapMs must be at least retryBaseMs',
    );
    expect(anthropic({ apiKey: 'sk-ant-x' })).toMatchObject({ provider: 'anthropic', defaultModel: null });
  });

  it('takes an agent with no tools of its own, e.g. one whose tools all come from MCP servers', () => {
    const desk = defineAgent({
      name: 'desk',
      system: 'You run the order desk.',
      mcpServers: [{ name: 'files', command: 'node', args: ['files-server.js'] }],
    });
    expect(desk.tools).toEqual([]);
    expect(desk.mcpServers.map((s) => s.name)).toEqual(['files']);
    expect(defineAgent({ name: 'plain', system: 'Be brief.' }).tools).toEqual([]);
    expect(checkAgents([desk, { name: 'bare', system: 's' }], 'here').map((a) => [a.name, a.tools])).toEqual([
      ['desk', []],
      ['bare', []],
    ]);
  });

  it('takes the compaction settings the docs name, or false, and refuses others by name', () => {
    const reader = defineAgent({ name: 'reader', system: 's', compaction: { contextWindow: 1_000_000, keepTurns: 3 } });
    expect(reader.compaction).toEqual({ contextWindow: 1_000_000, keepTurns: 3 });
    expect(defineAgent({ name: 'short', system: 's', compaction: false }).compaction).toBe(false);
    expect(() => defineAgent({ name: 'x', system: 's', compaction: { atTokens: 5 } as never })).toThrow(
      'invalid agent "x": compaction: Unrecognized key: "atTokens"',
    );
  });

  it('names the agent and the first thing wrong with it', () => {
    const bad = (over: Record<string, unknown>) => () =>
      defineAgent({ name: 'helper', system: 'Be brief.', tools: [weather], ...over } as never);
    expect(bad({ name: 'my agent' })).toThrow(ConfigError);
    expect(bad({ name: 'my agent' })).toThrow(
      'invalid agent "my agent": name: use 1 to 64 letters, digits, "_", "." or "-", starting with a letter or digit',
    );
    expect(bad({ system: '  ' })).toThrow('invalid agent "helper": system: must not be blank');
    expect(bad({ tools: [weather, weather] })).toThrow('invalid agent "helper": tools: two tools are named "get_weather"');
    expect(bad({ tools: [{ name: 'x' }] })).toThrow('invalid agent "helper": tools.0: must be a tool made with tool() or defineTool()');
    expect(bad({ maxTokens: 0 })).toThrow('invalid agent "helper": maxTokens: Too small: expected number to be >=1');
    expect(bad({ tool: [weather] })).toThrow('invalid agent "helper": Unrecognized key: "tool"');
  });
});

describe('the agents a runtime is given', () => {
  const helper = defineAgent({ name: 'helper', system: 's', tools: [weather] });

  it('are checked as defineAgent would, read back from its result or from a plain object', () => {
    expect(checkAgents([helper], 'here')).toEqual([helper]);
    expect(checkAgents([{ name: 'plain', system: 's', tools: [clock] }], 'here')[0]).toMatchObject({ name: 'plain', model: null });
    expect(() => checkAgents([], 'createRuntime')).toThrow('createRuntime: agents must be a non-empty array of defineAgent(…) values');
    expect(() => checkAgents(undefined, 'createRuntime')).toThrow('createRuntime: agents must be a non-empty array');
    expect(() => checkAgents([helper, null], 'here')).toThrow('here: agents.1 is not an agent definition');
    expect(() => checkAgents([helper, { ...helper }], 'here')).toThrow('here: two agents are named "helper"');
  });
});
