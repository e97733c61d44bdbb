import type { z } from 'zod';
import { InputError } from '../domain/errors.ts';

/** What the input being parsed is called in error messages: a part of an HTTP request, or a library call's options. */
export const INPUT_NAMES = {
  body: 'request body',
  query: 'query parameters',
  path: 'path',
  options: 'options',
  headers: 'headers',
} as const;
export type InputPart = keyof typeof INPUT_NAMES;

/** Parses a request part with its schema; a failure is an InputError naming every failing field. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, part: InputPart): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({
    path: i.code === 'unrecognized_keys' ? i.keys.join(', ') : i.path.join('.') || part,
    message: i.code === 'unrecognized_keys' ? 'unknown field' : i.message,
  }));
  const first = issues[0]!;
  throw new InputError(`invalid ${INPUT_NAMES[part]}: ${first.path}: ${first.message}`, issues);
}
