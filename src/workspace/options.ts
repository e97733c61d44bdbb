/**
 * `defineAgent({ workspace })`: `true`, or the options below. Checked once when the agent is defined;
 * what a worker uses is `WorkspaceSettings`, every default filled in.
 */
import { z } from 'zod';

const MiB = 1024 * 1024;

/** The defaults, as the README documents them. */
export const WORKSPACE_DEFAULTS = {
  maxBytes: 1024 * MiB,
  maxFiles: 50_000,
  commandTimeoutSeconds: 120,
  maxCommandTimeoutSeconds: 3600,
  memoryBytes: 4096 * MiB,
  processes: 256,
  outputBytes: 30_000,
} as const;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Set by the sandbox itself; an agent cannot replace them. */
const RESERVED_ENV = new Set(['PATH', 'HOME', 'PWD']);

const envName = z
  .string()
  .regex(ENV_NAME, 'must be an environment variable name (letters, digits, _)')
  .refine((n) => !RESERVED_ENV.has(n), 'is set by the sandbox (PATH, HOME and PWD cannot be given)');

const positiveInt = (max: number) =>
  z.number().int('must be a whole number').min(1, 'must be at least 1').max(max, `must be at most ${max}`);

export const WorkspaceOptionsSchema = z.union([
  z.literal(true),
  z.strictObject({
    /** Paths not saved, gitignore-style (`node_modules/`, `*.log`, `/build`, `!keep.log`). */
    exclude: z.array(z.string().min(1).max(500)).max(200).optional(),
    /** The most bytes of file content the workspace may hold. */
    maxBytes: positiveInt(64 * 1024 * MiB).optional(),
    /** The most files, directories and symlinks it may hold. */
    maxFiles: positiveInt(10_000_000).optional(),
    /** Commands may reach the network. Their calls are then not re-run after a crash: a person decides. */
    network: z.boolean().optional(),
    /**
     * Environment variables of commands besides PATH, HOME and LANG: names taken from the worker's
     * environment, or names and values.
     */
    env: z.union([z.array(envName).max(200), z.record(envName, z.string().max(32_768))]).optional(),
    /**
     * Host paths (absolute) commands see read-only besides the system's own directories (/usr, /etc,
     * /opt, …), e.g. a toolchain under /home. Paths that do not exist are left out.
     */
    readOnlyPaths: z
      .array(
        z
          .string()
          .regex(/^\/[^\0]*$/, 'must be an absolute path')
          .max(4096),
      )
      .max(100)
      .optional(),
    /** `'bubblewrap'` (default): commands run in a sandbox. `'none'`: on the worker itself, unsandboxed. */
    sandbox: z.enum(['bubblewrap', 'none']).optional(),
    /** @unit seconds — a command's time when its call names none. */
    commandTimeoutSeconds: positiveInt(86_400).optional(),
    /** @unit seconds — the most a call may ask for. */
    maxCommandTimeoutSeconds: positiveInt(86_400).optional(),
    /** The address space a command's processes may each have. */
    memoryBytes: positiveInt(1024 * 1024 * MiB).optional(),
    /** The most processes a command may have at once. */
    processes: positiveInt(1_000_000).optional(),
    /** Of stdout and of stderr each, what a call's result keeps (the head and the tail, with a note between). */
    outputBytes: positiveInt(16 * MiB).optional(),
  }),
]);

export type WorkspaceOptions = z.input<typeof WorkspaceOptionsSchema>;

export interface WorkspaceSettings {
  exclude: readonly string[];
  maxBytes: number;
  maxFiles: number;
  network: boolean;
  /** Names read from the worker's environment, or fixed values (resolved when a command runs). */
  env: readonly string[] | Readonly<Record<string, string>>;
  readOnlyPaths: readonly string[];
  sandbox: 'bubblewrap' | 'none';
  commandTimeoutSeconds: number;
  maxCommandTimeoutSeconds: number;
  memoryBytes: number;
  processes: number;
  outputBytes: number;
}

/** The settings of checked options, defaults filled in. */
export function workspaceSettings(options: z.output<typeof WorkspaceOptionsSchema>): WorkspaceSettings {
  const o = options === true ? {} : options;
  const commandTimeoutSeconds = o.commandTimeoutSeconds ?? WORKSPACE_DEFAULTS.commandTimeoutSeconds;
  return Object.freeze({
    exclude: Object.freeze([...(o.exclude ?? [])]),
    maxBytes: o.maxBytes ?? WORKSPACE_DEFAULTS.maxBytes,
    maxFiles: o.maxFiles ?? WORKSPACE_DEFAULTS.maxFiles,
    network: o.network ?? false,
    env: Object.freeze(Array.isArray(o.env) ? [...o.env] : { ...o.env }),
    readOnlyPaths: Object.freeze([...(o.readOnlyPaths ?? [])]),
    sandbox: o.sandbox ?? 'bubblewrap',
    commandTimeoutSeconds,
    maxCommandTimeoutSeconds: Math.max(commandTimeoutSeconds, o.maxCommandTimeoutSeconds ?? WORKSPACE_DEFAULTS.maxCommandTimeoutSeconds),
    memoryBytes: o.memoryBytes ?? WORKSPACE_DEFAULTS.memoryBytes,
    processes: o.processes ?? WORKSPACE_DEFAULTS.processes,
    outputBytes: o.outputBytes ?? WORKSPACE_DEFAULTS.outputBytes,
  });
}
