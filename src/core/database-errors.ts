/**
 * What a database error means for a write that failed, decided once from its SQLSTATE. Pure.
 *
 * - transient: the connection or the server's state, not the statement — the same statement can
 *   succeed a moment later. The decision is `isTransientDatabaseError` (src/db/errors.ts), the one the
 *   API answers 503 by: connection exceptions, a server shutting down or starting, too many
 *   connections, lost races, sockets reset or refused, a pool that could not connect in time.
 * - permanent: the statement itself — it fails the same way on every retry: class 22 data exceptions
 *   (a NUL in text, a number out of range), 23 constraint violations, 42 syntax or access errors,
 *   54 limits exceeded. Retrying only repeats the failure; for the engine, repeating it by crashing
 *   would mean paying for the same model call again and again.
 * - other: not a database error, or one this module makes no claim about; callers treat it as before.
 */
import { isTransientDatabaseError } from './transient-errors.ts';

export type DatabaseErrorKind = 'transient' | 'permanent' | 'other';

const PERMANENT_CLASSES = new Set(['22', '23', '42', '54']);
/** Five characters; not an errno name such as "EPIPE" (no SQLSTATE class starts with E). */
const SQLSTATE = /^(?!E)[0-9A-Z]{5}$/;

/** The SQLSTATE of an error the server raised, or null. */
export function sqlState(e: unknown): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SQLSTATE.test(code) ? code : null;
}

export function classifyDatabaseError(e: unknown): DatabaseErrorKind {
  if (isTransientDatabaseError(e)) return 'transient';
  const state = sqlState(e);
  return state !== null && PERMANENT_CLASSES.has(state.slice(0, 2)) ? 'permanent' : 'other';
}

/** 23505: the row is already there. On a retried write this means the first attempt committed. */
export const isUniqueViolation = (e: unknown): boolean => sqlState(e) === '23505';

/** The server's message and SQLSTATE, kept short: it goes into a run's `error`. */
export function describeDatabaseError(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const short = message.length > 300 ? `${message.slice(0, 300)}…` : message;
  const state = sqlState(e);
  return state ? `${short} (SQLSTATE ${state})` : short;
}
