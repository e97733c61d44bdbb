import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { LlmError } from '../domain/errors.ts';
import { brokenOrUnsent, describeCause, type FailureContext, ownFailure, redactor } from './failure.ts';
import { type ChatErrorObject, kindOfChatError, shouldRetry, statusOfChatError } from './openai-error-object.ts';
import { parseRetryAfterMs } from './retrying.ts';

/**
 * Every failure of a Chat Completions call as one LlmError, with the statuses of the Anthropic
 * provider: the HTTP status (or the one an error object stands for), -1 for no usable response
 * (connection refused or reset, a response cut off or not the API's, a timeout, an abort; retried),
 * 0 for a request never sent (not retried). The message is the server's own, without the key.
 */
export function toLlmError(error: unknown, context: FailureContext = {}): LlmError {
  if (error instanceof LlmError) return ownFailure(error, context);
  const redact = redactor(context.apiKey);
  const usage = context.usage ?? null;
  if (error instanceof APIUserAbortError) {
    return new LlmError(-1, 'request aborted', { type: 'aborted', usage });
  }
  if (error instanceof APIConnectionTimeoutError) {
    return new LlmError(-1, 'request timed out', { type: 'timeout', usage });
  }
  if (error instanceof APIConnectionError) {
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error ? `: ${describeCause(cause)}` : '';
    return new LlmError(-1, redact(`connection error${detail}`), { type: 'connection_error', cause, usage });
  }
  if (error instanceof APIError) {
    // With a status: an HTTP error response. Without: an error object in the middle of a stream.
    const body = (error.error ?? null) as ChatErrorObject | null;
    const status = typeof error.status === 'number' ? error.status : statusOfChatError(body);
    const message = typeof body?.message === 'string' && body.message !== '' ? body.message : `HTTP ${status}`;
    return new LlmError(status, redact(message), {
      type: kindOfChatError(body),
      requestId: error.requestID ?? context.requestId ?? null,
      retryAfterMs: parseRetryAfterMs(error.headers),
      shouldRetry: shouldRetry(body, error.headers?.get('x-should-retry')),
      usage,
    });
  }
  return brokenOrUnsent(error, context);
}
