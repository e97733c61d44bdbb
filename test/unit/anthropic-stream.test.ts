import { describe, expect, it } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';
import { StreamAssembler } from '../../src/llm/anthropic-stream.ts';
import { toLlmResponse } from '../../src/llm/anthropic-wire.ts';
import { messageEvents } from '../support/fake-anthropic-sse.ts';

/** A tool_use answer as the API streams it (the shape of the API reference's example, verbatim). */
const toolUseStream: any[] = [
  {
    type: 'message_start',
    message: {
      id: 'msg_014p7',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-6',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 472, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 1200 },
    },
  },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Okay, let' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: "'s check the weather." } },
  { type: 'content_block_stop', index: 0 },
  { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_01T1x', name: 'get_weather', input: {} } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"location":' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: ' "San Francisco, CA", "unit": "fah' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'renheit"}' } },
  { type: 'content_block_stop', index: 1 },
  { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 89 } },
  { type: 'message_stop' },
];

function assemble(events: any[]): { texts: string[]; assembler: StreamAssembler } {
  const assembler = new StreamAssembler('asked-model');
  const texts: string[] = [];
  for (const event of events) {
    const text = assembler.add(event);
    if (text !== null) texts.push(text);
  }
  return { texts, assembler };
}

describe('StreamAssembler', () => {
  it('rebuilds the message from its events: text from deltas, tool input from JSON deltas, stop reason and usage', () => {
    const { texts, assembler } = assemble(toolUseStream);
    expect(texts).toEqual(['Okay, let', "'s check the weather."]);
    expect(assembler.finish('req_1')).toEqual({
      id: 'msg_014p7',
      model: 'claude-sonnet-4-6',
      stopReason: 'tool_use',
      requestId: 'req_1',
      attempts: 1,
      content: [
        { type: 'text', text: "Okay, let's check the weather." },
        { type: 'tool_use', id: 'toolu_01T1x', name: 'get_weather', input: { location: 'San Francisco, CA', unit: 'fahrenheit' } },
      ],
      usage: { inputTokens: 472, outputTokens: 89, cacheCreationInputTokens: 0, cacheReadInputTokens: 1200 },
    });
  });

  it('gives the same response as the non-streaming answer for every kind of block', () => {
    const message = {
      id: 'msg_2',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      stop_reason: 'pause_turn',
      stop_sequence: null,
      content: [
        { type: 'thinking', thinking: 'Let me think about it.', signature: 'sig==' },
        { type: 'redacted_thinking', data: 'opaque' },
        {
          type: 'text',
          text: 'See the source.',
          citations: [{ type: 'char_location', cited_text: 'x', document_index: 0, start_char_index: 0, end_char_index: 1 }],
        },
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'weather "today"' } },
        {
          type: 'web_search_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Ex' }],
        },
        { type: 'tool_use', id: 'toolu_2', name: 'noop', input: {} },
        { type: 'text', text: '  spaced\n\nlines  ' },
      ],
      usage: { input_tokens: 31, output_tokens: 77, cache_creation_input_tokens: 5, cache_read_input_tokens: 9 },
    };
    const { texts, assembler } = assemble(messageEvents(message).map((e) => e.data));
    expect(assembler.finish('req_2')).toEqual(toLlmResponse(message, 'req_2', 'asked-model'));
    expect(texts.join('')).toBe('See the source.  spaced\n\nlines  ');
  });

  it('reports the usage seen so far: input at message_start, the totals after message_delta', () => {
    const assembler = new StreamAssembler('m');
    expect(assembler.usage()).toBeNull();
    assembler.add(toolUseStream[0]);
    expect(assembler.usage()).toEqual({ inputTokens: 472, outputTokens: 2, cacheCreationInputTokens: 0, cacheReadInputTokens: 1200 });
    assembler.add({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 40, input_tokens: null, cache_read_input_tokens: 1300 },
    } as any);
    expect(assembler.usage()).toEqual({ inputTokens: 472, outputTokens: 40, cacheCreationInputTokens: 0, cacheReadInputTokens: 1300 });
  });

  it('fails retryably, with the usage seen, when the stream ends before message_stop', () => {
    for (const cut of [0, 1, 4, toolUseStream.length - 1]) {
      const { assembler } = assemble(toolUseStream.slice(0, cut));
      const error = (() => {
        try {
          assembler.finish('req_3');
        } catch (e) {
          return e as LlmError;
        }
      })();
      expect(error).toBeInstanceOf(LlmError);
      expect(error).toMatchObject({ status: -1, retryable: true, type: 'incomplete_stream', requestId: 'req_3' });
      expect(error!.usage).toEqual(cut === 0 ? null : expect.objectContaining({ inputTokens: 472 }));
    }
  });

  it('fails retryably on a stream that breaks the protocol', () => {
    const broken = [
      [{ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
      [toolUseStream[0], { type: 'content_block_delta', index: 3, delta: { type: 'text_delta', text: 'x' } }],
      [
        toolUseStream[0],
        toolUseStream[6],
        { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
        { type: 'content_block_stop', index: 1 },
      ],
      [toolUseStream[0], toolUseStream[0]],
    ];
    for (const events of broken) {
      expect(() => assemble(events)).toThrow(expect.objectContaining({ status: -1, retryable: true, type: 'invalid_response' }));
    }
  });

  it('normalises poison usage and null content like the non-streaming answer', () => {
    const start = {
      type: 'message_start',
      message: {
        id: 'm',
        type: 'message',
        role: 'assistant',
        model: 'x',
        content: null,
        stop_reason: null,
        usage: { input_tokens: -3, output_tokens: 1 },
      },
    };
    const { assembler } = assemble([
      start,
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 ** 40 } },
      { type: 'message_stop' },
    ]);
    const response = assembler.finish(null);
    expect(response.content).toEqual([]);
    expect(response.usage).toMatchObject({ inputTokens: 0, outputTokens: 2 ** 31 - 1 });
    expect(response.warnings).toHaveLength(2);
  });
});
