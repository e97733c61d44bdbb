import { expect } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';

/** The LlmError a model call fails with (the test fails if it succeeds or throws anything else). */
export async function failure(promise: Promise<unknown>): Promise<LlmError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LlmError);
  return error as LlmError;
}

/** The LlmError a synchronous call throws (the test fails if it returns or throws anything else). */
export function thrown(fn: () => unknown): LlmError {
  try {
    fn();
  } catch (e) {
    if (e instanceof LlmError) return e;
    throw e;
  }
  throw new Error('did not throw');
}

/** `value` frozen all the way down: a test that hands it over proves the callee never mutates it. */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
