/**
 * The workspaces of one agent's runs on this worker (ports/workspace.ts): a directory per run under
 * WORKSPACE_ROOT, rebuilt from what was saved when the run is claimed, saved after each tool call that
 * changed it, removed when the attempt ends (what it held is saved, or belongs to no checkpointed step).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { RunId } from '../domain/types.ts';
import type {
  CommandOptions,
  CommandResult,
  FileBlob,
  FileChange,
  OverLimit,
  RunWorkspace,
  Workspaces,
  WorkspaceStore,
} from '../ports/workspace.ts';
import { pathsChangedBy } from './builtin-tools.ts';
import { excludeMatcher, type Excluded } from './exclude.ts';
import { processAlive } from '../util/process-alive.ts';
import type { WorkspaceSettings } from './options.ts';
import { rebuild, removeTree, undo } from './rebuild.ts';
import { runCommand } from './sandbox.ts';
import { applied, type KnownEntry, MAX_FILE_BYTES, scan, type ScanResult } from './scan.ts';

export interface WorkspacesOptions {
  store: WorkspaceStore;
  /** WORKSPACE_ROOT: where this worker keeps the workspaces of the runs it drives. */
  root: string;
  settings: WorkspaceSettings;
  /** Directories of this worker commands must not see besides `root` (the embedded database's data). */
  hidden?: readonly string[];
}

/** @unit bytes — contents saved per statement. */
const SAVE_BYTES = 16 * 1024 * 1024;

function saveChunks(blobs: readonly FileBlob[]): FileBlob[][] {
  const chunks: FileBlob[][] = [];
  let chunk: FileBlob[] = [];
  let bytes = 0;
  for (const b of blobs) {
    if (chunk.length && bytes + b.content.length > SAVE_BYTES) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(b);
    bytes += b.content.length;
  }
  if (chunk.length) chunks.push(chunk);
  return chunks;
}

const plural = (n: number, one: string) => `${n.toLocaleString('en-US')} ${one}${n === 1 ? '' : 's'}`;

/** This process's folder under WORKSPACE_ROOT: `<pid>-<random>`, so that processes sharing the root never meet. */
const PROCESS_DIR = /^(\d+)-[0-9a-f]{8}$/;

export class AgentWorkspaces implements Workspaces {
  private readonly excluded: Excluded;
  private base: Promise<string> | null = null;
  private opened = 0;

  constructor(private readonly opts: WorkspacesOptions) {
    this.excluded = excludeMatcher(opts.settings.exclude);
  }

  /**
   * Each attempt works in a directory of its own (`<root>/<pid>-<random>/<run id>-<n>`): an attempt
   * ending late (its lease lost, or handed back) removes its own copy, never the next attempt's. The
   * folders of processes that are gone (killed with SIGKILL) are removed when this one first opens one.
   */
  private processDir(): Promise<string> {
    return (this.base ??= (async () => {
      const { root } = this.opts;
      await fs.mkdir(root, { recursive: true, mode: 0o700 });
      for (const name of await fs.readdir(root)) {
        const pid = PROCESS_DIR.exec(name)?.[1];
        if (pid && Number(pid) !== process.pid && !processAlive(Number(pid))) await removeTree(path.join(root, name)).catch(() => {});
      }
      const dir = path.join(root, `${process.pid}-${randomBytes(4).toString('hex')}`);
      await fs.mkdir(dir, { mode: 0o700 });
      return dir;
    })());
  }

  async open(runId: RunId, signal: AbortSignal): Promise<RunWorkspace> {
    const dir = path.join(await this.processDir(), `${runId}-${++this.opened}`);
    const { store } = this.opts;
    try {
      const known = await rebuild(dir, await store.manifest(runId), (ids) => store.blobs(ids), signal);
      return new OpenWorkspace(dir, known, this.opts, this.excluded);
    } catch (e) {
      await removeTree(dir).catch(() => {});
      throw e;
    }
  }
}

class OpenWorkspace implements RunWorkspace {
  /** What a save found, until its checkpoint commits. */
  private pending: ScanResult | null = null;
  /** Bytes of file content the saved workspace holds. */
  private bytes = 0;

  constructor(
    readonly dir: string,
    /** The workspace as saved: as of the run's latest checkpointed step. */
    private known: Map<string, KnownEntry>,
    private readonly opts: WorkspacesOptions,
    private readonly excluded: Excluded,
  ) {
    for (const e of known.values()) if (e.kind === 'file') this.bytes += e.size;
  }

  exec(command: string, options: CommandOptions, signal: AbortSignal): Promise<CommandResult> {
    const { settings } = this.opts;
    const seconds = Math.min(options.timeoutSeconds ?? settings.commandTimeoutSeconds, settings.maxCommandTimeoutSeconds);
    return runCommand({
      command,
      dir: this.dir,
      settings,
      timeoutMs: seconds * 1000,
      signal,
      hidden: [this.opts.root, ...(this.opts.hidden ?? [])],
    });
  }

  async save(call?: { name: string; input: unknown }): Promise<FileChange[] | OverLimit> {
    const { settings, store } = this.opts;
    const only = call ? await pathsChangedBy(call, this.dir) : null;
    if (only?.length === 0) return [];
    const found = await scan(this.dir, this.known, this.excluded, Date.now(), only ?? undefined);
    const over = found.tooLarge
      ? `${found.tooLarge.path} holds ${plural(found.tooLarge.size, 'byte')}, over the largest file a workspace keeps (${plural(MAX_FILE_BYTES, 'byte')})`
      : found.files > settings.maxFiles
        ? `the workspace would hold ${plural(found.files, 'file')} (directories and symlinks counted), over its limit of ${plural(settings.maxFiles, 'file')} (workspace.maxFiles)`
        : this.bytes + found.bytesAdded > settings.maxBytes
          ? `the workspace would hold ${plural(this.bytes + found.bytesAdded, 'byte')}, over its limit of ${plural(settings.maxBytes, 'byte')} (workspace.maxBytes)`
          : null;
    if (over) {
      // The call's changes are undone: the files and the journal must say the same. What is put back
      // was written just now, so its stat is new: the next scan reads those paths again.
      const undone = found.tooLarge ? [...found.changes, { path: found.tooLarge.path, kind: 'deleted' as const }] : found.changes;
      await undo(this.dir, this.known, undone, (ids) => store.blobs(ids));
      for (const c of undone) {
        const before = this.known.get(c.path);
        if (before) this.known.set(c.path, { ...before, racy: true });
      }
      return { overLimit: `${over}; the changes of this call were undone` };
    }
    if (found.changes.length === 0) {
      applied(this.known, found.updates); // new stats of the same contents
      return [];
    }
    for (const chunk of saveChunks(found.blobs)) await store.putBlobs(chunk);
    this.pending = found;
    return found.changes;
  }

  saved(): void {
    if (!this.pending) return;
    applied(this.known, this.pending.updates);
    this.bytes += this.pending.bytesAdded;
    this.pending = null;
  }

  async close(): Promise<void> {
    await removeTree(this.dir).catch(() => {});
  }
}
