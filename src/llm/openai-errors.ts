import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { LlmError } from '../errors.ts';
import { brokenOrUnsent, describeCause, type FailureContext, ownFailure, redactor } from './failure.ts';
import { parseRetryAfterMs } from './retrying.ts';

/**
 * The HTTP status an error object stands for when it came without one: in the middle of a stream
 * (`data: {"error": …}` after a 200) or in a 200's body. OpenAI names the kind in `type` or `code`;
 * vLLM puts the status itself in `code`. An unknown kind counts as the server's trouble, as with the
 * Messages API: retried, since the next attempt may well pass.
 */
const STATUS_OF_KIND: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  context_length_exceeded: 400,
  authentication_error: 401,
  invalid_api_key: 401,
  permission_error: 403,
  not_found_error: 404,
  model_not_found: 404,
  rate_limit_error: 429,
  rate_limit_exceeded: 429,
  insufficient_quota: 429,
  requests: 429,
  tokens: 429,
  server_error: 500,
  api_error: 500,
  service_unavailable: 503,
};

/** The error object of an answer (`{message, type, code, param}`), as far as it can be read. */
export interface ChatErrorObject {
  message?: unknown;
  type?: unknown;
  code?: unknown;
}

export function statusOfChatError(error: ChatErrorObject | null | undefined): number {
  const code = error?.code;
  if (typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 599) return code;
  for (const kind of [code, error?.type]) {
    if (typeof kind === 'string' && STATUS_OF_KIND[kind]) return STATUS_OF_KIND[kind];
  }
  return 500;
}

/** The most telling name of an error's kind: the specific code ("context_length_exceeded"), else its type. */
export function kindOfChatError(error: ChatErrorObject | null | undefined): string | null {
  if (typeof error?.code === 'string' && error.code !== '') return error.code;
  return typeof error?.type === 'string' && error.type !== '' ? error.type : null;
}

/**
 * Out of credit is sent as a 429, but waiting does not end it: it is not retried, like the
 * Messages API's billing_error. Everything else follows the status (and `x-should-retry`).
 */
function shouldRetry(error: ChatErrorObject | null | undefined, header: string | null | undefined): boolean | null {
  if (error?.code === 'insufficient_quota' || error?.type === 'insufficient_quota') return false;
  return header === 'true' ? true : header === 'false' ? false : null;
}

/**
 * Every failure of a Chat Completions call as one LlmError, with the statuses of the Anthropic
 * provider: the HTTP status (or the one an error object stands for), -1 for no usable answer
 * (connection refused or reset, an answer cut off or not the API's, a timeout, an abort; retried),
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
    // With a status: an HTTP error answer. Without: an error object in the middle of a stream.
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

/** An error object sent in a 200's body, as the error it stands for. */
export function errorOfBody(error: ChatErrorObject, requestId: string | null): LlmError {
  const message = typeof error.message === 'string' && error.message !== '' ? error.message : 'error body with HTTP 200';
  return new LlmError(statusOfChatError(error), message, { type: kindOfChatError(error), requestId, shouldRetry: shouldRetry(error, null) });
}
