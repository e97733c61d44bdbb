/**
 * Bad usage of a command: one line saying what is wrong (exit code 2). The main command adds its
 * usage text after the line; a command group adds its own.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

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

/**
 * A command group's arguments (`durable-agent keys create …`): its options (`--help` and `--json` always
 * among them), the subcommand, which must be one of `names`, and the arguments after it. `null` when
 * help was asked for (it is printed). `usage(message)` is a UsageError of the group and subcommand.
 */
export function subcommandOf<const O extends OptionsConfig>(
  argv: string[],
  group: { command: string; usage: string; names: readonly string[]; options: O },
) {
  const { values, positionals } = parseOptions(
    {
      args: argv,
      allowPositionals: true,
      options: { ...group.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const,
    },
    group.usage,
  );
  const [name, ...args] = positionals;
  if ((values as { help?: boolean }).help || name === 'help') {
    process.stdout.write(group.usage);
    return null;
  }
  const usage = (message: string) => new UsageError(`${group.command}${name ? ` ${name}` : ''}: ${message}`, group.usage);
  if (name === undefined) throw usage('no subcommand given');
  if (!group.names.includes(name)) throw usage(`unknown subcommand "${name}"`);
  return { name, args, values: values as OptionValues<O>, usage };
}

/** The values parseArgs gives for `O`, and `--json`. */
type OptionValues<O> = { [K in keyof O]?: O[K] extends { type: 'boolean' } ? boolean : string } & { json?: boolean };
