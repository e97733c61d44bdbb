import { describe, expect, it } from 'vitest';
import { callOptions, mergeModelOptions, ModelOptionsSchema, optionsProblem } from '../../src/llm/model-options.ts';
import { toMessageParams } from '../../src/llm/anthropic-wire.ts';
import { chatRefusal, reasoningEffort, toChatParams } from '../../src/llm/openai-wire.ts';
import type { LlmRequest } from '../../src/llm/types.ts';

const request = (options: LlmRequest['options'], tools = true): LlmRequest => ({
  model: 'm',
  maxTokens: 4_096,
  system: null,
  messages: [{ role: 'user', content: 'hi' }],
  tools: tools ? [{ name: 'f', description: 'f', input_schema: { type: 'object' } }] : [],
  options,
});

describe('model options', () => {
  it("merges a run's options over the agent's, field by field", () => {
    expect(mergeModelOptions({ temperature: 0.2, topK: 5 }, { temperature: 0.7 })).toEqual({ temperature: 0.7, topK: 5 });
    expect(mergeModelOptions(null, null)).toBeNull();
  });

  it('finds the combinations the Messages API refuses with thinking on, by field', () => {
    const thinking = { type: 'enabled', budgetTokens: 2_048 } as const;
    expect(optionsProblem({ thinking, toolChoice: 'auto' }, 4_096)).toBeNull();
    expect(optionsProblem({ thinking, toolChoice: 'none', temperature: 1, topP: 0.95 }, 4_096)).toBeNull();
    expect(optionsProblem({ thinking, toolChoice: 'any' }, 4_096)?.path).toBe('modelOptions.toolChoice');
    expect(optionsProblem({ thinking, toolChoice: { name: 'f' } }, 4_096)?.path).toBe('modelOptions.toolChoice');
    expect(optionsProblem({ thinking, topK: 3 }, 4_096)?.path).toBe('modelOptions.topK');
    expect(optionsProblem({ thinking, topP: 0.5 }, 4_096)?.path).toBe('modelOptions.topP');
    expect(optionsProblem({ thinking }, 2_048)).toEqual({
      path: 'modelOptions.thinking.budgetTokens',
      message: 'must be below maxTokens (2048)',
    });
    expect(optionsProblem({ toolChoice: 'any', temperature: 0 }, 10)).toBeNull();
    expect(ModelOptionsSchema.safeParse({ thinking: { type: 'enabled', budgetTokens: 1_023 } }).success).toBe(false);
  });

  it('cuts a thinking budget to the call and turns thinking off when even the minimum no longer fits', () => {
    const options = { thinking: { type: 'enabled', budgetTokens: 8_000 }, maxTokens: 16_000, temperature: 1 } as const;
    expect(callOptions(options, 16_000)).toEqual({ thinking: { type: 'enabled', budgetTokens: 8_000 }, temperature: 1 });
    expect(callOptions(options, 5_000)).toEqual({ thinking: { type: 'enabled', budgetTokens: 4_999 }, temperature: 1 });
    expect(callOptions(options, 1_000)).toEqual({ temperature: 1 });
    expect(callOptions(null, 1_000)).toBeUndefined();
  });
});

describe('on the wire', () => {
  it('Messages API: thinking, sampling, stop sequences and tool choice in its names; no tool choice without tools', () => {
    const params = toMessageParams(
      request({
        thinking: { type: 'enabled', budgetTokens: 2_048 },
        temperature: 1,
        topP: 0.97,
        stopSequences: ['END'],
        toolChoice: 'none',
      }),
    );
    expect(params).toMatchObject({
      thinking: { type: 'enabled', budget_tokens: 2_048 },
      temperature: 1,
      top_p: 0.97,
      stop_sequences: ['END'],
      tool_choice: { type: 'none' },
    });
    expect(toMessageParams(request({ thinking: { type: 'adaptive' } })).thinking).toEqual({ type: 'adaptive' });
    expect(toMessageParams(request({ toolChoice: { name: 'f' } })).tool_choice).toEqual({ type: 'tool', name: 'f' });
    expect(toMessageParams(request({ toolChoice: 'any' }, false)).tool_choice).toBeUndefined();
    expect(toMessageParams(request(undefined))).not.toHaveProperty('temperature');
  });

  it('Chat Completions: its equivalents (reasoning effort, required), and a refusal by name where it has none', () => {
    const params = toChatParams(
      request({ thinking: { type: 'enabled', budgetTokens: 20_000 }, temperature: 0.3, stopSequences: ['END'], toolChoice: 'any' }),
    );
    expect(params).toMatchObject({ reasoning_effort: 'high', temperature: 0.3, stop: ['END'], tool_choice: 'required' });
    expect(toChatParams(request({ toolChoice: { name: 'f' } })).tool_choice).toEqual({ type: 'function', function: { name: 'f' } });
    expect(reasoningEffort({ type: 'enabled', budgetTokens: 2_048 })).toBe('low');
    expect(chatRefusal({ topK: 3 })).toEqual({ path: 'modelOptions.topK', message: 'the Chat Completions API has no top_k' });
    expect(() => toChatParams(request({ topK: 3 }))).toThrow('modelOptions.topK: the Chat Completions API has no top_k');
  });
});
