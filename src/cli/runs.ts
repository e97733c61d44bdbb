/**
 * `durable-agent runs <subcommand>`: runs of a running server, through its HTTP API (`--url`,
 * DURABLE_AGENT_URL; the key from DURABLE_AGENT_KEY). Text for people by default, `--json` for
 * scripts (the API's own JSON). Exit codes: 0 done, 1 the API refused or could not be reached (one
 * line saying why), 2 bad usage.
 *
 * The subcommands are a table: a new one is a module exporting a RunsSubcommand, added to SUBCOMMANDS
 * with one line.
 */
import { commandGroup, groupUsage } from './command-group.ts';
import type { RunsSubcommand } from './runs-context.ts';
import { forkCommand } from './runs-fork.ts';
import { approveCommand, completeCommand, denyCommand } from './runs-decide.ts';
import { purgeCommand } from './runs-purge.ts';
import { tailCommand } from './runs-tail.ts';
import { cancelCommand, deleteCommand, listCommand, showCommand, stepsCommand } from './runs-read.ts';

export const SUBCOMMANDS: readonly RunsSubcommand[] = [
  listCommand,
  showCommand,
  stepsCommand,
  cancelCommand,
  deleteCommand,
  purgeCommand,
  forkCommand,
  tailCommand,
  approveCommand,
  denyCommand,
  completeCommand,
];

/** `durable-agent runs …`: the run subcommands of the table above. */
export const runsCommand = (argv: string[], env: Record<string, string | undefined> = process.env) =>
  commandGroup('runs', SUBCOMMANDS, argv, env);

export const runsUsage = () => groupUsage('runs', SUBCOMMANDS);
