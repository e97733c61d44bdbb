import pino from 'pino';
import { prettyStream } from './pretty.ts';
import { type Redact, redactor, redactValue } from '../core/redact.ts';

export type Logger = pino.Logger;

/** Secrets: censored wherever they sit in the top three levels of a logged object (e.g. req.headers.authorization). */
const SECRET_KEYS = [
  'apiKey',
  'api_key',
  'authorization',
  'Authorization',
  '["x-api-key"]',
  '["X-Api-Key"]',
  'password',
  'databaseUrl',
  'databaseDirectUrl',
  'cookie',
];
/** Conversation text and tool inputs: censored at the top two levels; logs say what happened, not what was said. */
const CONTENT_KEYS = ['messages', 'content', 'input'];

const unquote = (key: string) => key.replace(/^\["(.*)"\]$/, '$1');
/** Keys censored at depths 0 (top level) to 2; content keys at depths 0 and 1. */
const SECRET = new Set(SECRET_KEYS.map(unquote));
const CONTENT = new Set(CONTENT_KEYS);
/** Top-level paths, for pino's own redaction: it also covers child bindings, which the log formatter never sees. */
const REDACT = [...SECRET_KEYS, ...CONTENT_KEYS];

/**
 * The censoring of keys at depths 1 and 2 (and 0), in one pass over the logged object: pino's wildcard
 * paths (`*.*.apiKey`) run a redaction over every field of every line, which cost more than writing
 * the line. Never changes the caller's objects: a censored level is a copy; an untouched one is itself.
 */
function censorKeys(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null || value instanceof Error) return value;
  let copy: Record<string, unknown> | unknown[] | null = null;
  const source = value as Record<string, unknown>;
  for (const key of Object.keys(source)) {
    const v = source[key];
    let next = v;
    if (SECRET.has(key) || (depth < 2 && CONTENT.has(key))) next = '[redacted]';
    else if (depth < 2 && typeof v === 'object' && v !== null) next = censorKeys(v, depth + 1);
    if (next === v) continue;
    copy ??= Array.isArray(value) ? [...value] : { ...source };
    (copy as Record<string, unknown>)[key] = next;
  }
  return copy ?? value;
}

/**
 * The last line of defence, applied to every string value of every line: a key that slipped into an
 * error message or an unexpected field is still cut out. Anthropic keys (sk-ant-…), other sk- keys,
 * bearer tokens, our own API keys (dak_…). The REDACT patterns, when given, are applied after these.
 */
const scrub: Redact = redactor([
  {
    name: 'built-in log scrub',
    source: String.raw`sk-ant-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{20,}|Bearer [A-Za-z0-9._~+/=-]{8,}|dak_[A-Za-z0-9_-]{20,}`,
    contains: ['sk-', 'Bearer ', 'dak_'],
  },
]);

/**
 * A line's values redacted, the line kept one JSON object: a pattern cut into the serialised line (one
 * that runs to the end of its text) would take the closing quote, the braces and the newline with it,
 * and fuse the next record into this one. Logging is on hot paths, so the patterns first run over the
 * line as it is, and only a line they match is parsed, redacted value by value and serialised again.
 */
export function redactLine(line: string, redact: Redact): string {
  if (redact(line) === line) return line;
  const body = line.endsWith('\n') ? line.slice(0, -1) : line;
  let record: unknown;
  try {
    record = JSON.parse(body);
  } catch {
    // Not a JSON record (pino writes nothing else): still one line, and still without the secret.
    return `${redact(body).replace(/\r?\n/g, ' ')}\n`;
  }
  return `${JSON.stringify(redactValue(record, redact))}\n`;
}

/**
 * Errors in logs say what failed and where, never the data it failed on: node-postgres errors carry
 * the offending values in `detail`, `where` ("JSON data, line 1: …") and `internalQuery`, an HTTP
 * client's error may carry its request. So an error keeps these fields only, and so does each cause.
 */
const ERROR_FIELDS = ['code', 'errno', 'syscall', 'address', 'port', 'status', 'severity', 'routine', 'table', 'column', 'constraint'];

export function serializeError(e: unknown, depth = 0): unknown {
  if (!(e instanceof Error)) return e;
  const fields: Record<string, unknown> = { type: e.constructor.name, message: e.message, stack: e.stack };
  for (const key of ERROR_FIELDS) {
    const v = (e as unknown as Record<string, unknown>)[key];
    if (typeof v === 'string' || typeof v === 'number') fields[key] = v;
  }
  if (depth < 3 && e.cause !== undefined) fields.cause = serializeError(e.cause, depth + 1);
  if (depth < 3 && e instanceof AggregateError) fields.errors = e.errors.slice(0, 5).map((x: unknown) => serializeError(x, depth + 1));
  return fields;
}

export interface LoggerOptions {
  level?: string;
  format?: 'json' | 'pretty';
  /** Where lines go; defaults to stdout. Tests pass a stream to read them. */
  destination?: pino.DestinationStream;
  /** The REDACT patterns (redact.ts), applied to every string value of a line after the built-in scrub. */
  redact?: Redact;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const own = opts.redact;
  const values: Redact = own ? (text) => own(scrub(text)) : scrub;
  const options: pino.LoggerOptions = {
    level: opts.level ?? 'info',
    base: undefined,
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: { err: serializeError },
    hooks: { streamWrite: (line) => redactLine(line, values) },
    formatters: { log: (object) => censorKeys(object, 0) as Record<string, unknown> },
  };
  if (opts.destination) return pino(options, opts.destination);
  return opts.format === 'pretty' ? pino(options, prettyStream()) : pino(options, stdoutLines());
}

/**
 * Stdout as Node writes it: each line at once — synchronously to a file or a terminal; to a pipe at
 * once while it has room, queued only behind a reader that cannot keep up. pino's default instead
 * queues lines in memory and writes one chunk per turn of the event loop: under load (thousands of runs
 * in flight) that queue grew faster than it drained, megabytes even when stdout was /dev/null, and a
 * worker killed with SIGKILL — the crash this runtime is built for — lost the lines that said what it
 * was doing. A pipe that nobody reads still queues here, as it does for console.log: the worker is
 * never blocked on its logs.
 */
function stdoutLines(): pino.DestinationStream {
  return process.stdout;
}
