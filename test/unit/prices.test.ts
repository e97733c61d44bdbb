import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_OPENAI_MODEL, PROJECT_ROOT } from '../../src/config/environment.ts';
import { ConfigError } from '../../src/domain/errors.ts';
import { PriceTable, loadPrices } from '../../src/llm/prices.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'prices-'));
function file(name: string, content: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

const usage = { inputTokens: 1_000_000, outputTokens: 1_000_000, cacheCreationInputTokens: 1_000_000, cacheReadInputTokens: 1_000_000 };

describe('prices', () => {
  it('charges each kind of token at its own rate, in USD per million', () => {
    const table = new PriceTable({ m: { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 } });
    expect(table.costOf('m', usage)).toBeCloseTo(3 + 15 + 3.75 + 0.3, 10);
    expect(table.costOf('m', { inputTokens: 812, outputTokens: 64, cacheCreationInputTokens: 0, cacheReadInputTokens: 2000 })).toBeCloseTo(
      (812 * 3 + 64 * 15 + 2000 * 0.3) / 1e6,
      12,
    );
  });

  it('prices a dated model id like its alias', () => {
    const table = new PriceTable({ 'claude-sonnet-4-5': { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 } });
    expect(
      table.costOf('claude-sonnet-4-5-20250929', { ...usage, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 }),
    ).toBe(3);
  });

  it('prices an OpenAI snapshot id (…-YYYY-MM-DD) like its alias', () => {
    const table = new PriceTable({ 'gpt-4.1-mini': { input: 0.4, output: 1.6, cacheWrite: 0.4, cacheRead: 0.1 } });
    expect(table.priceOf('gpt-4.1-mini-2025-04-14')).toEqual({ input: 0.4, output: 1.6, cacheWrite: 0.4, cacheRead: 0.1 });
    expect(table.priceOf('gpt-4.1-mini-2025-04')).toBeNull(); // not a date: not an alias
  });

  it('counts an unknown model as free and warns once per model', () => {
    const warnings: string[] = [];
    const table = new PriceTable({}, (m) => warnings.push(m));
    expect(table.costOf('mystery', usage)).toBe(0);
    expect(table.costOf('mystery', usage)).toBe(0);
    expect(table.costOf('other', usage)).toBe(0);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('"mystery"');
  });

  it('loads the shipped prices.json with the current models', () => {
    const table = loadPrices(path.join(PROJECT_ROOT, 'prices.json'));
    expect(table.priceOf('claude-sonnet-4-5')).toEqual({ input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 });
    expect(table.priceOf('claude-opus-4-1')).toEqual({ input: 15, output: 75, cacheWrite: 18.75, cacheRead: 1.5 });
    expect(table.priceOf('claude-haiku-4-5')).toEqual({ input: 1, output: 5, cacheWrite: 1.25, cacheRead: 0.1 });
    expect(table.priceOf('claude-sonnet-4-0')).not.toBeNull();
    expect(table.costOf('demo', usage)).toBe(0);
  });

  it('ships prices for the OpenAI models, the default one included; without a cache write price, a write costs as input', () => {
    const table = loadPrices(path.join(PROJECT_ROOT, 'prices.json'));
    expect(table.priceOf(DEFAULT_OPENAI_MODEL)).toEqual({ input: 0.75, output: 4.5, cacheWrite: 0.75, cacheRead: 0.075 });
    for (const model of table.models.filter((m) => /^(gpt-|o\d)/.test(m))) {
      const price = table.priceOf(model)!;
      expect(price.cacheWrite, model).toBe(price.input);
      expect(price.cacheRead, model).toBeLessThan(price.input);
    }
  });

  it('names the file and the bad field', () => {
    const bad = file('bad.json', JSON.stringify({ m: { input: 3, output: 'fifteen', cacheWrite: 1, cacheRead: 1 } }));
    expect(() => loadPrices(bad)).toThrow(ConfigError);
    expect(() => loadPrices(bad)).toThrow(new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: m\\.output: `));
    const missing = file('missing.json', JSON.stringify({ m: { input: 3, output: 15, cacheWrite: 1 } }));
    expect(() => loadPrices(missing)).toThrow(/m\.cacheRead/);
    const negative = file('negative.json', JSON.stringify({ m: { input: -1, output: 15, cacheWrite: 1, cacheRead: 1 } }));
    expect(() => loadPrices(negative)).toThrow(/m\.input/);
    const typo = file('typo.json', JSON.stringify({ m: { input: 1, output: 15, cacheWrite: 1, cacheRead: 1, cachRead: 1 } }));
    expect(() => loadPrices(typo)).toThrow(/cachRead/);
  });

  it('says so when the file is missing or not JSON', () => {
    expect(() => loadPrices(path.join(dir, 'nope.json'))).toThrow(/cannot read prices file .*nope\.json: ENOENT/);
    expect(() => loadPrices(file('broken.json', '{'))).toThrow(/invalid prices file .*broken\.json: not JSON/);
  });
});
