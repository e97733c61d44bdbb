import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/domain/types.ts';
import { statusOfChatError } from '../../src/llm/openai-error-object.ts';
import { ChatStreamAssembler } from '../../src/llm/openai-stream.ts';
import { toChatParams, toLlmResponse } from '../../src/llm/openai-wire.ts';
import type { LlmRequest } from '../../src/llm/types.ts';
import { deepFreeze, thrown } from '../support/llm-failure.ts';
import { ropePieces } from '../support/heap-ropes.ts';

const request = (messages: Message[], extra: Partial<LlmRequest> = {}): LlmRequest => ({
  model: 'gpt-5.4-mini',
  maxTokens: 100,
  system: null,
  messages,
  tools: [],
  ...extra,
});

describe('the log as Chat Completions messages', () => {
  it('maps a conversation with parallel tool calls, an error result and a reasoning block, without touching the log', () => {
    const messages = deepFreeze<Message[]>([
      { role: 'user', content: 'Which tickets are overdue?' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'private', signature: 'sig' },
          { type: 'text', text: 'Looking ' },
          { type: 'text', text: 'now.' },
          { type: 'tool_use', id: 'call_1', name: 'list', input: { overdue: true } },
          { type: 'tool_use', id: 'call_2', name: 'count', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: '["A-1"]' },
          { type: 'tool_result', tool_use_id: 'call_2', content: 'error: database down', is_error: true },
        ],
      },
    ]);
    const params = toChatParams(
      request(messages, {
        system: 'Be brief.',
        tools: [{ name: 'list', description: 'Lists.', input_schema: { type: 'object', properties: {} } }],
      }),
    );
    expect(params).toEqual({
      model: 'gpt-5.4-mini',
      max_completion_tokens: 100,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Which tickets are overdue?' },
        {
          role: 'assistant',
          content: 'Looking now.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'list', arguments: '{"overdue":true}' } },
            { id: 'call_2', type: 'function', function: { name: 'count', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '["A-1"]' },
        { role: 'tool', tool_call_id: 'call_2', content: 'Error: error: database down' },
      ],
      tools: [{ type: 'function', function: { name: 'list', description: 'Lists.', parameters: { type: 'object', properties: {} } } }],
    });
  });

  it('puts tool results before the text of the same user turn, and sends several text blocks as parts', () => {
    const params = toChatParams(
      request([
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'c', name: 't', input: {} }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'one' },
            { type: 'tool_result', tool_use_id: 'c', content: [{ type: 'text', text: 'ok' }] },
            { type: 'text', text: 'two' },
          ],
        },
      ]),
    );
    expect(params.messages.slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'c', content: 'ok' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'one' },
          { type: 'text', text: 'two' },
        ],
      },
    ]);
    expect(params.messages[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 't', arguments: '{}' } }],
    });
  });

  it('sends arguments that were not JSON back as the model wrote them', () => {
    const params = toChatParams(
      request([
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'c', name: 't', input: '{"q": ' }] },
      ]),
    );
    expect((params.messages[1] as any).tool_calls[0].function.arguments).toBe('{"q": ');
  });

  it('refuses, before sending, a block the API cannot express', () => {
    const error = thrown(() =>
      toChatParams(request([{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } }] }])),
    );
    expect(error.status).toBe(0);
    expect(error.retryable).toBe(false);
    expect(error.message).toBe('message 0 holds a "document" block, which the Chat Completions API cannot express');
  });

  it('sends user images as image_url parts and base64 PDFs as file parts, after the text', () => {
    const params = toChatParams(
      request([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare these.' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/b.jpg' } },
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'c.pdf' },
          ],
        },
      ]),
    );
    expect(params.messages[0]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'Compare these.' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        { type: 'image_url', image_url: { url: 'https://example.com/b.jpg' } },
        { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'c.pdf' } },
      ],
    });
  });
});

const completion = (
  message: Record<string, unknown>,
  finish: unknown = 'stop',
  usage: unknown = { prompt_tokens: 10, completion_tokens: 2 },
) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  model: 'gpt-5.4-mini-2026-03-17',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
  usage,
});

describe('a completion as our response', () => {
  it('maps text, tool calls, the finish reason and the usage with cached tokens', () => {
    const response = toLlmResponse(
      completion(
        {
          content: 'Let me look.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'list', arguments: '{"a":1}' } },
            { id: 'call_2', type: 'function', function: { name: 'ping', arguments: '' } },
          ],
        },
        'tool_calls',
        { prompt_tokens: 2_000, completion_tokens: 40, prompt_tokens_details: { cached_tokens: 1_536 } },
      ),
      'req_1',
      'gpt-5.4-mini',
    );
    expect(response).toEqual({
      id: 'chatcmpl-1',
      model: 'gpt-5.4-mini-2026-03-17',
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'call_1', name: 'list', input: { a: 1 } },
        { type: 'tool_use', id: 'call_2', name: 'ping', input: {} },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 464, outputTokens: 40, cacheCreationInputTokens: 0, cacheReadInputTokens: 1_536 },
      requestId: 'req_1',
      attempts: 1,
    });
  });

  it.each([
    ['stop', 'end_turn'],
    ['tool_calls', 'tool_use'],
    ['length', 'max_tokens'],
    ['content_filter', 'refusal'],
    ['function_call', 'unknown'],
    [null, 'unknown'],
  ])('finish_reason %s → %s', (finish, stop) => {
    const response = toLlmResponse(completion({ content: 'x' }, finish), null, 'm');
    expect(response.stopReason).toBe(stop);
    expect(response.warnings ?? []).toHaveLength(stop === 'unknown' ? 1 : 0);
  });

  it('keeps arguments that are not a JSON object as text, with a warning; makes up a missing id; drops a call without a name', () => {
    const response = toLlmResponse(
      completion(
        {
          content: null,
          tool_calls: [
            { type: 'function', function: { name: 'a', arguments: '[1, 2]' } },
            { id: 'c2', type: 'function', function: { arguments: '{}' } },
            { id: 'c3', type: 'function', function: { name: 'b', arguments: '{"x":' } },
          ],
        },
        'tool_calls',
      ),
      null,
      'm',
    );
    expect(response.content).toEqual([
      { type: 'tool_use', id: expect.stringMatching(/^call_made_up_1_/), name: 'a', input: '[1, 2]' },
      { type: 'tool_use', id: 'c3', name: 'b', input: '{"x":' },
    ]);
    expect(response.warnings).toEqual([
      'tool call 1 (a) has no id: one was made up',
      'the arguments of the call to a are not a JSON object: kept as text, and the tool is not run',
      'tool call 2 has no function name: dropped',
      'the arguments of the call to b are not a JSON object: kept as text, and the tool is not run',
    ]);
  });

  it('clamps cached tokens to the prompt and counts a missing usage as zero, saying so', () => {
    const over = toLlmResponse(
      completion({ content: 'x' }, 'stop', { prompt_tokens: 10, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 50 } }),
      null,
      'm',
    );
    expect(over.usage).toEqual({ inputTokens: 0, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 10 });
    expect(over.warnings).toEqual(['usage.prompt_tokens_details.cached_tokens (50) exceeds prompt_tokens (10): counted as 10']);
    const { usage: _, ...withoutUsage } = completion({ content: 'x' });
    const none = toLlmResponse(withoutUsage, null, 'm');
    expect(none.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 });
    expect(none.warnings).toEqual(['usage was missing: counted as 0 tokens']);
  });

  it('fails an answer that is not a completion: an error object by its kind, the rest as no usable answer', () => {
    expect(
      thrown(() => toLlmResponse({ error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } }, 'r', 'm')),
    ).toMatchObject({ status: 429, message: 'slow down', type: 'rate_limit_exceeded' });
    expect(thrown(() => toLlmResponse('<html>', null, 'm'))).toMatchObject({ status: -1, type: 'invalid_response' });
    expect(thrown(() => toLlmResponse({ id: 'x', choices: [] }, null, 'm'))).toMatchObject({
      status: -1,
      message: 'the answer holds no choice (HTTP 200)',
    });
  });

  it('reads the status of an error object without one: vLLM puts it in code, OpenAI names a kind, the rest is the server', () => {
    expect(statusOfChatError({ message: 'x', type: 'BadRequestError', code: 400 })).toBe(400);
    expect(statusOfChatError({ type: 'invalid_request_error', code: 'context_length_exceeded' })).toBe(400);
    expect(statusOfChatError({ type: 'server_error', code: null })).toBe(500);
    expect(statusOfChatError({ type: 'whatever' })).toBe(500);
    expect(statusOfChatError(null)).toBe(500);
  });
});

type Chunk = OpenAI.Chat.ChatCompletionChunk;
const chunk = (delta: Record<string, unknown>, finish: string | null = null, index = 0): Chunk =>
  ({
    id: 'chatcmpl-s',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-x',
    choices: [{ index, delta, finish_reason: finish }],
  }) as Chunk;

describe('a streamed completion, assembled', () => {
  it('reports each piece of text, joins the arguments of interleaved calls by index and ends as the completion would', () => {
    const a = new ChatStreamAssembler('gpt-requested');
    const texts = [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Checking ' }),
      chunk({ content: 'both.' }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'weather', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '{"q":' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { name: 'weather', arguments: '{"city":"Paris"}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"a"}' } }] }),
      chunk({ content: 'ignored' }, null, 1),
      chunk({}, 'tool_calls'),
    ].map((c) => a.add(c));
    expect(texts).toEqual([null, 'Checking ', 'both.', null, null, null, null, null, null]);
    expect(a.usage()).toBeNull();
    a.add({
      id: 'chatcmpl-s',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'gpt-x',
      choices: [],
      usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39, prompt_tokens_details: { cached_tokens: 10 } },
    } as Chunk);
    expect(a.usage()).toEqual({ inputTokens: 20, outputTokens: 9, cacheCreationInputTokens: 0, cacheReadInputTokens: 10 });
    expect(a.finish('req_9')).toMatchObject({
      id: 'chatcmpl-s',
      model: 'gpt-x',
      stopReason: 'tool_use',
      requestId: 'req_9',
      content: [
        { type: 'text', text: 'Checking both.' },
        { type: 'tool_use', id: 'call_a', name: 'lookup', input: { q: 'a' } },
        { type: 'tool_use', id: 'call_b', name: 'weather', input: { city: 'Paris' } },
      ],
    });
  });

  it('keeps the answer streamed in many pieces as one flat string, not a rope of its pieces (a run keeps it)', async () => {
    const a = new ChatStreamAssembler('gpt-requested');
    a.add(chunk({ role: 'assistant', content: 'openai-answer-kept-flat' }));
    for (let i = 1; i < 60; i++) a.add(chunk({ content: ` part ${i}` }));
    a.add(chunk({}, 'stop'));
    const response = a.finish(null);
    // Read before anything looks at the text's characters, which would flatten it itself.
    const pieces = await ropePieces('Object', 'text', 'openai-answer-kept-flat');
    expect(pieces).toHaveLength(1);
    expect(pieces[0]).toBeLessThanOrEqual(1);
    expect(response.content).toEqual([{ type: 'text', text: expect.stringContaining('part 59') }]);
  });

  it('fails a stream that ended before its finish reason as no usable answer, retryable', () => {
    const a = new ChatStreamAssembler('m');
    a.add(chunk({ content: 'half an ans' }));
    const error = thrown(() => a.finish('req_1'));
    expect(error).toMatchObject({
      status: -1,
      type: 'incomplete_stream',
      requestId: 'req_1',
      message: 'the stream ended before its finish_reason',
    });
    expect(error.retryable).toBe(true);
  });
});
