/**
 * What a string must not hold to be stored as it was sent. PostgreSQL text and jsonb cannot hold
 * U+0000. An unpaired UTF-16 surrogate (a JSON escape like "\ud800" with no partner) is not a
 * Unicode character at all: text would silently store U+FFFD in its place, jsonb rejects it, and a
 * provider refuses a request that holds one. Either is refused at the edge, with the field named,
 * rather than altered or failed at the INSERT. Pure, and free of Node's APIs (the dashboard's types
 * check the request schemas that use it).
 */
import { z } from 'zod';

const UNPAIRED_SURROGATE = /\p{Surrogate}/u;

export function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  if (UNPAIRED_SURROGATE.test(s)) return 'must not contain unpaired surrogates (invalid Unicode)';
  return null;
}

/** A string of 1 to `max` characters, not blank, that can be stored and sent as it is. */
export const storableString = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => s.trim().length > 0, 'must not be blank')
    .superRefine((s, ctx) => {
      const problem = textProblem(s);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });
