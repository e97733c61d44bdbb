/**
 * How every failure of a Messages API call becomes one LlmError, raised by the client's own transport
 * (anthropic-http.ts).
 *
 * The status is the HTTP status, or the one an error event's type stands for; -1 means no usable
 * response (connection refused or reset, a reply cut off or not the API's, the client's own time
 * limit, an abort) and is retryable; 0 means the request was refused before it was sent, which no
 * retry can fix. The message is the API's own; headers and bodies are left out so no credential can
 * leak into logs or stored steps.
 */
import { CONTEXT_WINDOW_EXCEEDED, LlmError } from '../domain/errors.ts';
import { brokenOrUnsent, describeCause, type FailureContext, ownFailure, redactor } from './failure.ts';
import { parseRetryAfterMs } from './retrying.ts';

/** The response's headers, looked up by lower-case name (see http-response.ts's `headerSource`; fetch's Headers fit too). */
export interface HeaderSource {
  get(name: string): string | null | undefined;
}

/**
 * The HTTP status each of the API's error types is sent with. An `error` event in the middle of a
 * stream carries only the type (the stream itself began with a 200), so this is how it is classified:
 * overloaded mid-response is retried as a 529 would be. An unknown type counts as the server's trouble.
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

/** What an error response says: its HTTP status (none for an error event), the API's type and message. */
export interface ErrorResponse {
  status: number | undefined;
  type: string | null;
  message: string | null;
  headers: HeaderSource | null | undefined;
}

/**
 * The type and message of the API's error body (`{type: "error", error: {type, message}}`), as far
 * as `body` is one: anything else (an HTML page, a proxy's text, no body) has neither.
 */
export function errorBodyFields(body: unknown): { type: string | null; message: string | null } {
  const error = body !== null && typeof body === 'object' ? (body as { error?: unknown }).error : undefined;
  if (error === null || typeof error !== 'object') return { type: null, message: null };
  const { type, message } = error as { type?: unknown; message?: unknown };
  return { type: typeof type === 'string' ? type : null, message: typeof message === 'string' ? message : null };
}

/** How the Messages API says a request does not fit the model's context window (a 400, or a 413 for the request's size). */
const TOO_LONG =
  /prompt is too long|exceed(?:s|ed)? (?:the )?(?:model's )?context (?:window|limit)|input length and `?max_tokens`? exceed/i;

/** An HTTP error response, or (without a status) an `error` event in the middle of a stream. */
export function fromErrorResponse(response: ErrorResponse, context: FailureContext = {}): LlmError {
  const status = typeof response.status === 'number' ? response.status : statusOfErrorType(response.type);
  // The conversation no longer fits: no retry can help, whatever the server's header says.
  const tooLong = (status === 400 || status === 413) && TOO_LONG.test(response.message ?? '');
  const shouldRetry = tooLong ? 'false' : response.headers?.get('x-should-retry');
  return new LlmError(status, redactor(context.apiKey)(response.message ?? `HTTP ${status}`), {
    type: tooLong ? CONTEXT_WINDOW_EXCEEDED : response.type,
    requestId: response.headers?.get('request-id') ?? context.requestId ?? null,
    retryAfterMs: parseRetryAfterMs(response.headers),
    shouldRetry: shouldRetry === 'true' ? true : shouldRetry === 'false' ? false : null,
    usage: context.usage ?? null,
  });
}

export function aborted(context: FailureContext = {}): LlmError {
  return new LlmError(-1, 'request aborted', { type: 'aborted', usage: context.usage ?? null });
}

/** The client's own limit on the wait for a response ran out (the decorators' step timeout is another). */
export function timedOut(context: FailureContext = {}): LlmError {
  return new LlmError(-1, 'request timed out', { type: 'timeout', usage: context.usage ?? null });
}

/** No response at all: the connection was refused, reset or hung up before the response's headers. */
export function connectionFailed(cause: unknown, context: FailureContext = {}): LlmError {
  // The useful part is the cause (ECONNREFUSED, socket hang up …).
  const detail = cause instanceof Error ? `: ${describeCause(cause)}` : '';
  return new LlmError(-1, redactor(context.apiKey)(`connection error${detail}`), {
    type: 'connection_error',
    cause,
    usage: context.usage ?? null,
  });
}

/**
 * The proxy (HTTPS_PROXY …) refused to open a tunnel to the API. 407 (credentials missing or refused)
 * and 403 (its rules forbid the host) fail the same way again: nothing was sent, no retry can fix it.
 * Any other status (a proxy that cannot reach the API answers 502 or 503) may well pass next time.
 */
export function proxyRefused(refusal: { status: number; message: string }, context: FailureContext = {}): LlmError {
  const fixed = refusal.status === 407 || refusal.status === 403;
  const hint = refusal.status === 407 ? ': it wants credentials, given as user:password in the proxy URL' : '';
  return new LlmError(fixed ? 0 : -1, `${refusal.message}${hint}`, { type: 'proxy_error', cause: refusal, usage: context.usage ?? null });
}

/**
 * Whether a request that got no response's headers failed on a time limit: an abort nobody asked for
 * (the caller's own abort is checked first), or a connect timeout of the HTTP stack (the connection
 * pool's, or the system's ETIMEDOUT).
 */
export function isTimeout(error: unknown): boolean {
  if (isAbortError(error)) return true;
  const cause = error !== null && typeof error === 'object' && 'cause' in error ? String(error.cause) : '';
  return /timed? ?out/i.test(String(error) + cause);
}

/** An AbortError: what an aborted call's request and response are destroyed with (as fetch's are). */
export function isAbortError(error: unknown): boolean {
  return error !== null && typeof error === 'object' && (error as { name?: unknown }).name === 'AbortError';
}

/**
 * Any other failure: ours (an LlmError raised while reading the response), or one of the HTTP stack or
 * JSON. After the response's headers it broke the response (retryable); before, the request was never
 * sent (a bad option, a bad URL), which no retry can fix.
 */
export function classifyFailure(error: unknown, context: FailureContext = {}): LlmError {
  if (error instanceof LlmError) return ownFailure(error, context);
  return brokenOrUnsent(error, context); // "terminated": the connection closed mid-body (http-response.ts)
}
