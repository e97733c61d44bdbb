/**
 * What a model or a tool hands the engine, made storable before anything folds or writes it. Pure.
 *
 * PostgreSQL's text and jsonb cannot hold U+0000, and a lone UTF-16 surrogate has no UTF-8 form (the
 * driver would silently write U+FFFD, so the log would no longer say what the worker held). Both become
 * U+FFFD, the character a UTF-8 decoder puts where bytes cannot be represented — here, once, at the door:
 * the worker then holds exactly what the log will hold, and a resumed run replays the same conversation.
 *
 * Counts go into int4 columns and into the budget: a negative count would lower `tokensUsed` and lift
 * the budget, one past 2^31-1 would make the checkpoint fail on every retry. Each is clamped to
 * 0 ≤ n ≤ 2^31-1, rounded; a value that is no number at all counts 0.
 */
import { type ContentBlock, MAX_TOKEN_COUNT, type Usage } from '../domain/types.ts';

/** A NUL, or a surrogate without its pair (in `u` mode a well-formed pair is one code point, not matched). */
const UNSTORABLE = /[\0\p{Cs}]/u;
const UNSTORABLE_ALL = /[\0\p{Cs}]/gu;

export const REPLACEMENT_CHARACTER = '\uFFFD';
/** The most a cost can be and still fit `numeric(18, 8)`. */
const COST_MAX = 9_999_999_999;

export function storableText(s: string): string {
  return UNSTORABLE.test(s) ? s.replace(UNSTORABLE_ALL, REPLACEMENT_CHARACTER) : s;
}

/** Every string inside `v` (object keys included) made storable; the same reference when nothing changed. */
export function storableValue<T>(v: T): T {
  if (typeof v === 'string') return storableText(v) as T;
  // This runs on every event of every step and nearly always finds nothing to change: it checks
  // before it copies anything, and allocates nothing (no key list, no closure) while it checks.
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const item: unknown = v[i];
      const clean = storableValue(item);
      if (clean !== item) (out ??= [...v])[i] = clean;
    }
    return (out ?? v) as T;
  }
  if (v !== null && typeof v === 'object') {
    const source = v as Record<string, unknown>;
    for (const k in source) {
      if (!Object.hasOwn(source, k)) continue;
      if (storableText(k) !== k || storableValue(source[k]) !== source[k]) {
        return Object.fromEntries(Object.keys(source).map((key) => [storableText(key), storableValue(source[key])])) as T;
      }
    }
    return v;
  }
  return v;
}

export function storableCount(n: unknown): number {
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) return 0;
  return Math.min(Math.round(n), MAX_TOKEN_COUNT);
}

export function storableUsage(u: Usage): Usage {
  return {
    inputTokens: storableCount(u.inputTokens),
    outputTokens: storableCount(u.outputTokens),
    cacheCreationInputTokens: storableCount(u.cacheCreationInputTokens),
    cacheReadInputTokens: storableCount(u.cacheReadInputTokens),
  };
}

export function storableCost(usd: number): number {
  return Number.isFinite(usd) && usd > 0 ? Math.min(usd, COST_MAX) : 0;
}

export function sameUsage(a: Usage, b: Usage): boolean {
  return (
    a.inputTokens === b.inputTokens &&
    a.outputTokens === b.outputTokens &&
    a.cacheCreationInputTokens === b.cacheCreationInputTokens &&
    a.cacheReadInputTokens === b.cacheReadInputTokens
  );
}

/** Content blocks made storable; `null` or a non-array (a provider's bad day) is no content at all. */
export function storableContent(content: unknown): ContentBlock[] {
  if (!Array.isArray(content)) return [];
  const isBlock = (b: unknown): b is ContentBlock => b !== null && typeof b === 'object' && typeof (b as ContentBlock).type === 'string';
  return storableValue(content.every(isBlock) ? content : content.filter(isBlock));
}
