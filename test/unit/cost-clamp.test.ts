import { describe, expect, it } from 'vitest';
import { clampToCost, estimateInputTokens, MIN_REPLY_TOKENS, ratesOf } from '../../src/core/cost-clamp.ts';
import { PriceTable } from '../../src/llm/prices.ts';

const rates = { input: 1e-6, output: 1e-5 };

describe('clampToCost', () => {
  it('cuts max_tokens so input plus the whole reply fit what is left', () => {
    // 0.001 left, 200 input tokens = 0.0002: room for 80 output tokens at 0.00001.
    expect(clampToCost(0.001, 200, rates, 4096)).toEqual({ maxTokens: 80 });
    expect(clampToCost(1, 200, rates, 4096)).toEqual({ maxTokens: 4096 });
  });
  it('stops when not even a minimal reply fits', () => {
    const r = clampToCost(0.0002 + (MIN_REPLY_TOKENS - 1) * 1e-5, 200, rates, 4096);
    expect(r).toHaveProperty('stop');
    expect((r as { stop: string }).stop).toMatch(/^cost budget exhausted: /);
    expect(clampToCost(0.0002 + MIN_REPLY_TOKENS * 1e-5 + 1e-12, 200, rates, 4096)).toEqual({ maxTokens: MIN_REPLY_TOKENS });
  });
  it('does not clamp a free output', () => {
    expect(clampToCost(0.5, 10, { input: 0, output: 0 }, 512)).toEqual({ maxTokens: 512 });
  });
});

describe('estimateInputTokens', () => {
  const request = { system: 'be helpful', tools: [{ name: 't' }], messages: [{ role: 'user' as const, content: 'héllo' }] };
  it('counts the bytes of the request, an upper bound on its tokens', () => {
    expect(estimateInputTokens(request)).toBe(
      Buffer.byteLength(JSON.stringify('be helpful') + JSON.stringify([{ name: 't' }]) + JSON.stringify(request.messages)),
    );
  });
  it("builds on the previous call's billed tokens when it knows them", () => {
    const more = {
      ...request,
      messages: [...request.messages, { role: 'assistant' as const, content: 'ok' }, { role: 'user' as const, content: 'and?' }],
    };
    expect(estimateInputTokens(more, { tokens: 500, messages: 2 })).toBe(
      500 + Buffer.byteLength(JSON.stringify([{ role: 'user', content: 'and?' }])),
    );
  });
});

describe('ratesOf', () => {
  it('prices input at the higher of the input and cache-write rates', () => {
    const table = new PriceTable({ m: { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 } });
    const r = ratesOf(table.costOf.bind(table), 'm');
    expect(r.input).toBeCloseTo(3.75e-6, 12);
    expect(r.output).toBeCloseTo(15e-6, 12);
  });
});
