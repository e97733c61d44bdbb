/**
 * What AnthropicClient's own HTTP transport (node:http, no SDK) is answerable for, against the fake
 * Messages API: the request it sends, its time limit on the wait for an answer, the caller's abort
 * before and during an answer, error answers that are not the API's JSON, and a long-lived signal
 * left as it was found.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { ANTHROPIC_VERSION, flattenHead, MessagesEndpoint, MessagesExchange } from '../../src/llm/anthropic-http.ts';
import { toMessageParams } from '../../src/llm/anthropic-wire.ts';
import { TimeLimitedLlmClient } from '../../src/llm/time-limited.ts';
import type { LlmCallOptions, LlmRequest } from '../../src/llm/types.ts';
import { fake, useFakeAnthropic } from '../support/fake-anthropic.ts';
import { failure } from '../support/llm-failure.ts';
import { optimized, optimizeNextCall, ropePieces } from '../support/heap-ropes.ts';
import { textChunks } from '../support/fake-anthropic-sse.ts';

const API_KEY = 'sk-ant-test-transport-0123456789';
const server = useFakeAnthropic(API_KEY);

const ask: LlmRequest = {
  model: 'claude-sonnet-4-6',
  maxTokens: 256,
  system: 'Be brief.',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [{ name: 'lookup', description: 'Looks a key up.', input_schema: { type: 'object', properties: { key: { type: 'string' } } } }],
};
const ANSWER = 'one two three four five six';
const usage = { input_tokens: 321, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
const client = (streaming: boolean, more: { timeoutMs?: number; baseUrl?: string } = {}) =>
  new AnthropicClient({ apiKey: API_KEY, baseUrl: more.baseUrl ?? server.url, streaming, timeoutMs: more.timeoutMs });

describe.each([
  ['streamed', true],
  ['not streamed', false],
])('the transport, %s', (_mode, streaming) => {
  it('POSTs the request to /v1/messages with the key, the API version and JSON, whether or not the base URL ends with a slash', async () => {
    server.text('a').text('b');
    await client(streaming).send(ask);
    await client(streaming, { baseUrl: `${server.url}/` }).send(ask);
    for (const request of server.requests) {
      expect(request).toMatchObject({ method: 'POST', path: '/v1/messages', invalid: null });
      expect(request.headers).toMatchObject({
        authorization: `Bearer ${API_KEY}`,
        'anthropic-version': ANTHROPIC_VERSION,
        'content-type': 'application/json',
        accept: 'application/json',
      });
      expect(request.body).toEqual(streaming ? { ...toMessageParams(ask), stream: true } : toMessageParams(ask));
    }
  });

  it("names the host (and a port that is not the protocol's default), gives the body's length in bytes and keeps the connection open", async () => {
    server.text('a');
    const accented: LlmRequest = { ...ask, messages: [{ role: 'user', content: 'déjà vu ✓ 日本' }] };
    await client(streaming).send(accented);
    const [request] = server.requests;
    const sent = JSON.stringify(streaming ? { ...toMessageParams(accented), stream: true } : toMessageParams(accented));
    expect(request!.headers).toMatchObject({
      host: new URL(server.url).host,
      'content-length': String(Buffer.byteLength(sent)),
      connection: 'keep-alive',
    });
    expect(request!.headers).not.toHaveProperty('transfer-encoding');
  });

  it('gives up on an answer whose headers are later than timeoutMs: LlmError(-1, "request timed out"), the connection closed', async () => {
    server.delay(5_000).text('too late');
    const error = await failure(client(streaming, { timeoutMs: 200 }).send(ask));
    expect(error).toMatchObject({ status: -1, type: 'timeout', message: 'request timed out', retryable: true, requestId: null });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });

  it("fails as aborted when the caller aborts before the answer's headers, and closes the connection", async () => {
    server.delay(5_000).text('too late');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const error = await failure(client(streaming).send(ask, { signal: controller.signal }));
    expect(error).toMatchObject({ status: -1, type: 'aborted', message: 'request aborted', retryable: true });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });

  it('sends nothing when the signal is aborted already', async () => {
    const error = await failure(client(streaming).send(ask, { signal: AbortSignal.abort() }));
    expect(error).toMatchObject({ status: -1, type: 'aborted' });
    expect(server.requests).toHaveLength(0);
  });

  it('gives an error answer that is not JSON as "HTTP <status>", with its request id and retry-after', async () => {
    server
      .enqueue({ ...fake.html(503), headers: { 'retry-after': '2' } })
      .enqueue({ status: 502, body: null, raw: { contentType: 'text/plain', text: 'Bad Gateway' } });
    const html = await failure(client(streaming).send(ask));
    expect(html).toMatchObject({
      status: 503,
      message: 'HTTP 503',
      type: null,
      requestId: 'req_fake_1',
      retryAfterMs: 2000,
      retryable: true,
    });
    const text = await failure(client(streaming).send(ask));
    expect(text).toMatchObject({ status: 502, message: 'HTTP 502', type: null, requestId: 'req_fake_2', retryable: true });
  });

  it("reads a 429's retry-after-ms before its retry-after, and the server's x-should-retry", async () => {
    server.enqueue({
      ...fake.error(429, 'rate_limit_error', 'slow down', { retryAfter: 9, retryAfterMs: 1500 }),
      headers: { 'retry-after': '9', 'retry-after-ms': '1500', 'x-should-retry': 'false' },
    });
    const error = await failure(client(streaming).send(ask));
    expect(error).toMatchObject({
      status: 429,
      type: 'rate_limit_error',
      message: 'slow down',
      retryAfterMs: 1500,
      requestId: 'req_fake_1',
      retryable: false,
    });
  });

  it('fails every call as not sent (0, not retried) when the base URL is not a URL', async () => {
    const error = await failure(client(streaming, { baseUrl: 'not a url' }).send(ask));
    expect(error).toMatchObject({ status: 0, type: 'client_error', retryable: false });
    expect(error.message).toMatch(/^request not sent: /);
  });

  it('fails as not sent (0, not retried), naming no key, when a header cannot be sent (a key read with its line end)', async () => {
    server.text('a');
    const badKey = new AnthropicClient({ apiKey: `${API_KEY}\n`, baseUrl: server.url, streaming });
    for (let i = 0; i < 2; i++) {
      const error = await failure(badKey.send(ask));
      expect(error).toMatchObject({ status: 0, type: 'client_error', retryable: false });
      expect(error.message).toMatch(/^request not sent: .*header/i);
      expect(error.message).not.toContain(API_KEY);
    }
    expect(server.requests).toHaveLength(0);
  });

  it('leaves no listener on a long-lived signal, whatever the outcome of each call', async () => {
    const controller = new AbortController();
    server
      .text('a')
      .error(500, 'api_error', 'boom')
      .enqueue(fake.cut(fake.text(ANSWER), 2))
      .text('b');
    for (let i = 0; i < 4; i++)
      await client(streaming)
        .send(ask, { signal: controller.signal })
        .catch(() => null);
    expect(server.requests.map((r) => r.status)).toEqual([200, 500, 200, 200]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});

describe('the transport, a request in flight', () => {
  it('keeps its head as one flat string, not the rope of its lines Node builds it as', async () => {
    const marker = `flat-head-${process.pid}`;
    const endpoint = (value: string) =>
      new MessagesEndpoint({ apiKey: API_KEY, baseUrl: server.url, timeoutMs: 10_000, headers: { 'x-marker': value } });
    // With the code that flattens the head optimized, as in a busy process: there a read whose result
    // goes unused, such as charCodeAt, flattens nothing, and the head stays a rope.
    const warm = endpoint('warming up');
    optimizeNextCall(flattenHead, () =>
      warm
        .open(2)
        .on('error', () => {})
        .destroy(),
    );
    const requests = [endpoint(marker).open(2), endpoint(marker).open(2)];
    try {
      expect(optimized(flattenHead)).toBe(true);
      const pieces = await ropePieces('ClientRequest', '_header', marker);
      expect(pieces).toHaveLength(2);
      for (const n of pieces) expect(n).toBeLessThanOrEqual(1);
    } finally {
      for (const request of requests) request.on('error', () => {}).destroy();
    }
  });
});

describe('the transport, streamed', () => {
  it('limits only the wait for the headers: a stream that takes longer than timeoutMs in all is read to its end', async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 60 } });
    const response = await client(true, { timeoutMs: 150 }).send(ask);
    expect(response.content).toEqual([{ type: 'text', text: ANSWER }]);
  });

  it('fails as aborted, with the usage reported so far, when the caller aborts in the middle of the answer; the stream is closed', async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 100 } });
    const controller = new AbortController();
    const seen: string[] = [];
    const options: LlmCallOptions = {
      signal: controller.signal,
      onText: (text) => {
        seen.push(text);
        if (seen.length === 2) controller.abort();
      },
    };
    const error = await failure(client(true).send(ask, options));
    expect(error).toMatchObject({ status: -1, type: 'aborted', message: 'request aborted', retryable: true });
    expect(error.usage).toMatchObject({ inputTokens: 321 });
    expect(seen).toEqual(textChunks(ANSWER).slice(0, 2));
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });

  it("keeps the time-limited decorator's limit on its own exchange: a stream that outlasts it is cut off as a step timeout, with the usage so far, the text before it only, the stream closed", async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 150 } });
    const controller = new AbortController();
    const seen: string[] = [];
    const limited = new TimeLimitedLlmClient(client(true), 350);
    const error = await failure(limited.send(ask, { signal: controller.signal, onText: (text) => seen.push(text) }));
    expect(error).toMatchObject({ status: -1, type: 'timeout', message: 'step timeout', retryable: true });
    expect(error.usage).toMatchObject({ inputTokens: 321 });
    const chunks = textChunks(ANSWER);
    expect(seen.length).toBeLessThan(chunks.length);
    expect(seen).toEqual(chunks.slice(0, seen.length));
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it("is handed the caller's own signal by the time-limited decorator, whose abort stays the caller's, not a timeout", async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 50 } });
    const controller = new AbortController();
    const listening: unknown[] = [];
    const options: LlmCallOptions = {
      signal: controller.signal,
      onText: () => {
        if (listening.length > 0) return;
        listening.push(...getEventListeners(controller.signal, 'abort'));
        controller.abort();
      },
    };
    const error = await failure(new TimeLimitedLlmClient(client(true), 5_000).send(ask, options));
    expect(error).toMatchObject({ status: -1, type: 'aborted', message: 'request aborted' });
    expect(error.usage).toMatchObject({ inputTokens: 321 });
    // The exchange itself listens: no AbortController of the decorator's stands between it and the caller.
    expect(listening).toEqual([expect.any(MessagesExchange)]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it("classifies an error event of a type it does not know as a 500, with the answer's request id and the usage so far", async () => {
    server.enqueue(fake.streamError(fake.text(ANSWER, usage), 2, 'something_new_error', 'Something new'));
    const texts: string[] = [];
    const error = await failure(client(true).send(ask, { onText: (t) => texts.push(t) }));
    expect(error).toMatchObject({
      status: 500,
      type: 'something_new_error',
      message: 'Something new',
      requestId: 'req_fake_1',
      retryable: true,
    });
    expect(error.usage).toMatchObject({ inputTokens: 321 });
    expect(texts).toEqual(textChunks(ANSWER).slice(0, 2));
  });
});
