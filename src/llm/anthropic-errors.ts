import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import { LlmError } from '../errors.ts';
import { describeCause, type FailureContext, redactor } from './failure.ts';
import { parseRetryAfterMs } from './retrying.ts';

export type { FailureContext } from './failure.ts';

/**
 * The HTTP status each of the API's error types is sent with. An `error` event in the middle of a
 * stream carries only the type (the stream itself began with a 200), so this is how it is classified:
 * overloaded mid-answer is retried as a 529 would be. An unknown type counts as the server's trouble.
 */
const STATUS_OF_ERROR_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  conflict_error: 409,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

export function statusOfErrorType(type: string | null | undefined): number {
  return (type && STATUS_OF_ERROR_TYPE[type]) || 500;
}

/**
 * Every failure of a call as one LlmError. The status is the HTTP status, or the one an error event's
 * type stands for; -1 means no usable answer (connection refused or reset, a reply cut off or not the
 * API's, the SDK's timeout, an abort) and is retryable; 0 means the request was refused before it was
 * sent, which no retry can fix. The message is the API's own; headers and the SDK's error object are
 * left out so no credential can leak into logs or stored steps.
 */
export function toLlmError(error: unknown, context: FailureContext = {}): LlmError {
  const redact = redactor(context.apiKey);
  const usage = context.usage ?? null;
  if (error instanceof LlmError) {
    // Ours, raised while reading the answer (an error body, a stream that ended early).
    error.message = redact(error.message);
    if (error.usage === null) error.usage = usage;
    return error;
  }
  if (error instanceof APIUserAbortError) {
    return new LlmError(-1, 'request aborted', { type: 'aborted', usage });
  }
  if (error instanceof APIConnectionTimeoutError) {
    return new LlmError(-1, 'request timed out', { type: 'timeout', usage });
  }
  if (error instanceof APIConnectionError) {
    // The useful part is the cause (ECONNREFUSED, socket hang up …).
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error ? `: ${describeCause(cause)}` : '';
    return new LlmError(-1, redact(`connection error${detail}`), { type: 'connection_error', cause, usage });
  }
  if (error instanceof APIError) {
    // With a status: an HTTP error answer. Without: an `error` event in the middle of a stream.
    const status = typeof error.status === 'number' ? error.status : statusOfErrorType(error.type);
    const shouldRetry = error.headers?.get('x-should-retry');
    return new LlmError(status, redact(error.apiMessage ?? `HTTP ${status}`), {
      type: error.type ?? null,
      requestId: error.requestID ?? context.requestId ?? null,
      retryAfterMs: parseRetryAfterMs(error.headers),
      shouldRetry: shouldRetry === 'true' ? true : shouldRetry === 'false' ? false : null,
      usage,
    });
  }
  const detail = error instanceof Error ? describeCause(error) : String(error);
  if (context.answered) {
    // undici's "terminated" (the socket closed mid-body), a body that is not JSON: the request was
    // sent and the answer broke, which the next attempt may well not repeat.
    return new LlmError(-1, redact(`the answer was cut off or unreadable: ${detail}`), {
      type: 'incomplete_response',
      requestId: context.requestId ?? null,
      cause: error,
      usage,
    });
  }
  return new LlmError(0, redact(`request not sent: ${detail}`), { type: 'client_error', cause: error });
}
