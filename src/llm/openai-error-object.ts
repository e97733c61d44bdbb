/**
 * What an error object of a Chat Completions response stands for (`{message, type, code}`, in an error
 * response, in the middle of a stream, or in a 200's body). Pure, and free of the OpenAI SDK: the wire
 * format needs it on every response, the SDK is loaded only when an OpenAI-compatible agent calls.
 */
import { LlmError } from '../domain/errors.ts';

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

/** The error object of a response (`{message, type, code, param}`), as far as it can be read. */
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
export function shouldRetry(error: ChatErrorObject | null | undefined, header: string | null | undefined): boolean | null {
  if (error?.code === 'insufficient_quota' || error?.type === 'insufficient_quota') return false;
  return header === 'true' ? true : header === 'false' ? false : null;
}

/** An error object sent in a 200's body, as the error it stands for. */
export function errorOfBody(error: ChatErrorObject, requestId: string | null): LlmError {
  const message = typeof error.message === 'string' && error.message !== '' ? error.message : 'error body with HTTP 200';
  return new LlmError(statusOfChatError(error), message, {
    type: kindOfChatError(error),
    requestId,
    shouldRetry: shouldRetry(error, null),
  });
}
