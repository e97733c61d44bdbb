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
