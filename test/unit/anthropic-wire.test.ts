import { describe, expect, it } from 'vitest';
import { MAX_TOKEN_COUNT, type Message } from '../../src/domain/types.ts';
import { LlmError } from '../../src/domain/errors.ts';
import { toLlmResponse, toMessageParams } from '../../src/llm/anthropic-wire.ts';
import type { LlmRequest } from '../../src/llm/types.ts';

const EPHEMERAL = { type: 'ephemeral' };
const request = (messages: Message[], system: string | null = 'sys'): LlmRequest => ({
  model: 'm',
  maxTokens: 100,
  system,
  messages,
  tools: [],
});
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

  it('marks the last cacheable block, skipping thinking blocks', () => {
    const params = toMessageParams(
      request([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'thinking', thinking: 't', signature: 's' },
          ],
        },
      ]),
    );
    expect(params.messages[0]!.content).toEqual([
      { type: 'text', text: 'a', cache_control: EPHEMERAL },
      { type: 'thinking', thinking: 't', signature: 's' },
    ]);
  });

  it('leaves out empty text blocks, which the API refuses in a request, without touching the log', () => {
    const reply: Message = {
      role: 'assistant',
      content: [
        { type: 'text', text: '' },
        { type: 'tool_use', id: 'toolu_1', name: 'x', input: {} },
      ],
    };
    const messages: Message[] = [
      { role: 'user', content: 'q' },
      reply,
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' }] },
    ];
    const params = toMessageParams(request(messages));
    expect(params.messages[1]!.content).toEqual([{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }]);
    expect(reply.content).toHaveLength(2);
  });

  it('keeps breakpoints already set and adds its own only while fewer than four are set', () => {
    const marked = (text: string) => ({ type: 'text', text, cache_control: EPHEMERAL });
    const two = toMessageParams(
      request([
        { role: 'user', content: [marked('1'), marked('2')] },
        { role: 'assistant', content: 'ok' },
        {
          role: 'user',
          content: [
            { type: 'text', text: '3' },
            { type: 'text', text: '4' },
          ],
        },
      ]),
    );
    expect(breakpoints(two)).toBe(4);
    expect(two.messages[2]!.content).toEqual([{ type: 'text', text: '3' }, marked('4')]);

    const three = toMessageParams(
      request([
        { role: 'user', content: [marked('1'), marked('2'), marked('3')] },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'last' },
      ]),
    );
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

describe('toLlmResponse', () => {
  const message = (over: Record<string, unknown> = {}) => ({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-x',
    stop_reason: 'end_turn',
    stop_sequence: null,
    content: [{ type: 'text', text: 'hi' }],
    usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 2, cache_read_input_tokens: 3 },
    ...over,
  });

  it('keeps a sound answer as it is, with no warnings', () => {
    const response = toLlmResponse(message(), 'req_1', 'asked');
    expect(response).toEqual({
      id: 'msg_1',
      model: 'claude-x',
      content: [{ type: 'text', text: 'hi' }],
      stopReason: 'end_turn',
      requestId: 'req_1',
      attempts: 1,
      usage: { inputTokens: 10, outputTokens: 5, cacheCreationInputTokens: 2, cacheReadInputTokens: 3 },
    });
    expect('warnings' in response).toBe(false);
  });

  it('clamps poison usage into whole numbers in [0, 2^31-1] and says what it repaired', () => {
    const response = toLlmResponse(
      message({ usage: { input_tokens: -500, output_tokens: 12.6, cache_creation_input_tokens: 1e12, cache_read_input_tokens: 'many' } }),
      null,
      'asked',
    );
    expect(response.usage).toEqual({
      inputTokens: 0,
      outputTokens: 13,
      cacheCreationInputTokens: MAX_TOKEN_COUNT,
      cacheReadInputTokens: 0,
    });
    expect(response.warnings).toEqual([
      'usage.input_tokens was -500: counted as 0',
      'usage.output_tokens was 12.6: counted as 13',
      `usage.cache_creation_input_tokens was 1000000000000: counted as ${MAX_TOKEN_COUNT}`,
      'usage.cache_read_input_tokens was "many", not a number: counted as 0',
    ]);
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, {}, true]) {
      const { usage } = toLlmResponse(message({ usage: { input_tokens: value } }), null, 'asked');
      expect(Number.isInteger(usage.inputTokens) && usage.inputTokens >= 0 && usage.inputTokens <= MAX_TOKEN_COUNT).toBe(true);
    }
  });

  it('counts absent cache fields as 0 without a warning, and a missing usage as zeros with one', () => {
    expect(toLlmResponse(message({ usage: { input_tokens: 1, output_tokens: 2 } }), null, 'asked').warnings).toBeUndefined();
    const bare = toLlmResponse(message({ usage: null }), null, 'asked');
    expect(bare.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 });
    expect(bare.warnings).toEqual(['usage was null: counted as 0 tokens']);
  });

  it('takes content null, missing or not an array as no content, and drops items that are not blocks', () => {
    for (const content of [null, undefined, 'text', { type: 'text' }]) {
      const response = toLlmResponse(message({ content }), null, 'asked');
      expect(response.content).toEqual([]);
      expect(response.warnings).toHaveLength(1);
    }
    const mixed = toLlmResponse(message({ content: [{ type: 'text', text: 'a' }, null, 7, { no: 'type' }] }), null, 'asked');
    expect(mixed.content).toEqual([{ type: 'text', text: 'a' }]);
    expect(mixed.warnings).toEqual(['content held 3 item(s) that are not content blocks: dropped']);
  });

  it('fills a missing model with the one asked for and a missing stop reason with "unknown"', () => {
    expect(toLlmResponse(message({ model: undefined, stop_reason: null }), null, 'asked')).toMatchObject({
      model: 'asked',
      stopReason: 'unknown',
      id: 'msg_1',
    });
  });

  it('fails retryably (-1) on a body that is not a message: an HTML page, an empty body, nothing, an array', () => {
    for (const body of ['<html><body>Bad gateway</body></html>', '', undefined, [1]]) {
      const error = (() => {
        try {
          toLlmResponse(body, 'req_9', 'asked');
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(LlmError);
      expect(error).toMatchObject({ status: -1, retryable: true, type: 'invalid_response', requestId: 'req_9' });
    }
  });

  it('classifies an error body sent with a 200 by its type', () => {
    const body = (type: string) => ({ type: 'error', error: { type, message: `${type} happened` } });
    expect(() => toLlmResponse(body('overloaded_error'), null, 'm')).toThrow(
      expect.objectContaining({ status: 529, retryable: true, message: 'overloaded_error happened' }),
    );
    expect(() => toLlmResponse(body('invalid_request_error'), null, 'm')).toThrow(
      expect.objectContaining({ status: 400, retryable: false }),
    );
  });
});
