import { describe, expect, it } from 'vitest';
import type { Usage } from '../../src/domain/types.ts';
import { LlmError } from '../../src/domain/errors.ts';
import { RetryingLlmClient, backoffMs, giveUpReason, parseRetryAfterMs, retryReason, type Sleeper } from '../../src/llm/retrying.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from '../../src/llm/types.ts';
import { settlesQuietly, TimeLimitedLlmClient } from '../../src/llm/time-limited.ts';

const request: LlmRequest = { model: 'm', maxTokens: 10, system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] };
const ok: LlmResponse = {
  id: 'msg_1',
  model: 'm',
  content: [{ type: 'text', text: 'hello' }],
  stopReason: 'end_turn',
  usage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
  requestId: 'req_1',
  attempts: 1,
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

  it.each([0, 400, 401, 402, 403, 404, 413, 422])('never retries a %i', async (status) => {
    const provider = scripted(new LlmError(status, 'no'));
    await expect(new RetryingLlmClient(provider, policy, recordingSleeper()).send(request)).rejects.toMatchObject({ status });
    expect(provider.calls).toBe(1);
  });

  it.each([529, -1, 408, 409, 429, 500, 501, 502, 503, 504])('retries a %i', async (status) => {
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
    expect(seen).toEqual([
      ['529', 1, 250],
      ['timeout', 2, 500],
    ]);
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

describe('RetryingLlmClient: x-should-retry, long waits and the deadline', () => {
  it('obeys x-should-retry over the status rule, both ways', async () => {
    const told = scripted(new LlmError(529, 'overloaded', { shouldRetry: false }));
    await expect(new RetryingLlmClient(told, policy, recordingSleeper()).send(request)).rejects.toMatchObject({
      status: 529,
      retryable: false,
    });
    expect(told.calls).toBe(1);

    const invited = scripted(new LlmError(400, 'try again', { shouldRetry: true }));
    await expect(new RetryingLlmClient(invited, policy, recordingSleeper()).send(request)).resolves.toMatchObject({ attempts: 2 });
    expect(invited.calls).toBe(2);
  });

  it('does not sleep a retry-after longer than the cap: the error escapes at once and says when to ask again', async () => {
    const hour = new LlmError(429, 'rate limited', { retryAfterMs: 3_600_000, type: 'rate_limit_error' });
    const provider = scripted(hour);
    const { waits, sleeper } = recordingSleeper();
    const failed: number[] = [];
    const error = await new RetryingLlmClient(provider, policy, { sleeper })
      .send(request, { onAttemptFailed: (attempt) => failed.push(attempt) })
      .catch((e: unknown) => e);
    expect(error).toBe(hour);
    expect(hour.retryAfterMs).toBe(3_600_000);
    expect(provider.calls).toBe(1);
    expect(waits).toEqual([]);
    expect(failed).toEqual([]); // not retried, so nothing to void: the error itself ends the call
  });

  it('still sleeps a retry-after up to the cap', async () => {
    const provider = scripted(new LlmError(429, 'rate limited', { retryAfterMs: policy.capMs }));
    const { waits, sleeper } = recordingSleeper();
    await new RetryingLlmClient(provider, policy, { sleeper }).send(request);
    expect(waits).toEqual([policy.capMs]);
  });

  it('gives up instead of waiting past the deadline, and retries when the wait ends before it', async () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const soon = new Date(now + 5_000);
    const slowDown = () => new LlmError(503, 'down', { retryAfterMs: 7_000 });

    const late = scripted(slowDown());
    const { waits, sleeper } = recordingSleeper();
    await expect(
      new RetryingLlmClient(late, policy, { sleeper, now: () => now }).send(request, { deadlineAt: soon }),
    ).rejects.toMatchObject({ status: 503 });
    expect(late.calls).toBe(1);
    expect(waits).toEqual([]);

    const inTime = scripted(slowDown());
    const later = new Date(now + 60_000);
    await expect(
      new RetryingLlmClient(inTime, policy, { sleeper, now: () => now }).send(request, { deadlineAt: later }),
    ).resolves.toMatchObject({ attempts: 2 });
    expect(waits).toEqual([7_000]);
  });
});

describe('giveUpReason', () => {
  const now = 1_000_000;
  it('names why a retryable error is not retried, or null', () => {
    expect(giveUpReason(1, 100, policy, null, now)).toBeNull();
    expect(giveUpReason(5, 100, policy, null, now)).toBe('attempts');
    expect(giveUpReason(1, policy.capMs + 1, policy, null, now)).toBe('wait-too-long');
    expect(giveUpReason(1, 100, policy, new Date(now + 100), now)).toBe('deadline');
    expect(giveUpReason(1, 100, policy, new Date(now + 101), now)).toBeNull();
    expect(giveUpReason(1, 0, policy, new Date(now - 1), now)).toBe('deadline');
  });
});

describe('RetryingLlmClient: streamed text and the usage of failed attempts', () => {
  const u = (inputTokens: number, outputTokens: number): Usage => ({
    inputTokens,
    outputTokens,
    cacheCreationInputTokens: 1,
    cacheReadInputTokens: 2,
  });

  /** Streams "<attempt>a", "<attempt>b" per attempt, then fails with the scripted error or answers. */
  function streaming(...failures: LlmError[]) {
    const client = {
      provider: 'streaming',
      calls: 0,
      lateText: null as null | (() => void),
      async send(_req: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
        const n = ++client.calls;
        options.onText?.(`${n}a `, 1);
        options.onText?.(`${n}b `, 1);
        const failure = failures[n - 1];
        // What an abandoned stream might still deliver after its attempt ended.
        if (failure) client.lateText ??= () => options.onText?.('late ', 1);
        if (failure) throw failure;
        return ok;
      },
    };
    return client satisfies LlmClient;
  }

  it("numbers each attempt's text and voids a failed attempt before the next one streams", async () => {
    const overloaded = new LlmError(529, 'overloaded');
    const provider = streaming(overloaded);
    const seen: string[] = [];
    const response = await new RetryingLlmClient(provider, policy, recordingSleeper()).send(request, {
      onText: (text, attempt) => seen.push(`text ${attempt}: ${text}`),
      onAttemptFailed: (attempt, error) => seen.push(`failed ${attempt}: ${error.status}`),
    });
    provider.lateText!();
    expect(seen).toEqual(['text 1: 1a ', 'text 1: 1b ', 'failed 1: 529', 'text 2: 2a ', 'text 2: 2b ']);
    expect(response.attempts).toBe(2);
  });

  it("hands a delegate that settles quietly the caller's options as they are on the first attempt, and numbered wrappers after", async () => {
    const overloaded = new LlmError(529, 'overloaded');
    const provider = Object.assign(streaming(overloaded), { settlesQuietly: true as const, given: [] as LlmCallOptions[] });
    const send = provider.send;
    provider.send = (req, options = {}) => (provider.given.push(options), send(req, options));
    const seen: string[] = [];
    const options: LlmCallOptions = { onText: (text, attempt) => seen.push(`text ${attempt}: ${text}`) };
    const response = await new RetryingLlmClient(provider, policy, recordingSleeper()).send(request, options);
    expect(provider.given[0]).toBe(options);
    expect(provider.given[1]).not.toBe(options);
    expect(seen).toEqual(['text 1: 1a ', 'text 1: 1b ', 'text 2: 2a ', 'text 2: 2b ']);
    expect(response.attempts).toBe(2);
  });

  it('counts a time-limited client as settling quietly, whatever it wraps', () => {
    expect(settlesQuietly(new TimeLimitedLlmClient(scripted(), 1000))).toBe(true);
    expect(settlesQuietly(scripted())).toBe(false);
  });

  it('sums the usage failed attempts reported into failedAttemptsUsage; none reported, none there', async () => {
    const provider = scripted(
      new LlmError(529, 'overloaded', { usage: u(100, 7) }),
      new LlmError(-1, 'cut', { usage: u(100, 20) }),
      new LlmError(503, 'no usage'),
    );
    const response = await new RetryingLlmClient(provider, policy, recordingSleeper()).send(request);
    expect(response.failedAttemptsUsage).toEqual({
      inputTokens: 200,
      outputTokens: 27,
      cacheCreationInputTokens: 2,
      cacheReadInputTokens: 4,
    });
    expect(response.usage).toEqual(ok.usage);

    const clean = await new RetryingLlmClient(scripted(new LlmError(503, 'down')), policy, recordingSleeper()).send(request);
    expect(clean.failedAttemptsUsage).toBeUndefined();
    expect('failedAttemptsUsage' in clean).toBe(false);
  });

  it('puts the summed usage of every failed attempt on the error that escapes', async () => {
    const errors = [1, 2, 3, 4, 5].map((i) => new LlmError(529, `overloaded ${i}`, { usage: i === 3 ? null : u(10, i) }));
    const error = await new RetryingLlmClient(scripted(...errors), policy, recordingSleeper()).send(request).catch((e: unknown) => e);
    expect(error).toBe(errors[4]);
    expect((error as LlmError).usage).toEqual({
      inputTokens: 40,
      outputTokens: 1 + 2 + 4 + 5,
      cacheCreationInputTokens: 4,
      cacheReadInputTokens: 8,
    });

    const permanent = new LlmError(400, 'bad');
    const after = await new RetryingLlmClient(scripted(new LlmError(529, 'o', { usage: u(5, 1) }), permanent), policy, recordingSleeper())
      .send(request)
      .catch((e: unknown) => e);
    expect(after).toBe(permanent);
    expect(permanent.usage).toEqual(u(5, 1));
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

  it('takes a wait beyond what a timer or a millisecond column can hold as 2^31-1 ms', () => {
    expect(parseRetryAfterMs(headers({ 'retry-after': String(10 ** 12) }))).toBe(2 ** 31 - 1);
    expect(parseRetryAfterMs(headers({ 'retry-after-ms': '1e300' }))).toBe(2 ** 31 - 1);
    expect(parseRetryAfterMs(headers({ 'retry-after': '3600' }))).toBe(3_600_000);
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
