/**
 * Bad usage of a command: one line saying what is wrong (exit code 2). The main command adds its
 * usage text after the line; a command group adds its own.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  /** The usage text to print after the line; the main usage when absent. */
  constructor(
    message: string,
    readonly usage?: string,
  ) {
    super(message);
  }
}

/** node's parseArgs, its errors turned into one readable UsageError line. */
export function parseOptions<T extends ParseArgsConfig>(config: T, usage?: string): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (e) {
    // node's own messages run to several sentences; the first clause is the readable line.
    const { code, message } = e as { code?: string; message: string };
    const option = /'([^']+)'/.exec(message)?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) throw new UsageError(`unknown option ${option}`, usage);
    throw new UsageError(message.split('. ')[0]!.replace(/^Option/, 'option'), usage);
  }
}
