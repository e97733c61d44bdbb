/**
 * Errors → HTTP status and the one error shape, `{"error":{"code","message"}}`. A database that cannot
 * be reached is a 503 with Retry-After: the client did nothing wrong and may send the same request
 * again. Anything else not recognised here is a bug of ours: a 500 with a generic message, because a
 * raw message can carry SQL, row values or a connection string. The details go to the log instead.
 */
import { isTransientDatabaseError } from '../core/transient-errors.ts';
import { ConflictError, InputError, NotFoundError, UnauthorizedError } from '../domain/errors.ts';
import type { ErrorBody } from './schemas.ts';

export interface HttpError {
  status: number;
  body: ErrorBody;
  headers?: Record<string, string>;
}

/** @unit seconds — when a client may try again while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

const databaseUnavailable = (): HttpError => ({
  status: 503,
  body: { error: { code: 'database_unavailable', message: 'the database cannot be reached; try again shortly' } },
  headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
});

const error = (status: number, code: string, message: string, issues?: InputError['issues']): HttpError => ({
  status,
  body: { error: issues && issues.length ? { code, message, issues: [...issues] } : { code, message } },
});

/** Fastify's own client errors (its codes start with FST_): our status, code and fixed message for each. */
const FASTIFY_ERRORS: Record<string, [status: number, code: string, message: string]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json', 'the request body is not valid JSON'],
  FST_ERR_CTP_BODY_TOO_LARGE: [
    413,
    'payload_too_large',
    'the request body is larger than this route takes (1 MiB; 48 MiB to create or fork a run)',
  ],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type', 'the request body must be application/json'],
  FST_ERR_BAD_URL: [400, 'bad_request', 'the URL is not valid'],
  // An overlong path parameter can only be a malformed id: the same 400 as any other malformed id.
  FST_ERR_MAX_PARAM_LENGTH: [400, 'invalid_request', 'a path parameter is too long'],
};

export function toHttpError(e: unknown): HttpError {
  if (e instanceof InputError) return error(400, 'invalid_request', e.message, e.issues);
  if (e instanceof UnauthorizedError) {
    // RFC 6750: the scheme to use, and for a key that was sent but refused, why.
    const challenge = e.reason === 'invalid' ? 'Bearer realm="durable-agent", error="invalid_token"' : 'Bearer realm="durable-agent"';
    return { ...error(401, 'unauthorized', e.message), headers: { 'www-authenticate': challenge } };
  }
  if (e instanceof NotFoundError) return error(404, 'not_found', e.message);
  if (e instanceof ConflictError) return error(409, 'conflict', e.message);
  if (isTransientDatabaseError(e)) return databaseUnavailable();
  const f = e as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (
    typeof f.code === 'string' &&
    f.code.startsWith('FST_') &&
    typeof f.statusCode === 'number' &&
    f.statusCode >= 400 &&
    f.statusCode < 500
  ) {
    const known = FASTIFY_ERRORS[f.code];
    if (known) return error(...known);
    // Fastify's other messages are its own texts, at most quoting the client's request back to it.
    return error(f.statusCode, f.statusCode === 404 ? 'not_found' : 'bad_request', String(f.message).slice(0, 300));
  }
  return error(500, 'internal_error', 'internal server error');
}

export { INPUT_NAMES, type InputPart, parseInput } from '../runs/parse-input.ts';
