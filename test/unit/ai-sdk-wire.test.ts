/**
 * aiSdk's mapping, without a database: the log's messages and a call's options as a LanguageModelV3
 * call, the parts of `doStream` folded into the answer, and failures classified for the retries. The
 * model is the AI SDK's own MockLanguageModelV3 and its errors are the SDK's own APICallError, so the
 * shapes are the specification's, not a copy of them.
 */
import { APICallError } from '@ai-sdk/provider';
import type { LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { ConfigError, LlmError } from '../../src/domain/errors.ts';
import type { Message } from '../../src/domain/types.ts';
import { aiSdk, providerName, streamError, toLlmError, type AiSdkLanguageModel } from '../../src/llm/ai-sdk.ts';
import { AiSdkStreamAssembler, type ModelContext, normaliseAiSdkUsage, toCallOptions, toPrompt } from '../../src/llm/ai-sdk-wire.ts';
import type { LlmRequest } from '../../src/llm/types.ts';
import { deepFreeze, thrown } from '../support/llm-failure.ts';

const request = (messages: Message[], extra: Partial<LlmRequest> = {}): LlmRequest => ({
  model: 'gemini-2.5-pro',
  maxTokens: 1000,
  system: null,
  messages,
  tools: [],
  ...extra,
});

const google: ModelContext = {
  provider: 'google.generative-ai',
  modelId: 'gemini-2.5-pro',
  supportedUrls: { '*': [/^https:\/\/generativelanguage\.googleapis\.com\/v1beta\/files\/.*$/] },
};

const usage = (input: number, output: number, cacheRead = 0, cacheWrite = 0): LanguageModelV3Usage => ({
  inputTokens: { total: input, noCache: input - cacheRead - cacheWrite, cacheRead, cacheWrite },
  outputTokens: { total: output, text: output, reasoning: 0 },
});

function assemble(parts: LanguageModelV3StreamPart[], model = 'gemini-2.5-pro') {
  const assembler = new AiSdkStreamAssembler(model);
  const streamed = parts.map((p) => assembler.add(p)).filter((s) => s !== null);
  return { assembler, streamed };
}

describe('the log as a LanguageModelV3 prompt', () => {
  it('maps system, user content, assistant text, tool calls and thinking, and tool results, without touching the log', () => {
    const messages = deepFreeze<Message[]>([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is on these?' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          { type: 'document', title: 'report.pdf', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'plain notes' } },
          { type: 'image', source: { type: 'url', url: 'https://generativelanguage.googleapis.com/v1beta/files/abc' } },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Look at the chart.', signature: 'sig-anthropic' },
          { type: 'redacted_thinking', data: 'ENCRYPTED' },
          { type: 'text', text: '' },
          { type: 'text', text: 'Let me check.' },
          {
            type: 'tool_use',
            id: 'call_1',
            name: 'lookup',
            input: { q: 'chart' },
            provider_metadata: { google: { thoughtSignature: 'ts-1' } },
          },
          { type: 'tool_use', id: 'call_2', name: 'screenshot', input: {} },
          { type: 'tool_use', id: 'call_3', name: 'lookup', input: { q: 'x' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: '{"found":true}' },
          {
            type: 'tool_result',
            tool_use_id: 'call_2',
            content: [
              { type: 'text', text: 'Here:' },
              { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
            ],
          },
          {
            type: 'tool_result',
            tool_use_id: 'call_3',
            content: [
              { type: 'text', text: 'no ' },
              { type: 'text', text: 'index' },
            ],
            is_error: true,
          },
          { type: 'text', text: 'And now?' },
        ],
      },
    ]);
    const prompt = toPrompt(request(messages, { system: 'Be brief.' }), google);
    expect(prompt).toEqual([
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is on these?' },
          { type: 'file', mediaType: 'image/png', data: 'iVBORw0KGgo=' },
          { type: 'file', mediaType: 'application/pdf', data: 'JVBERi0=', filename: 'report.pdf' },
          { type: 'file', mediaType: 'text/plain', data: Buffer.from('plain notes').toString('base64') },
          { type: 'file', mediaType: 'image/*', data: new URL('https://generativelanguage.googleapis.com/v1beta/files/abc') },
        ],
      },
      {
        role: 'assistant',
        content: [
          // A thinking block of the runtime's own Anthropic client: its signature where @ai-sdk/anthropic reads it.
          { type: 'reasoning', text: 'Look at the chart.', providerOptions: { anthropic: { signature: 'sig-anthropic' } } },
          { type: 'reasoning', text: '', providerOptions: { anthropic: { redactedData: 'ENCRYPTED' } } },
          { type: 'text', text: 'Let me check.' },
          {
            type: 'tool-call',
            toolCallId: 'call_1',
            toolName: 'lookup',
            input: { q: 'chart' },
            providerOptions: { google: { thoughtSignature: 'ts-1' } },
          },
          { type: 'tool-call', toolCallId: 'call_2', toolName: 'screenshot', input: {} },
          { type: 'tool-call', toolCallId: 'call_3', toolName: 'lookup', input: { q: 'x' } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'call_1', toolName: 'lookup', output: { type: 'text', value: '{"found":true}' } },
          {
            type: 'tool-result',
            toolCallId: 'call_2',
            toolName: 'screenshot',
            output: {
              type: 'content',
              value: [
                { type: 'text', text: 'Here:' },
                { type: 'image-data', data: '/9j/4AAQ', mediaType: 'image/jpeg' },
              ],
            },
          },
          { type: 'tool-result', toolCallId: 'call_3', toolName: 'lookup', output: { type: 'error-text', value: 'no index' } },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: 'And now?' }] },
    ]);
  });

  it('refuses, before the call, an image by a URL the model does not fetch, a block it cannot express, and a result for no call', () => {
    const byUrl = thrown(() =>
      toPrompt(
        request([{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }]),
        google,
      ),
    );
    expect(byUrl).toMatchObject({ status: 0, retryable: false, type: 'unsupported_content' });
    expect(byUrl.message).toBe(
      'message 0 holds an image by URL, which model "gemini-2.5-pro" of google.generative-ai does not fetch itself: send it as base64',
    );
    // Anthropic's models fetch any http(s) image: the URL goes as it is.
    const anthropicUrls = { ...google, provider: 'anthropic.messages', supportedUrls: { 'image/*': [/^https?:\/\/.*$/] } };
    expect(
      toPrompt(
        request([{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }]),
        anthropicUrls,
      )[0],
    ).toEqual({ role: 'user', content: [{ type: 'file', mediaType: 'image/*', data: new URL('https://example.com/a.png') }] });

    const server = thrown(() =>
      toPrompt(
        request([{ role: 'assistant', content: [{ type: 'server_tool_use', id: 'srv_1', name: 'web_search', input: {} }] }]),
        google,
      ),
    );
    expect(server).toMatchObject({ status: 0, retryable: false, type: 'unsupported_content' });
    expect(server.message).toBe('message 0 holds a "server_tool_use" block, which aiSdk cannot send to an AI SDK model');

    const orphan = thrown(() =>
      toPrompt(request([{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'nope', content: 'x' }] }]), google),
    );
    expect(orphan.message).toContain('a tool_result for "nope", a call no earlier tool_use made');
  });

  it('passes back what the provider attached to each part, as its providerOptions', () => {
    const metadata = { openai: { itemId: 'rs_1', reasoningEncryptedContent: 'enc' } };
    const prompt = toPrompt(
      request([
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: '', provider_metadata: metadata },
            { type: 'text', text: 'Hello.', provider_metadata: { openai: { itemId: 'msg_1' } } },
          ],
        },
      ]),
      google,
    );
    expect(prompt[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: '', providerOptions: metadata },
        { type: 'text', text: 'Hello.', providerOptions: { openai: { itemId: 'msg_1' } } },
      ],
    });
  });
});

describe("a call's tools and options", () => {
  const tools = [{ name: 'lookup', description: 'Looks up.', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }];

  it('maps tools, max tokens, sampling, stop sequences and each tool choice', () => {
    const call = toCallOptions(
      request([{ role: 'user', content: 'hi' }], {
        tools,
        options: { temperature: 0.2, topP: 0.9, topK: 40, stopSequences: ['END'], toolChoice: 'any' },
      }),
      google,
    );
    expect(call).toEqual({
      prompt: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      maxOutputTokens: 1000,
      tools: [{ type: 'function', name: 'lookup', description: 'Looks up.', inputSchema: tools[0]!.input_schema }],
      temperature: 0.2,
      topP: 0.9,
      topK: 40,
      stopSequences: ['END'],
      toolChoice: { type: 'required' },
    });
    const choice = (toolChoice: NonNullable<LlmRequest['options']>['toolChoice']) =>
      toCallOptions(request([], { tools, options: { toolChoice } }), google).toolChoice;
    expect([choice('auto'), choice('none'), choice({ name: 'lookup' })]).toEqual([
      { type: 'auto' },
      { type: 'none' },
      { type: 'tool', toolName: 'lookup' },
    ]);
    // No options, no tools: nothing but the prompt and the max tokens.
    expect(Object.keys(toCallOptions(request([]), google))).toEqual(['prompt', 'maxOutputTokens']);
  });

  it('maps thinking to the options of the providers that have the same setting, over the client’s own', () => {
    const thinking = (provider: string, type: 'enabled' | 'adaptive', providerOptions?: ModelContext['providerOptions']) =>
      toCallOptions(request([], { options: { thinking: type === 'enabled' ? { type, budgetTokens: 2048 } : { type } } }), {
        ...google,
        provider,
        ...(providerOptions ? { providerOptions } : {}),
      }).providerOptions;
    expect(thinking('anthropic.messages', 'enabled')).toEqual({ anthropic: { thinking: { type: 'enabled', budgetTokens: 2048 } } });
    expect(thinking('vertex.anthropic.messages', 'adaptive')).toEqual({ anthropic: { thinking: { type: 'adaptive' } } });
    expect(thinking('amazon-bedrock', 'enabled')).toEqual({ bedrock: { reasoningConfig: { type: 'enabled', budgetTokens: 2048 } } });
    expect(thinking('google.generative-ai', 'enabled', { google: { safetySettings: [], thinkingConfig: { thinkingBudget: 0 } } })).toEqual({
      google: { safetySettings: [], thinkingConfig: { thinkingBudget: 2048, includeThoughts: true } },
    });
    expect(thinking('google.vertex.chat', 'adaptive')).toEqual({
      google: { thinkingConfig: { thinkingBudget: -1, includeThoughts: true } },
    });
    // The log's max tokens holds the budget; Anthropic's and Bedrock's providers add it on top, Google's does not.
    const maxOutput = (provider: string) =>
      toCallOptions(request([], { maxTokens: 8000, options: { thinking: { type: 'enabled', budgetTokens: 2048 } } }), {
        ...google,
        provider,
      }).maxOutputTokens;
    expect([maxOutput('anthropic.messages'), maxOutput('amazon-bedrock'), maxOutput('google.generative-ai')]).toEqual([5952, 5952, 8000]);
    // Without thinking, the client's own options go as they are.
    expect(toCallOptions(request([]), { ...google, providerOptions: { openai: { reasoningEffort: 'high' } } }).providerOptions).toEqual({
      openai: { reasoningEffort: 'high' },
    });
  });

  it('refuses thinking for a provider without such a setting, permanently, naming thinking', () => {
    for (const provider of ['openai.responses', 'mistral.chat', 'ollama.chat']) {
      const error = thrown(() =>
        toCallOptions(request([], { options: { thinking: { type: 'enabled', budgetTokens: 2048 } } }), { ...google, provider }),
      );
      expect(error).toMatchObject({ status: 0, retryable: false, type: 'unsupported_option' });
      expect(error.message).toMatch(new RegExp(`^thinking is not mapped for provider "${provider.replace('.', '\\.')}"`));
      expect(error.message).toContain('aiSdk(model, { providerOptions })');
    }
  });
});

describe('the stream as the answer', () => {
  it('joins text and reasoning by id in the order they began, parses tool calls, and keeps what the provider attached', () => {
    const { assembler, streamed } = assemble([
      { type: 'stream-start', warnings: [{ type: 'unsupported', feature: 'topK' }] },
      { type: 'response-metadata', id: 'resp_1', modelId: 'gemini-2.5-pro-002', timestamp: new Date(0) },
      { type: 'reasoning-start', id: 'r1' },
      { type: 'reasoning-delta', id: 'r1', delta: 'The user ' },
      { type: 'text-start', id: 't1' },
      { type: 'reasoning-delta', id: 'r1', delta: 'wants a lookup.' },
      { type: 'reasoning-delta', id: 'r1', delta: '', providerMetadata: { anthropic: { signature: 'sig-1' } } },
      { type: 'reasoning-end', id: 'r1' },
      { type: 'text-delta', id: 't1', delta: 'Looking ' },
      { type: 'text-delta', id: 't1', delta: 'it up.' },
      { type: 'text-end', id: 't1' },
      { type: 'tool-input-start', id: 'call_1', toolName: 'lookup' },
      { type: 'tool-input-delta', id: 'call_1', delta: '{"q":' },
      { type: 'tool-input-end', id: 'call_1' },
      {
        type: 'tool-call',
        toolCallId: 'call_1',
        toolName: 'lookup',
        input: '{"q":"chart"}',
        providerMetadata: { google: { thoughtSignature: 'ts' } },
      },
      { type: 'tool-call', toolCallId: 'call_2', toolName: 'ping', input: '' },
      { type: 'source', sourceType: 'url', id: 's1', url: 'https://example.com' },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_use' }, usage: usage(1200, 80, 1000, 50) },
    ]);
    expect(streamed).toEqual([
      { kind: 'thinking', text: 'The user ' },
      { kind: 'thinking', text: 'wants a lookup.' },
      { kind: 'text', text: 'Looking ' },
      { kind: 'text', text: 'it up.' },
    ]);
    expect(assembler.usage()).toEqual({ inputTokens: 150, outputTokens: 80, cacheCreationInputTokens: 50, cacheReadInputTokens: 1000 });
    expect(assembler.finish('req_1')).toEqual({
      id: 'resp_1',
      model: 'gemini-2.5-pro-002',
      content: [
        {
          type: 'thinking',
          thinking: 'The user wants a lookup.',
          signature: 'sig-1',
          provider_metadata: { anthropic: { signature: 'sig-1' } },
        },
        { type: 'text', text: 'Looking it up.' },
        {
          type: 'tool_use',
          id: 'call_1',
          name: 'lookup',
          input: { q: 'chart' },
          provider_metadata: { google: { thoughtSignature: 'ts' } },
        },
        { type: 'tool_use', id: 'call_2', name: 'ping', input: {} },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 150, outputTokens: 80, cacheCreationInputTokens: 50, cacheReadInputTokens: 1000 },
      requestId: 'req_1',
      attempts: 1,
      warnings: [
        'the provider warned: topK is not supported',
        'the answer held a "source" part: dropped, as the runtime neither sent nor can store it',
      ],
    });
  });

  it('keeps redacted reasoning as redacted_thinking, and sends what it logged back as the provider gave it', () => {
    const { assembler } = assemble([
      { type: 'reasoning-start', id: 'r0', providerMetadata: { anthropic: { redactedData: 'OPAQUE' } } },
      { type: 'reasoning-end', id: 'r0' },
      { type: 'text-delta', id: 't', delta: 'Done.' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'end_turn' }, usage: usage(10, 2) },
    ]);
    const response = assembler.finish(null);
    expect(response.content).toEqual([
      { type: 'redacted_thinking', data: 'OPAQUE', provider_metadata: { anthropic: { redactedData: 'OPAQUE' } } },
      { type: 'text', text: 'Done.' },
    ]);
    const prompt = toPrompt(
      request([
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: response.content },
      ]),
      google,
    );
    expect(prompt[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: '', providerOptions: { anthropic: { redactedData: 'OPAQUE' } } },
        { type: 'text', text: 'Done.' },
      ],
    });
  });

  it('maps each finish reason to a stop reason', () => {
    const stop = (unified: string, raw?: string) => {
      const { assembler } = assemble([
        { type: 'text-delta', id: 't', delta: 'x' },
        { type: 'finish', finishReason: { unified, raw } as never, usage: usage(1, 1) },
      ]);
      const r = assembler.finish(null);
      return [r.stopReason, r.warnings ?? []];
    };
    expect(stop('stop', 'STOP')).toEqual(['end_turn', []]);
    expect(stop('stop', 'stop_sequence')).toEqual(['stop_sequence', []]);
    expect(stop('length', 'MAX_TOKENS')).toEqual(['max_tokens', []]);
    expect(stop('length', 'model_context_window_exceeded')).toEqual(['model_context_window_exceeded', []]);
    expect(stop('tool-calls')).toEqual(['tool_use', []]);
    expect(stop('content-filter', 'SAFETY')).toEqual(['refusal', []]);
    expect(stop('other', 'FINISH_REASON_UNSPECIFIED')).toEqual([
      'end_turn',
      ['finish reason "other" (the provider\'s "FINISH_REASON_UNSPECIFIED") is not one the engine knows: taken as "end_turn"'],
    ]);
  });

  it('fails an unusable answer retryably, with its usage: cut short, tool input not JSON, a finish on an error', () => {
    const cut = thrown(() => assemble([{ type: 'text-delta', id: 't', delta: 'Half' }]).assembler.finish('req_2'));
    expect(cut).toMatchObject({ status: -1, retryable: true, type: 'incomplete_stream', requestId: 'req_2', usage: null });

    const notJson = thrown(() =>
      assemble([
        { type: 'tool-call', toolCallId: 'c', toolName: 'lookup', input: '{"q": "unterminated' },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage: usage(300, 20) },
      ]).assembler.finish(null),
    );
    expect(notJson).toMatchObject({ status: -1, retryable: true, type: 'invalid_response' });
    expect(notJson.message).toBe('the input of tool call 1 (lookup) is not JSON');
    expect(notJson.usage).toEqual({ inputTokens: 300, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 });

    const error = thrown(() =>
      assemble([
        { type: 'finish', finishReason: { unified: 'error', raw: 'MALFORMED_FUNCTION_CALL' }, usage: usage(40, 3) },
      ]).assembler.finish(null),
    );
    expect(error).toMatchObject({ status: -1, retryable: true, type: 'finish_error' });
    expect(error.message).toBe('the model stopped on an error (finish reason "MALFORMED_FUNCTION_CALL")');
    expect(error.usage?.inputTokens).toBe(40);
  });

  it('drops what is not an answer to this runtime, with a warning: a provider-run tool and its result, a file', () => {
    const { assembler } = assemble([
      { type: 'tool-call', toolCallId: 'srv', toolName: 'code_execution', input: '{}', providerExecuted: true },
      { type: 'tool-result', toolCallId: 'srv', toolName: 'code_execution', result: { ok: true } },
      { type: 'file', mediaType: 'image/png', data: 'iVBOR' },
      { type: 'text-delta', id: 't', delta: 'Here.' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'STOP' }, usage: usage(5, 1) },
    ]);
    const r = assembler.finish(null);
    expect(r.content).toEqual([{ type: 'text', text: 'Here.' }]);
    expect(r.warnings).toEqual([
      'the answer held a call of "code_execution" the provider ran itself: dropped, as the runtime neither sent nor can store it',
      'the answer held the result of "code_execution", a tool the provider ran itself: dropped, as the runtime neither sent nor can store it',
      'the answer held a "file" part: dropped, as the runtime neither sent nor can store it',
    ]);
  });

  it('counts usage as ours: input without the cache, clamped where a provider reports nonsense', () => {
    const warnings: string[] = [];
    // OpenAI's way: the total includes the cached part, no cache writes.
    expect(normaliseAiSdkUsage({ inputTokens: { total: 350, noCache: 94, cacheRead: 256 }, outputTokens: { total: 8 } }, warnings)).toEqual(
      {
        inputTokens: 94,
        outputTokens: 8,
        cacheCreationInputTokens: 0,
        cacheReadInputTokens: 256,
      },
    );
    // Only the non-cached count.
    expect(normaliseAiSdkUsage({ inputTokens: { noCache: 12 }, outputTokens: {} }, warnings).inputTokens).toBe(12);
    expect(warnings).toEqual([]);
    expect(normaliseAiSdkUsage({ inputTokens: { total: 10, cacheRead: 30 }, outputTokens: { total: -4 } }, warnings)).toEqual({
      inputTokens: 0,
      outputTokens: 0,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 30,
    });
    expect(warnings).toEqual([
      'usage.inputTokens: cache reads (30) and writes (0) exceed the total (10): input counted as 0',
      'usage.outputTokens.total was -4: counted as 0',
    ]);
  });
});

describe('failures, classified for the retries', () => {
  const apiError = (statusCode: number | undefined, extra: Partial<ConstructorParameters<typeof APICallError>[0]> = {}) =>
    new APICallError({
      message: statusCode ? `HTTP ${statusCode} from the provider` : 'Cannot connect to API: connect ECONNREFUSED 127.0.0.1:1',
      url: 'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=AIzaSECRET',
      requestBodyValues: { contents: [{ role: 'user', parts: [{ text: 'the whole private conversation' }] }] },
      ...(statusCode ? { statusCode } : { isRetryable: true }),
      ...extra,
    });

  it('retries 408, 409, 429, 5xx and 529 (and what the provider calls retryable); not 400, 401, 403, 404', () => {
    const verdict = (status: number) => toLlmError(apiError(status)).retryable;
    expect([408, 409, 429, 500, 503, 529].map(verdict)).toEqual([true, true, true, true, true, true]);
    expect([400, 401, 403, 404, 422].map(verdict)).toEqual([false, false, false, false, false]);
    expect(toLlmError(apiError(400, { isRetryable: true })).retryable).toBe(true);
  });

  it('waits as the server asks, names the request, and never carries the key or the request body', () => {
    const limited = toLlmError(
      apiError(429, {
        responseHeaders: { 'retry-after': '7', 'x-request-id': 'req_abc' },
        data: { error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } },
      }),
    );
    expect(limited).toMatchObject({ status: 429, retryable: true, retryAfterMs: 7000, requestId: 'req_abc', type: 'RESOURCE_EXHAUSTED' });
    expect(toLlmError(apiError(529, { responseHeaders: { 'retry-after-ms': '1500' } })).retryAfterMs).toBe(1500);
    const leaky = toLlmError(apiError(403, { message: 'denied for https://x.example/v1?key=AIzaSECRET and Bearer sk-live-123' }));
    expect(leaky.message).toBe('denied for https://x.example/v1?key=[redacted] and Bearer [redacted]');
    const all = JSON.stringify({ message: leaky.message, cause: String(leaky.cause ?? ''), details: leaky.details });
    expect(all).not.toContain('AIzaSECRET');
    expect(all).not.toContain('private conversation');
  });

  it('retries the network (an APICallError without a status, or fetch failing), and reports an abort as one', () => {
    const network = toLlmError(apiError(undefined));
    expect(network).toMatchObject({ status: -1, retryable: true, type: 'connection_error' });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:11434'), { code: 'ECONNREFUSED' });
    expect(toLlmError(new TypeError('fetch failed', { cause: refused }))).toMatchObject({
      status: -1,
      retryable: true,
      type: 'connection_error',
    });
    const abort = new DOMException('This operation was aborted', 'AbortError');
    expect(toLlmError(abort)).toMatchObject({ status: -1, type: 'aborted', message: 'request aborted' });
    // Refused by the provider's own code before sending (an unsupported setting): never sent, not retried.
    const unsent = toLlmError(
      Object.assign(new Error('Unsupported functionality: audio input'), { name: 'AI_UnsupportedFunctionalityError' }),
    );
    expect(unsent).toMatchObject({ status: 0, retryable: false, type: 'client_error' });
    // The same after the response began: the answer was unreadable, retried.
    expect(toLlmError(new Error('JSON parsing failed'), { responded: true })).toMatchObject({ status: -1, retryable: true });
  });

  it("classifies a stream's error part by the kind it names", () => {
    expect(streamError({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toMatchObject({
      status: 529,
      retryable: true,
      message: 'Overloaded',
    });
    expect(streamError({ message: 'bad input', type: 'invalid_request_error' })).toMatchObject({ status: 400, retryable: false });
    expect(streamError({ message: 'quota', code: 'insufficient_quota' })).toMatchObject({ status: 429, retryable: false });
    expect(streamError('something odd')).toMatchObject({ status: 500, retryable: true, message: 'something odd' });
    expect(streamError(apiError(503))).toMatchObject({ status: 503, retryable: true });
  });
});

describe('aiSdk(model)', () => {
  const parts = (text: string): LanguageModelV3StreamPart[] => [
    { type: 'stream-start', warnings: [] },
    { type: 'reasoning-delta', id: 'r', delta: 'Hmm.' },
    ...text.split(' ').map((w, i): LanguageModelV3StreamPart => ({ type: 'text-delta', id: 't', delta: i === 0 ? w : ` ${w}` })),
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(20, 5) },
  ];

  it('is the model as a client: its provider and model, text and thinking as they stream, usage, the abort signal', async () => {
    const model = new MockLanguageModelV3({
      provider: 'google.generative-ai',
      modelId: 'gemini-2.5-pro',
      doStream: async () => ({ stream: convertArrayToReadableStream(parts('All is well.')) }),
    });
    const typed: AiSdkLanguageModel = model; // a provider's model object fits the declared type as it is
    const llm = aiSdk(typed, { retryBaseMs: 0 });
    expect([llm.provider, llm.defaultModel]).toEqual(['google.generative-ai', 'gemini-2.5-pro']);
    const seen: string[] = [];
    const controller = new AbortController();
    const response = await llm.send(request([{ role: 'user', content: 'hi' }]), {
      signal: controller.signal,
      onText: (t, attempt) => seen.push(`${attempt} text ${t}`),
      onThinking: (t, attempt) => seen.push(`${attempt} thinking ${t}`),
      onUsage: (u) => seen.push(`usage ${u.inputTokens}/${u.outputTokens}`),
    });
    expect(seen).toEqual(['1 thinking Hmm.', '1 text All', '1 text  is', '1 text  well.', 'usage 20/5']);
    expect(response).toMatchObject({
      content: [
        { type: 'thinking', thinking: 'Hmm.' },
        { type: 'text', text: 'All is well.' },
      ],
      stopReason: 'end_turn',
      attempts: 1,
    });
    expect(model.doStreamCalls[0]!.abortSignal).toBeInstanceOf(AbortSignal);
  });

  it('retries a 429 and refuses a model it is not bound to, permanently', async () => {
    let calls = 0;
    const model = new MockLanguageModelV3({
      modelId: 'mistral-large-latest',
      provider: 'mistral.chat',
      doStream: async () => {
        if (++calls === 1)
          throw new APICallError({ message: 'Rate limit', url: 'https://api.mistral.ai', requestBodyValues: {}, statusCode: 429 });
        return { stream: convertArrayToReadableStream(parts('Fine.')) };
      },
    });
    const llm = aiSdk(model, { retryBaseMs: 0, retryCapMs: 0 });
    const response = await llm.send(request([{ role: 'user', content: 'hi' }], { model: 'mistral-large-latest' }));
    expect(response).toMatchObject({ attempts: 2, content: [{ type: 'thinking' }, { type: 'text', text: 'Fine.' }] });

    const other = await llm.send(request([{ role: 'user', content: 'hi' }], { model: 'claude-sonnet-4-6' })).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(LlmError);
    expect(other).toMatchObject({ status: 0, retryable: false, type: 'model_mismatch' });
    expect((other as LlmError).message).toBe(
      'the run\'s model is "claude-sonnet-4-6", but its client is aiSdk(mistral.chat "mistral-large-latest"), bound to that one model: leave the agent\'s and the run\'s model unset, or name "mistral-large-latest"',
    );
    expect(calls).toBe(2);
  });

  it('refuses what is not a v3 model, and options it does not have, when it is made', () => {
    expect(() => aiSdk('openai/gpt-5' as never)).toThrow(ConfigError);
    expect(() => aiSdk({ ...new MockLanguageModelV3(), specificationVersion: 'v2' } as never)).toThrow(
      'aiSdk: model "mock-model-id" of mock-provider implements specification "v2"; aiSdk takes "v3"',
    );
    expect(() => aiSdk(new MockLanguageModelV3(), { streaming: false } as never)).toThrow(ConfigError);
    expect(() => aiSdk(new MockLanguageModelV3(), { providerOptions: { openai: 'high' } } as never)).toThrow(
      "aiSdk: providerOptions.openai: must be an object of options by provider key, e.g. { openai: { reasoningEffort: 'high' } }",
    );
    expect(providerName('Ollama Chat/local')).toBe('ollama-chat-local');
  });
});
