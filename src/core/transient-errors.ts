/**
 * Which database errors are worth trying again, decided once for every caller (the API answers 503
 * to these; a writer may retry them). Transient: the connection could not be made or was cut (the
 * server restarting or unreachable, too many connections), or the transaction lost a race
 * (serialization failure, deadlock): the same statement may well succeed a moment later. Everything
 * else (a data error, a constraint, a syntax error) fails the same way every time: permanent.
 */

/** SQLSTATEs of a lost race or a server that is going away or not ready yet. */
const TRANSIENT_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '53300', // too_many_connections
  '57P01', // admin_shutdown: the backend was terminated
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: the server is starting or stopping
]);

/** Socket and name-resolution failures, as Node reports them. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** node-postgres reports a lost or timed-out connection by message only. */
const PG_CONNECTION_MESSAGES = [
  /^Connection terminated/, // "… unexpectedly", "… due to connection timeout"
  /^timeout exceeded when trying to connect$/,
  /^Client has encountered a connection error and is not queryable$/,
];

export function isTransientDatabaseError(e: unknown, depth = 0): boolean {
  if (typeof e !== 'object' || e === null || depth > 5) return false;
  const { code, message, errors, cause } = e as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof code === 'string') {
    // Class 08: connection exception (the SQLSTATE of every failure to reach or keep the server).
    if (TRANSIENT_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code) || NETWORK_CODES.has(code)) return true;
  }
  if (typeof message === 'string' && PG_CONNECTION_MESSAGES.some((m) => m.test(message))) return true;
  // Connecting to a name with several addresses fails with an AggregateError of one error per address.
  if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => isTransientDatabaseError(x, depth + 1))) return true;
  return cause !== undefined && isTransientDatabaseError(cause, depth + 1);
}
