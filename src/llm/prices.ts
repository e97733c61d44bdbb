import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Usage } from '../domain/types.ts';
import { ConfigError } from '../domain/errors.ts';

const rate = z.number().finite().nonnegative();

/** USD per million tokens of each kind, for one model. */
const ModelPriceSchema = z.strictObject({
  input: rate,
  output: rate,
  cacheWrite: rate,
  cacheRead: rate,
});
const PriceFileSchema = z.record(z.string().min(1), ModelPriceSchema);

export type ModelPrice = z.infer<typeof ModelPriceSchema>;

/**
 * Dated model ids ("claude-sonnet-4-5-20250929", OpenAI's "gpt-4.1-mini-2025-04-14") are priced like
 * their alias when only that is listed.
 */
const DATE_SUFFIX = /-(\d{8}|\d{4}-\d{2}-\d{2})$/;

/**
 * What model calls cost. Prices come from a file, never from constants in code, because they change
 * more often than releases do. A model missing from the file costs 0: a run must not fail over
 * bookkeeping, but the gap is reported once per model so it gets fixed.
 */
export class PriceTable {
  private readonly warned = new Set<string>();

  constructor(
    private readonly prices: Readonly<Record<string, ModelPrice>>,
    private readonly warn: (message: string) => void = () => {},
  ) {}

  /** @returns the price of `model`, or null when the table does not know it */
  priceOf(model: string): ModelPrice | null {
    return this.prices[model] ?? this.prices[model.replace(DATE_SUFFIX, '')] ?? null;
  }

  /** @returns USD, each kind of token at its own rate */
  costOf(model: string, usage: Usage): number {
    const price = this.priceOf(model);
    if (!price) {
      if (!this.warned.has(model)) {
        this.warned.add(model);
        this.warn(`no price for model "${model}" in the prices file; its calls are counted as costing 0 USD`);
      }
      return 0;
    }
    return (
      (usage.inputTokens * price.input +
        usage.outputTokens * price.output +
        usage.cacheCreationInputTokens * price.cacheWrite +
        usage.cacheReadInputTokens * price.cacheRead) /
      1_000_000
    );
  }

  get models(): string[] {
    return Object.keys(this.prices);
  }
}

/** Checks parsed JSON against the price schema; `source` names the file in the error. */
export function parsePrices(json: unknown, source: string): Record<string, ModelPrice> {
  const parsed = PriceFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join('.') : '(top level)';
    throw new ConfigError(`invalid prices file ${source}: ${where}: ${issue.message}`);
  }
  return parsed.data;
}

/** Reads and validates the prices file once, at startup. */
export function loadPrices(file: string, warn?: (message: string) => void): PriceTable {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(`cannot read prices file ${file}: ${code}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`invalid prices file ${file}: not JSON: ${(error as Error).message}`);
  }
  return new PriceTable(parsePrices(json, file), warn);
}
