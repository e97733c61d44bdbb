/**
 * Keeping a model call within what is left of a run's money budget. Pure.
 *
 * A call's worst case is its input at the input rate plus `max_tokens` of output at the output rate;
 * `max_tokens` is cut so that worst case fits what is left. The input is not known in tokens before
 * the call, so it is estimated from above:
 * - with nothing better, as the UTF-8 byte length of the request's JSON (system prompt, tool
 *   definitions, messages). Every token of the tokenizers in use stands for at least one byte of
 *   text, and the JSON's quotes, keys and brackets outweigh the few tokens a provider adds per
 *   message, so this is more than the call can be billed — often three or four times more.
 * - after a call in the same attempt, as that call's billed input plus its output (the exact size of
 *   the conversation so far) plus the byte length of the messages added since: much closer, and still
 *   from above.
 * Input is priced at the higher of the input and cache-write rates, since a provider that writes the
 * prompt to its cache bills it at the latter.
 */
import type { Message, Usage } from '../domain/types.ts';
import { usd } from './guard.ts';

/** The smallest reply worth paying for: a call that could not write even this much is not made. */
export const MIN_REPLY_TOKENS = 16;

/** USD per token. */
export interface TokenRates {
  input: number;
  output: number;
}

/** The rates of `model` from a cost function (USD for a usage), so the price table stays the only source. */
export function ratesOf(costOf: (model: string, usage: Usage) => number, model: string): TokenRates {
  const per = (u: Partial<Usage>) =>
    costOf(model, { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0, ...u }) / 1_000_000;
  return {
    input: Math.max(per({ inputTokens: 1_000_000 }), per({ cacheCreationInputTokens: 1_000_000 })),
    output: per({ outputTokens: 1_000_000 }),
  };
}

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? null), 'utf8');

/** What the previous call was billed for, and how many messages it had seen with its reply (see Conversation.lastCall). */
export interface KnownInput {
  /** Input (cache reads and writes included) plus output tokens of that call. */
  tokens: number;
  /** Messages of the conversation once its reply was folded in. */
  messages: number;
}

/**
 * An upper bound on the input tokens of a request (see the module comment); with `bytesPerToken` above
 * 1, an estimate instead (4 for English text and JSON).
 */
export function estimateInputTokens(
  request: { system: string | null; tools: readonly unknown[]; messages: readonly Message[] },
  known: KnownInput | null = null,
  bytesPerToken = 1,
): number {
  if (known && known.messages <= request.messages.length) {
    return known.tokens + Math.ceil(bytes(request.messages.slice(known.messages)) / bytesPerToken);
  }
  return Math.ceil((bytes(request.system) + bytes(request.tools) + bytes(request.messages)) / bytesPerToken);
}

export type CostClamp = { maxTokens: number } | { stop: string };

/**
 * The `max_tokens` that keeps a call within `leftUsd`, at most `maxTokens`; or why not even a
 * minimal call fits (the run stops before calling).
 */
export function clampToCost(leftUsd: number, inputTokens: number, rates: TokenRates, maxTokens: number): CostClamp {
  const inputUsd = inputTokens * rates.input;
  const room = rates.output > 0 ? Math.floor((leftUsd - inputUsd) / rates.output) : maxTokens;
  if (room >= Math.min(MIN_REPLY_TOKENS, maxTokens)) return { maxTokens: Math.min(maxTokens, room) };
  const need = inputUsd + Math.min(MIN_REPLY_TOKENS, maxTokens) * rates.output;
  return {
    stop:
      `cost budget exhausted: the next model call could cost up to ${usd(need)} ` +
      `(about ${inputTokens} input tokens at most and a reply of ${MIN_REPLY_TOKENS} tokens), and only ${usd(Math.max(0, leftUsd))} is left`,
  };
}
