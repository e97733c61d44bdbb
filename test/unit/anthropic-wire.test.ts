import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/domain.ts';
import { toMessageParams } from '../../src/llm/anthropic-wire.ts';
import type { LlmRequest } from '../../src/llm/types.ts';

const EPHEMERAL = { type: 'ephemeral' };
const request = (messages: Message[], system: string | null = 'sys'): LlmRequest => ({ model: 'm', maxTokens: 100, system, messages, tools: [] });
const breakpoints = (params: unknown) => JSON.stringify(params).split('"cache_control"').length - 1;

describe('toMessageParams', () => {
  it('marks the system prompt and turns a string last message into a marked text block', () => {
    const params = toMessageParams(request([{ role: 'user', content: 'hi' }]));
    expect(params.system).toEqual([{ type: 'text', text: 'sys', cache_control: EPHEMERAL }]);
    expect(params.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: EPHEMERAL }] }]);
    expect(params.tools).toBeUndefined();
  });

  it('leaves out system when there is none', () => {
    const params = toMessageParams(request([{ role: 'user', content: 'hi' }], null));
    expect(params.system).toBeUndefined();
    expect(breakpoints(params)).toBe(1);
  });

  it('marks the last cacheable block, skipping thinking blocks and empty text', () => {
    const params = toMessageParams(request([
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'thinking', thinking: 't', signature: 's' }, { type: 'text', text: '' }] },
    ]));
    expect(params.messages[0]!.content).toEqual([
      { type: 'text', text: 'a', cache_control: EPHEMERAL }, { type: 'thinking', thinking: 't', signature: 's' }, { type: 'text', text: '' },
    ]);
  });

  it('keeps breakpoints already set and adds its own only while fewer than four are set', () => {
    const marked = (text: string) => ({ type: 'text', text, cache_control: EPHEMERAL });
    const two = toMessageParams(request([
      { role: 'user', content: [marked('1'), marked('2')] },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: [{ type: 'text', text: '3' }, { type: 'text', text: '4' }] },
    ]));
    expect(breakpoints(two)).toBe(4);
    expect(two.messages[2]!.content).toEqual([{ type: 'text', text: '3' }, marked('4')]);

    const three = toMessageParams(request([
      { role: 'user', content: [marked('1'), marked('2'), marked('3')] },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'last' },
    ]));
    expect(breakpoints(three)).toBe(4);
    expect(three.messages[2]!.content).toBe('last');
  });

  it('copies what it marks and shares the rest', () => {
    const first: Message = { role: 'user', content: 'q' };
    const middle: Message = { role: 'assistant', content: [{ type: 'text', text: 'a' }] };
    const last: Message = { role: 'user', content: [{ type: 'text', text: 'b' }] };
    const params = toMessageParams(request([first, middle, last]));
    expect(params.messages[1]).toBe(middle);
    expect(params.messages[2]).not.toBe(last);
    expect(last.content).toEqual([{ type: 'text', text: 'b' }]);
    expect(first.content).toBe('q');
  });
});
