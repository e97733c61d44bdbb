import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import type { LlmError } from '../errors.ts';
import { aborted, classifyFailure, connectionFailed, fromErrorAnswer, timedOut } from './anthropic-failures.ts';
import type { FailureContext } from './failure.ts';

export type { FailureContext } from './failure.ts';
export { statusOfErrorType } from './anthropic-failures.ts';

/**
 * Every failure of a call made through the official SDK as one LlmError, classified as
 * anthropic-failures.ts classifies the client's own transport's: the SDK's error objects are read
 * for what they carry (status, the API's type and message, the answer's headers) and nothing else.
 * AnthropicClient no longer calls the SDK; this stays for code that does.
 */
export function toLlmError(error: unknown, context: FailureContext = {}): LlmError {
  if (error instanceof APIUserAbortError) return aborted(context);
  if (error instanceof APIConnectionTimeoutError) return timedOut(context);
  if (error instanceof APIConnectionError) return connectionFailed((error as { cause?: unknown }).cause, context);
  if (error instanceof APIError) {
    // With a status: an HTTP error answer. Without: an `error` event in the middle of a stream.
    return fromErrorAnswer(
      {
        status: error.status,
        type: typeof error.type === 'string' ? error.type : null,
        message: typeof error.apiMessage === 'string' ? error.apiMessage : null,
        headers: error.headers,
      },
      context,
    );
  }
  return classifyFailure(error, context);
}
