/** What a `runs` subcommand is given, and the checks of its arguments that several share. */
import { RUN_STATUSES } from '../domain/types.ts';
import type { ApiClient } from './api-client.ts';
import type { UsageError } from './usage.ts';

/** An option of a subcommand: node's parseArgs descriptor, with the text the usage shows. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  help: string;
}

export interface RunsContext {
  /** The API client; it reads --url / DURABLE_AGENT_URL and DURABLE_AGENT_KEY when first used. */
  api(): ApiClient;
  /** The subcommand's positional arguments. */
  args: string[];
  /** Its options, as given (strings and booleans). */
  options: Record<string, string | boolean | undefined>;
  json: boolean;
  now: Date;
  out(text: string): void;
  /** A usage error of this subcommand (exit 2, then the group's usage). */
  usage(message: string): UsageError;
}

export interface RunsSubcommand {
  name: string;
  /** Its arguments as the usage shows them, e.g. `<id>`. */
  args: string;
  summary: string;
  /** How many positional arguments it takes. */
  positionals: number;
  /** Options besides --url, --json and --help, with the text the usage shows for each. */
  options?: Record<string, OptionSpec>;
  run(ctx: RunsContext): Promise<number>;
}

/** `--status`, checked here so a typo is a usage error (2), not a refused request (1). */
export function statusOption(ctx: RunsContext): string | undefined {
  const status = ctx.options.status as string | undefined;
  if (status !== undefined && !(RUN_STATUSES as readonly string[]).includes(status.toUpperCase())) {
    throw ctx.usage(`--status must be one of ${RUN_STATUSES.join(', ')}`);
  }
  return status?.toUpperCase();
}

/** A run id argument: a UUID, or a usage error. */
export function runIdArgument(ctx: RunsContext): string {
  const id = ctx.args[0]!;
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id))
    throw ctx.usage(`"${id.slice(0, 60)}" is not a run id (a UUID)`);
  return id;
}
