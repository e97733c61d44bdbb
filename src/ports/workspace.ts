/**
 * A run's workspace: the directory its tools work in, saved outside the worker as it changes so that any
 * worker can rebuild it. What is saved is a manifest per step: for each path the step changed, what is
 * there now (a file by the SHA-256 of its content, a directory, a symlink and its target) or that it was
 * deleted. The workspace as of step N is the latest entry of each path at or before N, through the runs
 * the run continues (a fork's source up to the fork's step, a follow-up's previous run whole).
 *
 * The engine sees a workspace through `Workspaces` (open one for a claimed run, save after a tool call);
 * the workspace code reaches the database through `WorkspaceStore`.
 */
import type { RunId } from '../domain/types.ts';

export type FileKind = 'file' | 'dir' | 'symlink';

/** One path of a workspace as saved: relative, `/`-separated, never `.`, `..` or empty components. */
export interface FileEntry {
  path: string;
  kind: FileKind;
  /** Permission bits (`0o755`); 0 for a symlink. */
  mode: number;
  /** Bytes of a file's content; 0 for a directory, the target's length for a symlink. */
  size: number;
  /** Hex SHA-256 of a file's content; null for a directory or a symlink. */
  sha256: string | null;
  /** Where a symlink points, as written; null otherwise. */
  target: string | null;
}

/** What one step changed: an entry as it is now, or a path that is gone. */
export type FileChange = FileEntry | { path: string; kind: 'deleted' };

/** A file's content to save, under its digest. */
export interface FileBlob {
  sha256: string;
  content: Buffer;
}

/** The part of the store a workspace uses. */
export interface WorkspaceStore {
  /** Saves contents (those already saved are only marked as in use again, so no sweep takes them now). */
  putBlobs(blobs: readonly FileBlob[]): Promise<void>;
  /** The workspace of `runId` as of step `atSeq` (its latest checkpointed step when null), sorted by path. */
  manifest(runId: RunId, atSeq?: number | null): Promise<FileEntry[]>;
  /** The contents of these digests; a digest with no saved content is missing from the map. */
  blobs(sha256s: readonly string[]): Promise<Map<string, Buffer>>;
}

/** A workspace step that could not be saved: over a limit. The call's changes are undone. */
export interface OverLimit {
  overLimit: string;
}

/** How a command runs (`ctx.exec`, the `bash` tool). */
export interface CommandOptions {
  /** @unit seconds — its time limit; default the workspace's `commandTimeoutSeconds`, at most its `maxCommandTimeoutSeconds`. */
  timeoutSeconds?: number;
}

/** What a command did. stdout and stderr are each cut to the workspace's `outputBytes`: head and tail, with a note between. */
export interface CommandResult {
  exitCode: number | null;
  /** The signal that ended it, when one did (SIGKILL after a timeout). */
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

/** The workspace of one claimed run, on the worker that drives it. */
export interface RunWorkspace {
  /** The directory on this worker. */
  readonly dir: string;
  /** Runs a command in the workspace (in its sandbox, unless the agent has `sandbox: 'none'`); `signal` stops it. */
  exec(command: string, options: CommandOptions, signal: AbortSignal): Promise<CommandResult>;
  /**
   * Saves what changed since the last save (contents first, in their own statements) and returns the
   * entries the tool step's checkpoint records with it; or, over a limit, undoes the changes and says why.
   * `call`, the tool call that just ran: a built-in tool that names what it changes has only that looked at.
   */
  save(call?: { name: string; input: unknown }): Promise<FileChange[] | OverLimit>;
  /** The checkpoint that recorded the last save's changes committed: they are what the saved workspace holds now. */
  saved(): void;
  /** The attempt is over: the directory is removed (everything in it was saved, or belongs to no step). */
  close(): Promise<void>;
}

/** The workspaces of one agent's runs on this worker. */
export interface Workspaces {
  /** Rebuilds the run's workspace as of its latest checkpointed step, checked against the manifest. */
  open(runId: RunId, signal: AbortSignal): Promise<RunWorkspace>;
}
