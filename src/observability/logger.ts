import pino from 'pino';
import { currentContext } from './context.ts';
import { prettyStream } from './pretty.ts';

export type Logger = pino.Logger;

/** Never printed, whatever a caller passes to the logger. */
const REDACT = [
  'apiKey', '*.apiKey', 'api_key', '*.api_key', 'authorization', '*.authorization', 'headers.authorization',
  '*.headers["x-api-key"]', 'headers["x-api-key"]', 'password', '*.password', 'databaseUrl', '*.databaseUrl',
  'messages', '*.messages', 'content', '*.content', 'input', '*.input',
];

export interface LoggerOptions {
  level?: string;
  format?: 'json' | 'pretty';
  /** Where lines go; defaults to stdout. Tests pass a stream to read them. */
  destination?: pino.DestinationStream;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const options: pino.LoggerOptions = {
    level: opts.level ?? 'info',
    base: undefined,
    redact: { paths: REDACT, censor: '[redacted]' },
    // Every line written inside a run carries its run_id, step_seq and worker.
    mixin: () => ({ ...currentContext() }),
  };
  if (opts.destination) return pino(options, opts.destination);
  return opts.format === 'pretty' ? pino(options, prettyStream()) : pino(options);
}
