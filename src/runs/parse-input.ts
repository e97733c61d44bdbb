import type { z } from 'zod';

import { InputError } from '../domain/errors.ts';

type Issue = z.core.$ZodIssue;

/**
 * A value that matches no branch of a union (an input that is text or content blocks) is told what is
 * wrong in the branch of its own type, not "Invalid input": the one branch whose failure is not a
 * wrong type at the union's place, its issues under the union's path. Any other issue stands as it is.
 */
function chosenBranch(issue: Issue): Issue[] {
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [issue];
  const typed = issue.errors.filter((branch) => !branch.some((i) => i.code === 'invalid_type' && i.path.length === 0));
  if (typed.length !== 1) return [issue];
  return typed[0]!.flatMap((i) => chosenBranch({ ...i, path: [...issue.path, ...i.path] } as Issue));
}

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
  const issues = result.error.issues.flatMap(chosenBranch).map((i) => ({
    path: i.code === 'unrecognized_keys' ? [...i.path, i.keys.join(', ')].join('.') : i.path.join('.') || part,
    message: i.code === 'unrecognized_keys' ? 'unknown field' : i.message,
  }));
  const first = issues[0]!;
  throw new InputError(`invalid ${INPUT_NAMES[part]}: ${first.path}: ${first.message}`, issues);
}
