import { describe, expect, it } from 'vitest';
import { LlmError } from '../../src/errors.ts';
import { RetryingLlmClient, backoffMs, parseRetryAfterMs, retryReason, type Sleeper } from '../../src/llm/retrying.ts';
import { timerSleeper } from '../../src/llm/sleep.ts';
import type { LlmClient, LlmRequest, LlmResponse } from '../../src/llm/types.ts';

const request: LlmRequest = { model: 'm', maxTokens: 10, system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] };
const ok: LlmResponse = {
  id: 'msg_1', model: 'm', content: [{ type: 'text', text: 'hello' }], stopReason: 'end_turn',
  usage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 }, requestId: 'req_1', attempts: 1,
};

/** A provider that fails with the scripted errors in order, then answers. */
function scripted(...failures: unknown[]) {
  const client = {
    provider: 'scripted',
    calls: 0,
    async send(): Promise<LlmResponse> {
      const failure = failures[client.calls++];
      if (failure !== undefined) throw failure;
      return ok;
    },
  };
  return client satisfies LlmClient;
}

function recordingSleeper() {
  const waits: number[] = [];
  const sleeper: Sleeper = { sleep: async (ms) => void waits.push(ms) };
  return { waits, sleeper };
}

const policy = { maxAttempts: 5, baseMs: 500, capMs: 30_000 };
const rateLimited = () => new LlmError(429, 'rate limited', { retryAfterMs: 7000, type: 'rate_limit_error' });

describe('RetryingLlmClient', () => {
  it('waits at least retry-after between 429s and succeeds on the third call', async () => {
    const provider = scripted(rateLimited(), rateLimited());
    const { waits, sleeper } = recordingSleeper();
    const response = await new RetryingLlmClient(provider, policy, { sleeper }).send(request);
    expect(provider.calls).toBe(3);
    expect(waits).toHaveLength(2);
    for (const w of waits) expect(w).toBeGreaterThanOrEqual(7000);
    expect(response.attempts).toBe(3);
    expect(response.content).toEqual(ok.content);
  });

  it('makes exactly one call for a 400', async () => {
    const bad = new LlmError(400, 'messages: Field required', { type: 'invalid_request_error' });
    const provider = scripted(bad);
    const { waits, sleeper } = recordingSleeper();
    await expect(new RetryingLlmClient(provider, policy, { sleeper }).send(request)).rejects.toBe(bad);
    expect(provider.calls).toBe(1);
    expect(waits).toEqual([]);
  });

  it.each([401, 403, 404, 413, 422, 409])('never retries a %i', async (status) => {
    const provider = scripted(new LlmError(status, 'no'));
    await expect(new RetryingLlmClient(provider, policy, recordingSleeper()).send(request)).rejects.toMatchObject({ status });
    expect(provider.calls).toBe(1);
  });

  it.each([529, -1, 500, 502, 503, 504])('retries a %i', async (status) => {
    const provider = scripted(new LlmError(status, 'transient'));
    const response = await new RetryingLlmClient(provider, policy, recordingSleeper()).send(request);
    expect(provider.calls).toBe(2);
    expect(response.attempts).toBe(2);
  });

  it('does not retry errors that are not LlmErrors', async () => {
    const bug = new TypeError('bug');
    const provider = scripted(bug);
    await expect(new RetryingLlmClient(provider, policy, recordingSleeper()).send(request)).rejects.toBe(bug);
    expect(provider.calls).toBe(1);
  });

  it('stops after maxAttempts calls and throws the last error', async () => {
    const errors = Array.from({ length: 10 }, (_, i) => new LlmError(503, `down ${i + 1}`));
    const provider = scripted(...errors);
    const { waits, sleeper } = recordingSleeper();
    await expect(new RetryingLlmClient(provider, policy, { sleeper }).send(request)).rejects.toBe(errors[4]);
    expect(provider.calls).toBe(5);
    expect(waits).toHaveLength(4);
  });

  it('tells onRetry the error, the failed attempt and the wait', async () => {
    const seen: [string, number, number][] = [];
    const provider = scripted(new LlmError(529, 'overloaded'), new LlmError(-1, 'step timeout', { type: 'timeout' }));
    await new RetryingLlmClient(provider, policy, {
      ...recordingSleeper(),
      random: () => 0.5,
      onRetry: (error, attempt, waitMs) => seen.push([retryReason(error), attempt, waitMs]),
    }).send(request);
    expect(seen).toEqual([['529', 1, 250], ['timeout', 2, 500]]);
  });

  it('gives up at once when the caller aborts, without another call', async () => {
    const controller = new AbortController();
    const provider = scripted(new LlmError(503, 'down'), new LlmError(503, 'down'));
    const client = new RetryingLlmClient(provider, { ...policy, baseMs: 60_000, capMs: 60_000 }, { random: () => 0.99 });
    const pending = client.send(request, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('cancelled by caller')), 20);
    await expect(pending).rejects.toThrow('cancelled by caller');
    expect(provider.calls).toBe(1);
  });

  it('rethrows a retryable error without waiting when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const aborted = new LlmError(-1, 'request aborted', { type: 'aborted' });
    const provider = scripted(aborted);
    const { waits, sleeper } = recordingSleeper();
    await expect(new RetryingLlmClient(provider, policy, { sleeper }).send(request, { signal: controller.signal })).rejects.toBe(aborted);
    expect(waits).toEqual([]);
  });
});

describe('backoffMs', () => {
  const randoms = [0, 1e-9, 0.25, 0.5, 0.75, 0.999, 0.999999999, 1 - Number.EPSILON];

  it('never waits more than min(cap, base * 2^attempt)', () => {
    for (let attempt = 0; attempt < 64; attempt++) {
      const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** attempt);
      for (const r of randoms) {
        const wait = backoffMs(attempt, policy, () => r);
        expect(wait).toBeGreaterThanOrEqual(0);
        expect(wait).toBeLessThanOrEqual(ceiling);
        expect(Number.isInteger(wait)).toBe(true);
      }
    }
  });

  it('draws uniformly below the ceiling (full jitter)', () => {
    expect(backoffMs(0, policy, () => 0)).toBe(0);
    expect(backoffMs(0, policy, () => 0.5)).toBe(250);
    expect(backoffMs(3, policy, () => 0.5)).toBe(2000);
    expect(backoffMs(20, policy, () => 0.5)).toBe(15_000);
  });

  it('takes the server retry-after when it is longer than the jitter, and the jitter otherwise', () => {
    expect(backoffMs(0, policy, () => 0.999, 7000)).toBe(7000);
    expect(backoffMs(10, policy, () => 0.5, 7000)).toBe(15_000);
  });
});

describe('parseRetryAfterMs', () => {
  const headers = (h: Record<string, string>) => new Headers(h);

  it('reads retry-after as seconds', () => {
    expect(parseRetryAfterMs(headers({ 'retry-after': '7' }))).toBe(7000);
    expect(parseRetryAfterMs(headers({ 'retry-after': '1.5' }))).toBe(1500);
  });

  it('prefers retry-after-ms', () => {
    expect(parseRetryAfterMs(headers({ 'retry-after': '7', 'retry-after-ms': '1234' }))).toBe(1234);
  });

  it('reads an HTTP date relative to now, and a past date as no wait', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfterMs(headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:30 GMT' }), now)).toBe(30_000);
    expect(parseRetryAfterMs(headers({ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }), now)).toBe(0);
  });

  it('ignores what it cannot read', () => {
    expect(parseRetryAfterMs(headers({}))).toBeNull();
    expect(parseRetryAfterMs(headers({ 'retry-after': 'soon' }))).toBeNull();
    expect(parseRetryAfterMs(headers({ 'retry-after-ms': 'x', 'retry-after': '2' }))).toBe(2000);
    expect(parseRetryAfterMs(undefined)).toBeNull();
  });
});

describe('retryReason', () => {
  it('labels errors for the retry metric', () => {
    expect(retryReason(new LlmError(429, ''))).toBe('429');
    expect(retryReason(new LlmError(529, ''))).toBe('529');
    expect(retryReason(new LlmError(502, ''))).toBe('5xx');
    expect(retryReason(new LlmError(-1, 'step timeout', { type: 'timeout' }))).toBe('timeout');
    expect(retryReason(new LlmError(-1, 'connection error'))).toBe('network');
  });
});

describe('timerSleeper', () => {
  it('waits, and rejects with the reason as soon as the signal aborts', async () => {
    const started = Date.now();
    await timerSleeper.sleep(20);
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    const controller = new AbortController();
    const sleeping = timerSleeper.sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(sleeping).rejects.toThrow('stop');
  });
});
