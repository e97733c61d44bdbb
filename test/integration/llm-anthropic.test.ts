/**
 * The Anthropic provider and the client stack over HTTP, against a local server
 * speaking the Messages API's wire format, streamed (`stream: true`, the default) and not.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Message } from '../../src/domain/types.ts';
import { LlmError } from '../../src/domain/errors.ts';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { createLlmClient, retryReason, TimeLimitedLlmClient, type LlmConfig } from '../../src/llm/index.ts';
import type { LlmRequest } from '../../src/llm/types.ts';
import { credentialOf, fake, startFakeAnthropic, useFakeAnthropic, type FakeResponse } from '../support/fake-anthropic.ts';
import { deepFreeze, failure } from '../support/llm-failure.ts';

const API_KEY = 'sk-ant-test-0123456789-SECRET';
const server = useFakeAnthropic(API_KEY);

const ask = (text: string): LlmRequest => ({
  model: 'claude-sonnet-4-6',
  maxTokens: 512,
  system: 'You are terse.',
  messages: [{ role: 'user', content: text }],
  tools: [],
});
let streaming = true;
const provider = () => new AnthropicClient({ apiKey: API_KEY, baseUrl: server.url, streaming });
const instantSleeper = { sleeps: [] as number[], sleep: async (ms: number) => void instantSleeper.sleeps.push(ms) };
function config(overrides: Partial<LlmConfig> = {}): LlmConfig {
  return {
    llmProvider: 'anthropic',
    anthropicApiKey: API_KEY,
    anthropicBaseUrl: server.url,
    demoLatencyMs: 0,
    stepTimeoutMs: 5000,
    maxAttempts: 3,
    retryBaseMs: 10,
    retryCapMs: 100,
    llmStreaming: streaming,
    ...overrides,
  };
}

describe.each([
  ['streamed', true],
  ['not streamed', false],
])('AnthropicClient over HTTP, %s', (_mode, streamed) => {
  beforeEach(() => {
    streaming = streamed;
  });

  it('asks for the mode it is configured for', async () => {
    server.text('pong');
    expect((await createLlmClient(config()).send(ask('ping'))).content).toEqual([{ type: 'text', text: 'pong' }]);
    expect(server.requests[0]!.streamed).toBe(streamed);
    expect(server.requests[0]!.body.stream).toBe(streamed ? true : undefined);
  });

  it('maps a 429 to an LlmError with the API message, retry-after and request id', async () => {
    server.error(429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit', { retryAfter: 7 });
    const error = await failure(provider().send(ask('hi')));
    expect(error).toMatchObject({ status: 429, type: 'rate_limit_error', retryAfterMs: 7000, requestId: 'req_fake_1', retryable: true });
    expect(error.message).toBe('Number of request tokens has exceeded your per-minute rate limit');
    expect(server.requests).toHaveLength(1);
  });

  it('gives the API message of a 400 and makes one call only, even behind the retry decorator', async () => {
    server.error(400, 'invalid_request_error', 'max_tokens: Input should be greater than or equal to 1');
    const error = await failure(createLlmClient(config(), { sleeper: instantSleeper }).send(ask('hi')));
    expect(error).toMatchObject({ status: 400, type: 'invalid_request_error', retryable: false });
    expect(error.message).toContain('max_tokens: Input should be greater than or equal to 1');
    expect(server.requests).toHaveLength(1);
  });

  it('retries a 529 to success through Retrying(TimeLimited(Anthropic))', async () => {
    server.error(529, 'overloaded_error', 'Overloaded').error(529, 'overloaded_error', 'Overloaded').text('pong');
    const reasons: string[] = [];
    const client = createLlmClient(config(), { sleeper: instantSleeper, onRetry: (e) => reasons.push(retryReason(e)) });
    const response = await client.send(ask('ping'));
    expect(response.content).toEqual([{ type: 'text', text: 'pong' }]);
    expect(response.attempts).toBe(3);
    expect(reasons).toEqual(['529', '529']);
    expect(server.requests).toHaveLength(3);
  });

  it('aborts a response slower than the step timeout, then retries', async () => {
    server.delay(10_000).text('too late').text('in time');
    const reasons: string[] = [];
    const client = createLlmClient(config({ stepTimeoutMs: 300 }), {
      sleeper: instantSleeper,
      onRetry: (e) => reasons.push(retryReason(e)),
    });
    const response = await client.send(ask('ping'));
    expect(response.content).toEqual([{ type: 'text', text: 'in time' }]);
    expect(response.attempts).toBe(2);
    expect(reasons).toEqual(['timeout']);
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(server.requests[0]!.status).toBeNull();
  });

  it('fails one slow attempt as LlmError(-1, "step timeout") and closes the connection', async () => {
    server.delay(10_000).text('too late');
    const error = await failure(new TimeLimitedLlmClient(provider(), 200).send(ask('ping')));
    expect(error).toMatchObject({ status: -1, message: 'step timeout', retryable: true });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });

  it('maps a dropped connection and a refused one to retryable -1 errors', async () => {
    server.hangUp();
    expect(await failure(provider().send(ask('hi')))).toMatchObject({ status: -1, retryable: true });
    const closed = await startFakeAnthropic();
    await closed.close();
    const refused = new AnthropicClient({ apiKey: API_KEY, baseUrl: closed.url });
    const error = await failure(refused.send(ask('hi')));
    expect(error).toMatchObject({ status: -1, type: 'connection_error' });
    expect(error.message).toMatch(/ECONNREFUSED/);
  });

  it('brings usage with cache fields, ids and the stop reason into the LlmResponse', async () => {
    server.reply({
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } },
      ],
      stopReason: 'tool_use',
      usage: { input_tokens: 812, output_tokens: 64, cache_creation_input_tokens: 1500, cache_read_input_tokens: 3000 },
    });
    const response = await provider().send(ask('find x'));
    expect(response).toMatchObject({
      model: 'claude-sonnet-4-6',
      stopReason: 'tool_use',
      requestId: 'req_fake_1',
      attempts: 1,
      usage: { inputTokens: 812, outputTokens: 64, cacheCreationInputTokens: 1500, cacheReadInputTokens: 3000 },
    });
    expect(response.id).toMatch(/^msg_fake_/);
    expect(response.content[1]).toEqual({ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } });
  });

  it('marks cache breakpoints on copies and leaves the conversation untouched', async () => {
    const messages: Message[] = [
      { role: 'user', content: 'Which acme tickets are overdue?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'list_tickets', input: { overdue: true } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '[]' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'None. Anything else?' }] },
      { role: 'user', content: 'Thanks' },
    ];
    const before = structuredClone(messages);
    const tools = [{ name: 'list_tickets', description: 'List tickets', input_schema: { type: 'object', properties: {} } }];
    server.text('You are welcome.');
    await provider().send({ ...ask(''), messages: deepFreeze(messages), tools });
    expect(messages).toEqual(before);

    const { headers, body, invalid } = server.requests[0]!;
    expect(invalid).toBeNull();
    expect(credentialOf(headers)).toBe(API_KEY);
    expect(body.system).toEqual([{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }]);
    expect(body.messages.at(-1).content).toEqual([{ type: 'text', text: 'Thanks', cache_control: { type: 'ephemeral' } }]);
    expect(body.messages[2].content[0].cache_control).toEqual({ type: 'ephemeral' });
    expect(body.messages[0].content).toBe('Which acme tickets are overdue?');
    expect(body.tools).toEqual(tools);
    const marked = JSON.stringify(body).split('"cache_control"').length - 1;
    expect(marked).toBeGreaterThanOrEqual(2);
    expect(marked).toBeLessThanOrEqual(4);
  });

  it('rejects what the real API rejects, with its kind of 400', async () => {
    const broken: Message[][] = [
      [{ role: 'assistant', content: 'hi' }],
      [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
      [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 't', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'x' }] },
      ],
      [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 't', input: {} }] },
        { role: 'user', content: 'no results' },
      ],
      [{ role: 'user', content: [1, 2, 3, 4, 5].map((n) => ({ type: 'text', text: `${n}`, cache_control: { type: 'ephemeral' } })) }],
    ];
    const expected = [
      /first message/,
      /roles must alternate/,
      /`tool_result` blocks: toolu_2.*corresponding `tool_use`/,
      /without `tool_result`.*toolu_1/,
      /maximum of 4 blocks/,
    ];
    for (const [i, messages] of broken.entries()) {
      const error = await failure(provider().send({ ...ask(''), messages }));
      expect(error).toMatchObject({ status: 400, type: 'invalid_request_error' });
      expect(error.message).toMatch(expected[i]!);
    }
    expect(server.requests.every((r) => r.invalid !== null)).toBe(true);
  });

  it('answers an empty script with a clear 500, or with the fallback', async () => {
    expect((await failure(provider().send(ask('hi')))).message).toMatch(/no scripted response left/);
    server.fallback((req) => ({ status: 200, body: { ...fallbackReply, model: req.body.model } }));
    expect((await provider().send(ask('hi'))).content).toEqual([{ type: 'text', text: 'fallback' }]);
    server.fallback(null);
  });

  it('rejects a wrong key with a 401 whose message does not contain any key', async () => {
    const error = await failure(new AnthropicClient({ apiKey: 'sk-ant-wrong-key', baseUrl: server.url, streaming }).send(ask('hi')));
    expect(error).toMatchObject({ status: 401, type: 'authentication_error', retryable: false });
    expect(error.message).not.toContain('sk-ant-wrong-key');
  });

  describe('answers that broke are transient: retried, then the call succeeds', () => {
    const long = () => fake.text('an answer long enough to be cut off somewhere in the middle of its body');
    it.each<[string, () => FakeResponse]>([
      ['a reply cut off mid-body', () => fake.cut(long(), 3)],
      ['an HTML page with status 200', () => fake.html(200)],
      ['an empty body with status 200', () => fake.empty()],
    ])('%s', async (_what, broken) => {
      server.enqueue(broken()).text('whole');
      const failed: LlmError[] = [];
      const response = await createLlmClient(config(), { sleeper: instantSleeper, onRetry: (e) => failed.push(e) }).send(ask('hi'));
      expect(response).toMatchObject({ content: [{ type: 'text', text: 'whole' }], attempts: 2 });
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ status: -1, retryable: true });
      expect(failed[0]!.message).not.toMatch(/request not sent/);
      expect(server.requests).toHaveLength(2);
    });
  });

  it('gives up at once on a retry-after longer than the cap: the error says to ask again in an hour', async () => {
    server.error(429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit', { retryAfter: 3600 });
    const sleeps: number[] = [];
    const error = await failure(
      createLlmClient(config({ retryCapMs: 30_000 }), { sleeper: { sleep: async (ms) => void sleeps.push(ms) } }).send(ask('hi')),
    );
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 3_600_000 });
    expect(sleeps).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  it('obeys x-should-retry, and retries 408 and 409 as the official SDKs do', async () => {
    server
      .enqueue({ ...fake.error(529, 'overloaded_error', 'Overloaded'), headers: { 'x-should-retry': 'false' } })
      .enqueue({ ...fake.error(400, 'invalid_request_error', 'try again'), headers: { 'x-should-retry': 'true' } })
      .error(408, 'timeout_error', 'Request Timeout')
      .error(409, 'conflict_error', 'Conflict')
      .text('through');
    const told = await failure(createLlmClient(config(), { sleeper: instantSleeper }).send(ask('hi')));
    expect(told).toMatchObject({ status: 529, retryable: false });
    expect(server.requests).toHaveLength(1);
    const response = await createLlmClient(config({ maxAttempts: 4 }), { sleeper: instantSleeper }).send(ask('hi'));
    expect(response).toMatchObject({ attempts: 4, content: [{ type: 'text', text: 'through' }] });
    expect(server.requests.map((r) => r.status)).toEqual([529, 400, 408, 409, 200]);
  });
});

describe('the API key', () => {
  it('never appears in an error, though the server echoes it in every error it sends', async () => {
    const echoing = await startFakeAnthropic({ apiKey: API_KEY, echoKey: true });
    try {
      echoing.enqueue(
        fake.error(429, 'rate_limit_error', 'slow down', { retryAfter: 1 }),
        fake.error(400, 'invalid_request_error', 'bad request'),
        fake.error(500, 'api_error', 'Internal server error'),
        fake.streamError(fake.text('one two three four five'), 2, 'overloaded_error', 'Overloaded'),
        fake.streamError(fake.text('one two three'), 1, 'invalid_request_error', 'refused mid-stream'),
      );
      const errors: LlmError[] = [];
      for (let i = 0; i < 5; i++)
        errors.push(await failure(new AnthropicClient({ apiKey: API_KEY, baseUrl: echoing.url }).send(ask('hi'))));
      errors.push(await failure(new AnthropicClient({ apiKey: 'sk-ant-wrong-key-ECHOED', baseUrl: echoing.url }).send(ask('hi'))));

      expect(errors.map((e) => e.status)).toEqual([429, 400, 500, 529, 400, 401]);
      // The server really sent each key back: the redaction is what keeps it out.
      const sent = echoing.requests.map((r) => r.errorMessage ?? '');
      sent.slice(0, 5).forEach((m) => expect(m).toContain(API_KEY));
      expect(sent[5]).toContain('sk-ant-wrong-key-ECHOED');
      for (const [i, error] of errors.entries()) {
        const key = i === 5 ? 'sk-ant-wrong-key-ECHOED' : API_KEY;
        expect(error.message).toContain('[redacted]');
        for (const text of [String(error), JSON.stringify(error), error.message]) expect(text).not.toContain(key);
      }
    } finally {
      await echoing.close();
    }
  });
});

const fallbackReply = {
  id: 'msg_fallback',
  type: 'message',
  role: 'assistant',
  content: [{ type: 'text', text: 'fallback' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
};
