import { afterEach, describe, expect, it, vi } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';
import { MAX_TIMER_MS } from '../../src/util/sleep.ts';
import { TimeLimitedLlmClient } from '../../src/llm/time-limited.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from '../../src/llm/types.ts';

const request: LlmRequest = { model: 'm', maxTokens: 10, system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] };
const ok = {
  id: null,
  model: 'm',
  content: [],
  stopReason: 'end_turn',
  requestId: null,
  attempts: 1,
  usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
} satisfies LlmResponse;

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
    await expect(new TimeLimitedLlmClient(client, 10_000).send(request, { signal: controller.signal })).rejects.toMatchObject({
      type: 'aborted',
    });
    expect(seen.signal?.aborted).toBe(true);
  });

  it('turns a synchronous throw of the delegate into a rejection', async () => {
    const broken: LlmClient = {
      provider: 'broken',
      send: () => {
        throw new TypeError('bug');
      },
    };
    await expect(new TimeLimitedLlmClient(broken, 1000).send(request)).rejects.toThrow('bug');
  });

  it('puts the usage the delegate reported before the limit on the timeout, and drops what it streams after', async () => {
    const usage = { inputTokens: 812, outputTokens: 3, cacheCreationInputTokens: 0, cacheReadInputTokens: 100 };
    let late: (() => void) | undefined;
    const stalled: LlmClient = {
      provider: 'stalled',
      send: (_req, options: LlmCallOptions = {}) => {
        options.onUsage?.(usage);
        options.onText?.('The answer', 1);
        late = () => {
          options.onText?.(' arrives too late', 1);
          options.onUsage?.({ ...usage, outputTokens: 50 });
        };
        return new Promise(() => {});
      },
    };
    const texts: string[] = [];
    const usages: unknown[] = [];
    const error = await new TimeLimitedLlmClient(stalled, 30)
      .send(request, { onText: (t) => texts.push(t), onUsage: (u) => usages.push(u) })
      .catch((e: unknown) => e);
    late!();
    expect(error).toMatchObject({ status: -1, message: 'step timeout', usage });
    expect(texts).toEqual(['The answer']);
    expect(usages).toEqual([usage]);
  });

  describe('with a limit beyond what one timer can hold', () => {
    afterEach(() => vi.restoreAllMocks());

    it('arms no timer of 2^31 ms or more', async () => {
      const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
      const { client } = slowProvider(5);
      await expect(new TimeLimitedLlmClient(client, 2 ** 40).send(request)).resolves.toEqual(ok);
      const delays = setTimeoutSpy.mock.calls.map((call) => call[1] ?? 0);
      expect(delays).toContain(MAX_TIMER_MS);
      for (const d of delays) expect(d).toBeLessThanOrEqual(MAX_TIMER_MS);
    });
  });
});
