import { describe, expect, it } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';
import { StreamAssembler } from '../../src/llm/anthropic-stream.ts';
import { toLlmResponse } from '../../src/llm/anthropic-wire.ts';
import { messageEvents } from '../support/fake-anthropic-sse.ts';
import { ropePieces } from '../support/heap-ropes.ts';

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

function assemble(events: any[]): { texts: string[]; thinking: string[]; assembler: StreamAssembler } {
  const assembler = new StreamAssembler('asked-model');
  const texts: string[] = [];
  const thinking: string[] = [];
  for (const event of events) {
    const streamed = assembler.add(event);
    if (streamed?.type === 'text_delta') texts.push(streamed.text);
    if (streamed?.type === 'thinking_delta') thinking.push(streamed.thinking);
  }
  return { texts, thinking, assembler };
}

const start = (content: unknown[] = []) => ({
  type: 'message_start',
  message: {
    id: 'msg_t',
    type: 'message',
    role: 'assistant',
    model: 'claude-x',
    content,
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 1 },
  },
});
const end = [
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 20 } },
  { type: 'message_stop' },
];
const delta = (index: number, d: Record<string, unknown>) => ({ type: 'content_block_delta', index, delta: d });

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

  it('keeps a text and a thinking block streamed in many deltas as flat strings, not ropes of their deltas (a run keeps them)', async () => {
    const deltas = (type: 'text_delta' | 'thinking_delta', field: 'text' | 'thinking', head: string) =>
      Array.from({ length: 60 }, (_, i) => ({
        type: 'content_block_delta',
        index: type === 'text_delta' ? 1 : 0,
        delta: { type, [field]: i === 0 ? head : ` part ${i}` },
      }));
    const { assembler } = assemble([
      start(),
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      ...deltas('thinking_delta', 'thinking', 'thought-kept-flat'),
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      ...deltas('text_delta', 'text', 'answer-kept-flat'),
      { type: 'content_block_stop', index: 1 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 120 } },
      { type: 'message_stop' },
    ]);
    const response = assembler.finish(null);
    // Read before anything looks at the texts' characters, which would flatten them itself.
    const [thinking] = await ropePieces('Object', 'thinking', 'thought-kept-flat');
    const [text] = await ropePieces('Object', 'text', 'answer-kept-flat');
    expect([thinking, text]).toEqual([expect.any(Number), expect.any(Number)]);
    expect(Math.max(thinking!, text!)).toBeLessThanOrEqual(1);
    expect(response.content[1]).toMatchObject({ type: 'text', text: expect.stringContaining('part 59') });
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
    const { texts, thinking, assembler } = assemble(messageEvents(message).map((e) => e.data));
    expect(assembler.finish('req_2')).toEqual(toLlmResponse(message, 'req_2', 'asked-model'));
    expect(texts.join('')).toBe('See the source.  spaced\n\nlines  ');
    expect(thinking.join('')).toBe('Let me think about it.');
    expect(assembler.unknownTypes()).toEqual([]);
  });

  it('reports thinking text as it streams, apart from the answer text, and keeps thinking and redacted thinking as sent', () => {
    const signature = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=';
    const { texts, thinking, assembler } = assemble([
      start(),
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      delta(0, { type: 'thinking_delta', thinking: 'Deux ' }),
      delta(0, { type: 'thinking_delta', thinking: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'pensées ✓\n' }),
      delta(0, { type: 'signature_delta', signature }),
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'text', text: '' } },
      delta(2, { type: 'text_delta', text: 'Done.' }),
      { type: 'content_block_stop', index: 2 },
      ...end,
    ]);
    expect(thinking).toEqual(['Deux ', 'pensées ✓\n']);
    expect(texts).toEqual(['Done.']);
    const content = assembler.finish(null).content;
    expect(JSON.stringify(content)).toBe(
      JSON.stringify([
        { type: 'thinking', thinking: 'Deux pensées ✓\n', signature },
        { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' },
        { type: 'text', text: 'Done.' },
      ]),
    );
  });

  it('merges a delta of an unknown type into its block field by field, and keeps unknown blocks as they started', () => {
    const { assembler } = assemble([
      start(),
      { type: 'content_block_start', index: 0, content_block: { type: 'future_block', note: 'a', parts: [1], meta: { v: 1 } } },
      delta(0, { type: 'future_delta', note: 'b', parts: [2, 3], meta: { v: 2 }, extra: true }),
      delta(0, { type: 'future_delta', note: 'c' }),
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: 'Hi' } },
      // A "__proto__" key stays a key, and does not change the block's prototype.
      JSON.parse('{"type":"content_block_delta","index":1,"delta":{"type":"odd_delta","__proto__":{"polluted":true}}}'),
      { type: 'content_block_stop', index: 1 },
      ...end,
    ]);
    const [future, text] = assembler.finish(null).content;
    expect(future).toEqual({ type: 'future_block', note: 'abc', parts: [1, 2, 3], meta: { v: 2 }, extra: true });
    expect(Object.getPrototypeOf(text)).toBe(Object.prototype);
    expect(Object.keys(text!)).toEqual(['type', 'text', '__proto__']);
    expect(assembler.unknownTypes()).toEqual(['delta future_delta', 'delta odd_delta']);
  });

  it('skips events of an unknown type, before message_start and after, and records each type once', () => {
    const { assembler } = assemble([
      { type: 'stream_hello', note: 'x' },
      start([{ type: 'text', text: 'as started' }]),
      { type: 'ping' },
      { type: 'future_event', payload: { secret: 'never said' } },
      { type: 'future_event' },
      { type: 7 },
      ...end,
    ]);
    expect(assembler.finish(null).content).toEqual([{ type: 'text', text: 'as started' }]);
    expect(assembler.unknownTypes()).toEqual(['event stream_hello', 'event future_event', 'event number']);
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
