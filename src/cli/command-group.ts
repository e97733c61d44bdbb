/**
 * A command group over the HTTP API (`runs`, `schedules`): a table of subcommands, each one API call or a
 * few, printed for people or as the API's JSON (`--json`). The server from `--url` or DURABLE_AGENT_URL,
 * the key from DURABLE_AGENT_KEY. Exit codes: 0 done, 1 the API refused or could not be reached (one line
 * saying why), 2 bad usage.
 */
import { type ApiClient, ApiCallError, apiClient } from './api-client.ts';
import type { OptionSpec, RunsContext, RunsSubcommand } from './runs-context.ts';
import { parseOptions, UsageError } from './usage.ts';

const COMMON = {
  url: { type: 'string', help: 'the API (DURABLE_AGENT_URL; default http://127.0.0.1:8080)' },
  json: { type: 'boolean', help: "print the API's JSON instead of text" },
  help: { type: 'boolean', short: 'h', help: 'this text' },
} as const satisfies Record<string, OptionSpec>;

export function groupUsage(group: string, subcommands: readonly RunsSubcommand[]): string {
  const lines = [`Usage: durable-agent ${group} <subcommand> [options]`, '', 'Subcommands:'];
  for (const c of subcommands) {
    lines.push(`  ${`${c.name} ${c.args}`.trimEnd().padEnd(34)} ${c.summary}`);
    for (const [name, o] of Object.entries(c.options ?? {})) {
      lines.push(`    ${`--${name}${o.type === 'string' ? ' <value>' : ''}`.padEnd(32)} ${o.help}`);
    }
  }
  lines.push('', 'Options of every subcommand:');
  for (const [name, o] of Object.entries(COMMON)) lines.push(`  ${`--${name}${o.type === 'string' ? ' <url>' : ''}`.padEnd(34)} ${o.help}`);
  lines.push('', 'The API key comes from DURABLE_AGENT_KEY. Exit codes: 0 done, 1 the API refused or cannot be reached, 2 bad usage.', '');
  return lines.join('\n');
}

/** Runs subcommand `argv[0]` of `group` (its options parsed, its context made); its exit code. */
export async function commandGroup(
  group: string,
  subcommands: readonly RunsSubcommand[],
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  const usage = groupUsage(group, subcommands);
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    if (name === undefined) throw new UsageError(`${group}: no subcommand given`, usage);
    process.stdout.write(usage);
    return 0;
  }
  const command = subcommands.find((c) => c.name === name);
  if (!command) throw new UsageError(`${group}: unknown subcommand "${name}"`, usage);
  const options = Object.fromEntries(Object.entries({ ...COMMON, ...command.options }).map(([k, { help: _h, ...o }]) => [k, o]));
  const { values, positionals } = parseOptions({ args: rest, allowPositionals: true, options }, usage);
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (positionals.length < command.positionals) throw new UsageError(`${group} ${name}: missing ${command.args}`, usage);
  if (positionals.length > command.positionals)
    throw new UsageError(`${group} ${name}: unexpected argument "${positionals[command.positionals]}"`, usage);
  let client: ApiClient | null = null;
  const { loadClientConfig } = await import('../config/environment.ts');
  const ctx: RunsContext = {
    api: () => (client ??= apiClient(loadClientConfig(env, { url: values.url as string | undefined }))),
    args: positionals,
    options: values as Record<string, string | boolean | undefined>,
    json: values.json === true,
    now: new Date(),
    out: (text) => process.stdout.write(text),
    usage: (message) => new UsageError(`${group} ${name}: ${message}`, usage),
  };
  try {
    return await command.run(ctx);
  } catch (e) {
    if (e instanceof ApiCallError) {
      process.stderr.write(`durable-agent: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
