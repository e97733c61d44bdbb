/**
 * Streamed model calls through AnthropicClient against the fake Messages API's event streams: text
 * reported as it arrives and numbered by attempt, an attempt that fails mid-stream voided before the
 * next one streams, what the failed attempts were billed for counted, and the final message the same
 * as the non-streaming answer.
 */
import { describe, expect, it, vi } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { createLlmClient, type LlmConfig } from '../../src/llm/index.ts';
import type { LlmCallOptions, LlmRequest } from '../../src/llm/types.ts';
import { fake, useFakeAnthropic } from '../support/fake-anthropic.ts';
import { textChunks } from '../support/fake-anthropic-sse.ts';

const API_KEY = 'sk-ant-test-streaming-0123456789';
const server = useFakeAnthropic(API_KEY);

const ask: LlmRequest = {
  model: 'claude-sonnet-4-6',
  maxTokens: 512,
  system: 'Be brief.',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
};
const noWait = { sleep: async () => {} };
const client = (overrides: Partial<LlmConfig> = {}) =>
  createLlmClient(
    {
      llmProvider: 'anthropic',
      anthropicApiKey: API_KEY,
      anthropicBaseUrl: server.url,
      demoLatencyMs: 0,
      llmStreaming: true,
      stepTimeoutMs: 5_000,
      maxAttempts: 3,
      retryBaseMs: 10,
      retryCapMs: 100,
      ...overrides,
    },
    { sleeper: noWait },
  );

/** Options that record, in order, every text (with its attempt) and every voided attempt. */
function recorder() {
  const log: string[] = [];
  const options: LlmCallOptions = {
    onText: (text, attempt) => log.push(`${attempt}:${text}`),
    onAttemptFailed: (attempt, error) => log.push(`failed ${attempt} (${error.status})`),
  };
  return { log, options };
}

const ANSWER = 'The three overdue tickets are ACME-101, ACME-102 and ACME-107.';
const usage = { input_tokens: 812, output_tokens: 40, cache_creation_input_tokens: 100, cache_read_input_tokens: 3000 };

describe('a streamed model call', () => {
  it('reports the text while the answer is still being sent, and ends with the whole message', async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 40 } });
    const seen: { text: string; serverDone: boolean }[] = [];
    const response = await new AnthropicClient({ apiKey: API_KEY, baseUrl: server.url }).send(ask, {
      onText: (text, attempt) => {
        expect(attempt).toBe(1);
        seen.push({ text, serverDone: server.requests[0]!.finished });
      },
    });
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(seen.map((s) => s.text)).toEqual(textChunks(ANSWER));
    expect(seen[0]!.serverDone).toBe(false); // the first words arrived while the rest was still unsent
    expect(response).toMatchObject({
      content: [{ type: 'text', text: ANSWER }],
      stopReason: 'end_turn',
      requestId: 'req_fake_1',
      attempts: 1,
      usage: { inputTokens: 812, outputTokens: 40, cacheCreationInputTokens: 100, cacheReadInputTokens: 3000 },
    });
  });

  it('assembles exactly the response the non-streaming call gets, tool input JSON included', async () => {
    const reply = () =>
      fake.reply({
        content: [
          { type: 'thinking', thinking: 'The user wants overdue tickets.', signature: 'EqQBCgIYAhIM' },
          { type: 'text', text: 'Let me look.' },
          {
            type: 'tool_use',
            id: 'toolu_01A',
            name: 'list_tickets',
            input: { customer: 'acme', overdue: true, tags: ['a', 'b'], limit: 10, note: 'quote " and \\ and ü' },
          },
          { type: 'tool_use', id: 'toolu_01B', name: 'ping', input: {} },
        ],
        stopReason: 'tool_use',
        usage,
      });
    server.enqueue(reply(), reply());
    const streamed = await new AnthropicClient({ apiKey: API_KEY, baseUrl: server.url, streaming: true }).send(ask);
    const whole = await new AnthropicClient({ apiKey: API_KEY, baseUrl: server.url, streaming: false }).send(ask);
    expect(server.requests.map((r) => r.streamed)).toEqual([true, false]);
    const comparable = ({ id: _id, requestId: _r, ...rest }: typeof streamed) => rest;
    expect(comparable(streamed)).toEqual(comparable(whole));
    expect(streamed.content[2]).toEqual({
      type: 'tool_use',
      id: 'toolu_01A',
      name: 'list_tickets',
      input: { customer: 'acme', overdue: true, tags: ['a', 'b'], limit: 10, note: 'quote " and \\ and ü' },
    });
  });

  it('a 529 error event after 3 deltas, then success: attempt 1 is voided before attempt 2 streams', async () => {
    server.enqueue(
      fake.streamError(fake.text('Overdue are ACME-101, ACME-102 and more', usage), 3, 'overloaded_error', 'Overloaded'),
      fake.text(ANSWER, usage),
    );
    const { log, options } = recorder();
    const response = await client().send(ask, options);
    const first = textChunks('Overdue are ACME-101, ACME-102 and more').slice(0, 3);
    expect(log).toEqual([...first.map((t) => `1:${t}`), 'failed 1 (529)', ...textChunks(ANSWER).map((t) => `2:${t}`)]);
    expect(response).toMatchObject({ attempts: 2, content: [{ type: 'text', text: ANSWER }] });
    // Attempt 1 was billed for its input (message_start) and the one output token counted there.
    expect(response.failedAttemptsUsage).toEqual({
      inputTokens: 812,
      outputTokens: 1,
      cacheCreationInputTokens: 100,
      cacheReadInputTokens: 3000,
    });
  });

  it('a connection cut mid-stream is retried', async () => {
    server.enqueue(fake.cut(fake.text(ANSWER, usage), 2), fake.text(ANSWER, usage));
    const { log, options } = recorder();
    const response = await client().send(ask, options);
    expect(log.slice(0, 3)).toEqual([`1:${textChunks(ANSWER)[0]}`, `1:${textChunks(ANSWER)[1]}`, 'failed 1 (-1)']);
    expect(response).toMatchObject({ attempts: 2, content: [{ type: 'text', text: ANSWER }] });
    expect(response.failedAttemptsUsage).toMatchObject({ inputTokens: 812 });
  });

  it('an error event that stands for a 4xx is not retried, and the error carries what the attempt was billed', async () => {
    server.enqueue(fake.streamError(fake.text(ANSWER, usage), 1, 'invalid_request_error', 'Output blocked by content filtering policy'));
    const { log, options } = recorder();
    const error = (await client()
      .send(ask, options)
      .catch((e: unknown) => e)) as LlmError;
    expect(error).toBeInstanceOf(LlmError);
    expect(error).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      retryable: false,
      message: 'Output blocked by content filtering policy',
    });
    expect(error.usage).toMatchObject({ inputTokens: 812, outputTokens: 1 });
    expect(log).toEqual([`1:${textChunks(ANSWER)[0]}`]);
    expect(server.requests).toHaveLength(1);
  });

  it('every attempt failing mid-stream: the escaping error sums what each attempt was billed', async () => {
    const overloaded = () => fake.streamError(fake.text(ANSWER, usage), 2, 'overloaded_error', 'Overloaded');
    server.enqueue(overloaded(), overloaded(), overloaded());
    const error = (await client()
      .send(ask)
      .catch((e: unknown) => e)) as LlmError;
    expect(error).toMatchObject({ status: 529, retryable: true });
    expect(error.usage).toEqual({ inputTokens: 3 * 812, outputTokens: 3, cacheCreationInputTokens: 300, cacheReadInputTokens: 9000 });
  });

  it('a stream slower than the step timeout is aborted; the timeout counts the input it was billed for', async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 10_000 } }, fake.text(ANSWER, usage));
    const { log, options } = recorder();
    const response = await client({ stepTimeoutMs: 400 }).send(ask, options);
    expect(log[0]).toBe('failed 1 (-1)');
    expect(response.attempts).toBe(2);
    expect(response.failedAttemptsUsage).toMatchObject({ inputTokens: 812 });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true)); // the stream was really closed
  });

  it('an HTML page with status 200 instead of a stream is retried', async () => {
    server.enqueue(fake.html(200), fake.empty(), fake.text(ANSWER));
    const { log, options } = recorder();
    const response = await client().send(ask, options);
    expect(log).toEqual(['failed 1 (-1)', 'failed 2 (-1)', ...textChunks(ANSWER).map((t) => `3:${t}`)]);
    expect(response.attempts).toBe(3);
  });

  it("passes the caller's own failure in onText through unchanged, not as the provider's, and closes the stream", async () => {
    server.enqueue({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 20 } });
    const bug = new TypeError('the caller broke');
    const error = await client()
      .send(ask, {
        onText: () => {
          throw bug;
        },
      })
      .catch((e: unknown) => e);
    expect(error).toBe(bug);
    expect(server.requests).toHaveLength(1); // not retried
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });
});
