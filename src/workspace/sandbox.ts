/**
 * Commands the model writes run in a bubblewrap sandbox: new mount, pid, ipc, uts, cgroup, user and
 * (unless the agent allows the network) network namespaces; the host's system directories read-only
 * (nothing else of the host: no home, no /var, no project folders, none of their sockets), this
 * worker's other workspaces and its data directory hidden, /run, /tmp and /dev private; the run's
 * workspace writable at /workspace; no capabilities; none of the worker's environment. Limits: wall
 * time (the whole tree is killed: the sandbox's pid namespace ends with its first process), address
 * space, processes (counted per sandbox: it has its own user namespace) and file size, by rlimits.
 *
 * `sandbox: 'none'` runs the same command on the worker, in the workspace directory, with the same
 * environment and time limit but nothing else: for a machine where the sandbox cannot run, when the
 * agent's author says so.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { ConfigError } from '../domain/errors.ts';
import type { CommandResult } from '../ports/workspace.ts';
import { SANDBOX_WORKSPACE } from './paths.ts';
import type { WorkspaceSettings } from './options.ts';
import { MAX_FILE_BYTES } from './scan.ts';

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface CommandSpec {
  command: string;
  /** The workspace directory on this worker. */
  dir: string;
  settings: WorkspaceSettings;
  timeoutMs: number;
  signal: AbortSignal;
  /** Directories of this worker a command must not see (other runs' workspaces, the data directory). */
  hidden: readonly string[];
}

/** Keeps the first and the last `limit / 2` bytes of a stream, and counts the rest. */
export class CappedOutput {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private total = 0;
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const half = Math.floor(this.limit / 2);
    if (this.headBytes < this.limit - half) {
      const take = chunk.subarray(0, this.limit - half - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
    }
    if (chunk.length === 0) return;
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    while (this.tailBytes - this.tail[0]!.length >= half) this.tailBytes -= this.tail.shift()!.length;
  }

  text(): string {
    const head = Buffer.concat(this.head).toString('utf8');
    if (this.total <= this.limit) return head + Buffer.concat(this.tail).toString('utf8');
    const tail = Buffer.concat(this.tail);
    const kept = tail.subarray(Math.max(0, tail.length - Math.floor(this.limit / 2)));
    const cut = this.total - this.headBytes - kept.length;
    return `${head}\n[output cut: ${cut} of ${this.total} bytes left out here; the first ${this.headBytes} and the last ${kept.length} are shown]\n${kept.toString('utf8')}`;
  }
}

/** The environment of a command: PATH, HOME, LANG and what the agent lists. */
export function commandEnv(settings: WorkspaceSettings, home: string, worker: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = { PATH: SANDBOX_PATH, HOME: home, LANG: worker.LANG || 'C.UTF-8', TMPDIR: '/tmp' };
  if (Array.isArray(settings.env)) {
    for (const name of settings.env as readonly string[]) if (worker[name] !== undefined) env[name] = worker[name];
  } else Object.assign(env, settings.env);
  return env;
}

/** Top-level entries of the host's root, as `bwrapArgs` binds them. */
export interface RootEntry {
  name: string;
  /** Where a symlink at the root points (`/bin` → `usr/bin`); null for a directory or file. */
  link: string | null;
}

/**
 * What of the host's root a command sees, read-only: the system's programs, libraries and settings.
 * Not the rest (/home, /root, /var, /srv, /mnt, a project's own folders): what is there, sockets
 * included, stays out of reach. An agent adds what its commands need with `readOnlyPaths`.
 */
const SYSTEM_DIRS = new Set(['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'etc', 'opt']);
/** Secrets of the system's settings a command never reads, even where it runs as the owner (root). */
const MASKED_FILES = ['/etc/shadow', '/etc/gshadow', '/etc/shadow-', '/etc/gshadow-'];
const MASKED_DIRS = ['/etc/ssh', '/etc/ssl/private'];

/** @unit bytes — the sandbox's own /run (nothing needs much there). */
const RUN_BYTES = 1024 * 1024;
/** @unit bytes — its /tmp at most (it is memory). */
const TMP_BYTES = 1024 * 1024 * 1024;

/** bwrap's arguments for a command in `dir`, given the host's root entries and the worker's uid. */
export function bwrapArgs(spec: Omit<CommandSpec, 'signal' | 'timeoutMs'>, root: readonly RootEntry[], uid: number): string[] {
  const { settings } = spec;
  const a = ['--die-with-parent', '--new-session', '--unshare-all'];
  if (settings.network) a.push('--share-net');
  // As root, bwrap keeps every capability in the sandbox unless told otherwise; as anyone else it drops them.
  if (uid === 0) a.push('--cap-drop', 'ALL');
  a.push('--hostname', 'sandbox');
  for (const e of root) {
    if (!SYSTEM_DIRS.has(e.name)) continue;
    if (e.link !== null) a.push('--symlink', e.link, `/${e.name}`);
    else a.push('--ro-bind', `/${e.name}`, `/${e.name}`);
  }
  for (const p of settings.readOnlyPaths) a.push('--ro-bind-try', p, p);
  for (const f of MASKED_FILES) if (fs.existsSync(f)) a.push('--ro-bind', '/dev/null', f);
  // What must stay out of sight though it lies under what is bound: an empty, read-only, tiny tmpfs over it.
  for (const h of [...MASKED_DIRS, ...spec.hidden]) if (fs.existsSync(h)) a.push('--size', '4096', '--tmpfs', h, '--remount-ro', h);
  a.push('--proc', '/proc', '--dev', '/dev');
  a.push('--size', String(Math.min(settings.maxBytes, TMP_BYTES)), '--tmpfs', '/tmp', '--size', String(RUN_BYTES), '--tmpfs', '/run');
  a.push('--bind', spec.dir, SANDBOX_WORKSPACE, '--chdir', SANDBOX_WORKSPACE);
  return a;
}

/** The host's root entries (directories and symlinks), read once. */
let rootEntries: RootEntry[] | null = null;
function hostRoot(): RootEntry[] {
  return (rootEntries ??= fs
    .readdirSync('/', { withFileTypes: true })
    .filter((d) => d.isDirectory() || d.isSymbolicLink())
    .map((d) => ({ name: d.name, link: d.isSymbolicLink() ? fs.readlinkSync(`/${d.name}`) : null })));
}

/** The limits, then the command, in bash; `exec` so the command is the shell's own process. */
function limited(settings: WorkspaceSettings, processes: boolean): string[] {
  const kib = (bytes: number) => String(Math.max(1, Math.floor(bytes / 1024)));
  const limits = [`ulimit -v ${kib(settings.memoryBytes)}`, `ulimit -f ${kib(Math.min(settings.maxBytes, MAX_FILE_BYTES))}`];
  if (processes) limits.push(`ulimit -u ${settings.processes}`);
  return ['/bin/bash', '-c', `${limits.join(' && ')} || exit 125; exec /bin/bash -c "$1"`, 'sandbox'];
}

/** Runs a command as the settings say and returns what it did; the signal or the timeout kills its whole tree. */
export function runCommand(spec: CommandSpec): Promise<CommandResult> {
  const { settings } = spec;
  const sandboxed = settings.sandbox === 'bubblewrap';
  const env = commandEnv(settings, sandboxed ? SANDBOX_WORKSPACE : spec.dir, process.env);
  // Process limits need the sandbox's own user namespace: on the host, RLIMIT_NPROC counts every process of the user.
  const shell = [...limited(settings, sandboxed), spec.command];
  const [file, args] = sandboxed
    ? ['bwrap', [...bwrapArgs(spec, hostRoot(), process.getuid?.() ?? -1), '--', ...shell]]
    : [shell[0]!, shell.slice(1)];
  return new Promise((resolve, reject) => {
    spec.signal.throwIfAborted();
    const child = spawn(file, args, {
      cwd: sandboxed ? '/' : spec.dir,
      // bwrap hands its environment to the command: only `env`, never on a command line `ps` shows.
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, killed whole
    });
    const stdout = new CappedOutput(settings.outputBytes);
    const stderr = new CappedOutput(settings.outputBytes);
    child.stdout.on('data', (c: Buffer) => stdout.push(c));
    child.stderr.on('data', (c: Buffer) => stderr.push(c));
    let timedOut = false;
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, spec.timeoutMs);
    const onAbort = () => kill();
    spec.signal.addEventListener('abort', onAbort, { once: true });
    child.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      spec.signal.removeEventListener('abort', onAbort);
      reject(e.code === 'ENOENT' && sandboxed ? new ConfigError(NO_BWRAP) : e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      spec.signal.removeEventListener('abort', onAbort);
      if (spec.signal.aborted) return reject(spec.signal.reason);
      resolve({ exitCode: code, signal, timedOut, stdout: stdout.text(), stderr: stderr.text() });
    });
  });
}

const NO_BWRAP =
  'commands of an agent with a workspace run in a bubblewrap sandbox, and bwrap is not installed: install the package ' +
  "bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or set workspace: { sandbox: 'none' } to run them unsandboxed";

/**
 * Checks once per process that the sandbox can start here: bwrap is installed and the kernel gives it
 * its namespaces. Throws a ConfigError saying what to do otherwise.
 */
export function checkSandbox(): Promise<void> {
  return (sandboxCheck ??= new Promise<void>((resolve, reject) => {
    const probe: Omit<CommandSpec, 'signal' | 'timeoutMs'> = {
      command: 'true',
      dir: '/',
      hidden: [],
      settings: { network: false, readOnlyPaths: [], maxBytes: TMP_BYTES } as unknown as WorkspaceSettings,
    };
    const args = [...bwrapArgs(probe, hostRoot(), process.getuid?.() ?? -1), '--', '/bin/true'];
    const child = spawn('bwrap', args, { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? SANDBOX_PATH } });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', (e: NodeJS.ErrnoException) => reject(e.code === 'ENOENT' ? new ConfigError(NO_BWRAP) : e));
    child.once('close', (code) => {
      if (code === 0) return resolve();
      const said = stderr.trim().split('\n')[0] || `exit code ${code}`;
      reject(
        new ConfigError(
          `the kernel refuses the namespaces the bubblewrap sandbox needs (${said}): allow unprivileged user namespaces ` +
            '(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 23.10 or later kernel.apparmor_restrict_unprivileged_userns=0 ' +
            "or an AppArmor profile for bwrap), run the worker where they are allowed, or set workspace: { sandbox: 'none' }",
        ),
      );
    });
  }).catch((e: unknown) => {
    sandboxCheck = null; // installed meanwhile: the next start tries again
    throw e;
  }));
}
let sandboxCheck: Promise<void> | null = null;
