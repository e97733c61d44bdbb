import { describe, expect, it } from 'vitest';
import { LlmError } from '../../src/errors.ts';
import { TimeLimitedLlmClient } from '../../src/llm/time-limited.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from '../../src/llm/types.ts';

const request: LlmRequest = { model: 'm', maxTokens: 10, system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] };
const ok = { id: null, model: 'm', content: [], stopReason: 'end_turn', requestId: null, attempts: 1,
  usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 } } satisfies LlmResponse;

/** Answers after `ms`, or fails as the SDK does when its signal aborts; remembers the signal it got. */
function slowProvider(ms: number) {
  const seen: { signal?: AbortSignal } = {};
  const client: LlmClient = {
    provider: 'slow',
    send: (_req, options: LlmCallOptions = {}) =>
      new Promise((resolve, reject) => {
        seen.signal = options.signal;
        if (options.signal?.aborted) return reject(new LlmError(-1, 'request aborted', { type: 'aborted' }));
        const timer = setTimeout(() => resolve(ok), ms);
        options.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(new LlmError(-1, 'request aborted', { type: 'aborted' }));
        });
      }),
  };
  return { client, seen };
}

describe('TimeLimitedLlmClient', () => {
  it('passes a fast answer through', async () => {
    const { client } = slowProvider(5);
    await expect(new TimeLimitedLlmClient(client, 1000).send(request)).resolves.toEqual(ok);
  });

  it('aborts the delegate and fails the attempt as a retryable step timeout', async () => {
    const { client, seen } = slowProvider(60_000);
    const error = await new TimeLimitedLlmClient(client, 30).send(request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmError);
    expect(error).toMatchObject({ status: -1, message: 'step timeout', retryable: true, type: 'timeout' });
    expect(seen.signal?.aborted).toBe(true);
  });

  it('does not wait for a delegate that ignores its signal', async () => {
    const deaf: LlmClient = { provider: 'deaf', send: () => new Promise(() => {}) };
    const started = Date.now();
    await expect(new TimeLimitedLlmClient(deaf, 30).send(request)).rejects.toMatchObject({ status: -1, message: 'step timeout' });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("passes the caller's abort on and rethrows the delegate's error unchanged, not as a timeout", async () => {
    const { client, seen } = slowProvider(60_000);
    const controller = new AbortController();
    const pending = new TimeLimitedLlmClient(client, 10_000).send(request, { signal: controller.signal });
    controller.abort(new Error('user cancelled'));
    await expect(pending).rejects.toMatchObject({ message: 'request aborted', type: 'aborted' });
    expect(seen.signal?.reason).toEqual(new Error('user cancelled'));
  });

  it('aborts the delegate at once when the caller signal is already aborted', async () => {
    const { client, seen } = slowProvider(60_000);
    const controller = new AbortController();
    controller.abort();
    await expect(new TimeLimitedLlmClient(client, 10_000).send(request, { signal: controller.signal })).rejects.toMatchObject({ type: 'aborted' });
    expect(seen.signal?.aborted).toBe(true);
  });

  it('turns a synchronous throw of the delegate into a rejection', async () => {
    const broken: LlmClient = { provider: 'broken', send: () => { throw new TypeError('bug'); } };
    await expect(new TimeLimitedLlmClient(broken, 1000).send(request)).rejects.toThrow('bug');
  });
});
