import { type ContentBlock, MAX_TOKEN_COUNT, type Usage } from '../domain/types.ts';

/**
 * The provider's numbers and content, made safe to count and store, in one place for the streamed and
 * the non-streamed answer. A poison value (a negative count would lower the run's token total and slip
 * past its budget; one beyond the integer range cannot be stored and fails every retry alike) is
 * clamped rather than refused: the model call was made and paid for, so its answer is kept, and what
 * was repaired is said in `warnings`.
 */

const USAGE_FIELDS = [
  ['input_tokens', 'inputTokens'],
  ['output_tokens', 'outputTokens'],
  ['cache_creation_input_tokens', 'cacheCreationInputTokens'],
  ['cache_read_input_tokens', 'cacheReadInputTokens'],
] as const;

/**
 * A whole token count in [0, MAX_TOKEN_COUNT]: absent (undefined or null) is 0, as the API omits counts
 * that do not apply; a fraction is rounded; anything else out of range is clamped, with a warning.
 */
export function tokenCount(value: unknown, name: string, warnings: string[]): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || Number.isNaN(value)) {
    warnings.push(`usage.${name} was ${describe(value)}, not a number: counted as 0`);
    return 0;
  }
  const clamped = Math.min(Math.max(Math.round(value), 0), MAX_TOKEN_COUNT);
  if (clamped !== value) warnings.push(`usage.${name} was ${value}: counted as ${clamped}`);
  return clamped;
}

/** The API's `usage` object in our terms; a missing object counts as all zeros, with a warning. */
export function normaliseUsage(raw: unknown, warnings: string[]): Usage {
  const source = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  if (source !== raw) warnings.push(`usage was ${describe(raw)}: counted as 0 tokens`);
  const usage = {} as Record<(typeof USAGE_FIELDS)[number][1], number>;
  for (const [wire, ours] of USAGE_FIELDS) usage[ours] = tokenCount(source[wire], wire, warnings);
  return usage;
}

/**
 * The Chat Completions API's `usage` in our terms. Its prompt count includes the cached part, which
 * ours keeps apart (cache reads are cheaper and stay out of a run's budget): input = prompt − cached.
 * There is no separate price for writing the cache, so no cache creation tokens.
 */
export function normaliseChatUsage(raw: unknown, warnings: string[]): Usage {
  const source = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  if (source !== raw) warnings.push(`usage was ${describe(raw)}: counted as 0 tokens`);
  const details = source.prompt_tokens_details;
  const prompt = tokenCount(source.prompt_tokens, 'prompt_tokens', warnings);
  let cached = tokenCount(
    details !== null && typeof details === 'object' ? (details as Record<string, unknown>).cached_tokens : undefined,
    'prompt_tokens_details.cached_tokens',
    warnings,
  );
  if (cached > prompt) {
    warnings.push(`usage.prompt_tokens_details.cached_tokens (${cached}) exceeds prompt_tokens (${prompt}): counted as ${prompt}`);
    cached = prompt;
  }
  return {
    inputTokens: prompt - cached,
    outputTokens: tokenCount(source.completion_tokens, 'completion_tokens', warnings),
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: cached,
  };
}

/** The answer's content blocks, kept verbatim; `null`, a missing or a non-array `content` is no blocks. */
export function normaliseContent(raw: unknown, warnings: string[]): ContentBlock[] {
  if (Array.isArray(raw)) {
    const blocks = raw.filter(
      (b): b is ContentBlock => b !== null && typeof b === 'object' && typeof (b as { type?: unknown }).type === 'string',
    );
    if (blocks.length !== raw.length)
      warnings.push(`content held ${raw.length - blocks.length} item(s) that are not content blocks: dropped`);
    return blocks;
  }
  warnings.push(`content was ${describe(raw)}: taken as no content`);
  return [];
}

/** A short, safe description of an unexpected value for a warning (never the value itself when long). */
function describe(value: unknown): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (typeof value === 'string') return value.length <= 20 ? JSON.stringify(value) : 'a string';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : String(value);
}
