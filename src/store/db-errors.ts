/**
 * Whether a database error will pass, decided once from its SQLSTATE (or, for errors raised before the
 * server answered, from the client's error). Pure.
 *
 * - transient: the connection or the server's state, not the statement — the same statement can
 *   succeed a moment later (class 08 connection exceptions, the server shutting down or starting,
 *   too many connections, serialization failures and deadlocks, sockets reset or refused, the pool
 *   unable to hand out a connection in time).
 * - permanent: the statement itself — it fails the same way on every retry (class 22 data exceptions
 *   such as a NUL in text or a number out of range, class 23 constraint violations, class 42 syntax or
 *   access errors, class 54 limits exceeded). Retrying only repeats the failure; for the engine, repeating
 *   it by crashing would mean paying for the same model call again and again.
 * - other: not a database error, or one this module makes no claim about; callers treat it as before.
 */

export type DatabaseErrorKind = 'transient' | 'permanent' | 'other';

const TRANSIENT_SQLSTATES = new Set([
  '57P01', // admin_shutdown: the server is stopping (or our backend was terminated)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: the server is starting up
  '53300', // too_many_connections
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);
const PERMANENT_CLASSES = new Set(['22', '23', '42', '54']);

/** Socket errors from Node: the connection, never the statement. */
const TRANSIENT_ERRNOS = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** node-postgres and pg-pool raise these without a code when a connection dies or cannot be had. */
const TRANSIENT_MESSAGES = [/^Connection terminated/, /^timeout exceeded when trying to connect/, /^Client has encountered a connection error/];

const SQLSTATE = /^[0-9A-Z]{5}$/;

export function sqlState(e: unknown): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SQLSTATE.test(code) && !TRANSIENT_ERRNOS.has(code) ? code : null;
}

export function classifyDatabaseError(e: unknown): DatabaseErrorKind {
  if (!(e instanceof Error)) return 'other';
  const code = (e as { code?: unknown }).code;
  // Before the SQLSTATE test: "EPIPE" has a SQLSTATE's shape.
  if (typeof code === 'string' && TRANSIENT_ERRNOS.has(code)) return 'transient';
  const state = sqlState(e);
  if (state) {
    if (state.startsWith('08') || TRANSIENT_SQLSTATES.has(state)) return 'transient';
    if (PERMANENT_CLASSES.has(state.slice(0, 2))) return 'permanent';
    return 'other';
  }
  if (TRANSIENT_MESSAGES.some((m) => m.test(e.message))) return 'transient';
  return 'other';
}

export const isTransientDatabaseError = (e: unknown): boolean => classifyDatabaseError(e) === 'transient';

/** 23505: the row is already there. On a retried write this means the first attempt committed. */
export const isUniqueViolation = (e: unknown): boolean => sqlState(e) === '23505';

/** The server's message and SQLSTATE, kept short: it goes into a run's `error`. */
export function describeDatabaseError(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const short = message.length > 300 ? `${message.slice(0, 300)}…` : message;
  const state = sqlState(e);
  return state ? `${short} (SQLSTATE ${state})` : short;
}
