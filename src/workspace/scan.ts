/**
 * What changed in a workspace since it was last saved, found without reading what did not change.
 *
 * Every path is looked at with lstat (never followed: a symlink is saved as a symlink). A file whose
 * inode, size, modification and change times and mode are what they were at the last save is unchanged;
 * only the others are read and hashed, and of those only the ones whose content differs are saved. A
 * file changed within the timestamps' granularity just after a save could keep all of those, so a
 * file modified within RACY_MS before the scan that saw it is read again at the next one (git's "racy
 * clean" rule). The change time is part of the key too: a command cannot set it back, so `touch -d`
 * after a write does not hide the write.
 *
 * Sockets, pipes and devices are not saved; nor is anything `excluded`.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { FileBlob, FileChange, FileEntry, FileKind } from '../ports/workspace.ts';
import type { Excluded } from './exclude.ts';

/**
 * @unit bytes — the largest file a workspace keeps (a content is one value of one statement's
 * parameter; larger ones are refused, not read).
 */
export const MAX_FILE_BYTES = 128 * 1024 * 1024;

/** @unit milliseconds — how recent a change must be for its file to be read again at the next scan. */
export const RACY_MS = 1000;

/** A path as a scan saw it. */
export interface Observed {
  kind: FileKind;
  mode: number;
  size: number;
  target: string | null;
  /** Changes whenever the path's content or mode may have: inode, size, mtime, ctime, mode. */
  key: string;
  /** @unit milliseconds since the epoch — its modification time. */
  mtimeMs: number;
  /** A file with other hard links: a write through one of them changes the others. */
  linked: boolean;
}

/** A path as the saved workspace holds it, with what the scan that saved it saw. */
export interface KnownEntry extends FileEntry {
  key: string;
  /** Changed too close to the scan that saw it to trust the key: read again next time. */
  racy: boolean;
}

const kindOf = (s: import('node:fs').BigIntStats): FileKind | null =>
  s.isFile() ? 'file' : s.isDirectory() ? 'dir' : s.isSymbolicLink() ? 'symlink' : null;

/** Gone meanwhile: not there. Any other failure (EACCES, EMFILE, EIO) fails the save, never reads as "deleted". */
const unlessGone = (e: unknown): null => {
  if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
  throw e;
};

/** The most lstat, readlink, readdir and reads one scan has going at once (file descriptors are finite). */
const AT_ONCE = 32;
let running = 0;
const waiting: (() => void)[] = [];
async function bounded<T>(io: () => Promise<T>): Promise<T> {
  if (running >= AT_ONCE) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await io();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** `p` as lstat sees it (a symlink's target read), or null when it is not there or not saved (a socket, a pipe). */
async function look(abs: string): Promise<Observed | null> {
  const s = await bounded(() => fs.lstat(abs, { bigint: true })).catch(unlessGone);
  const kind = s && kindOf(s);
  if (!s || !kind) return null;
  const target = kind === 'symlink' ? await bounded(() => fs.readlink(abs)).catch(unlessGone) : null;
  if (kind === 'symlink' && target === null) return null;
  return {
    kind,
    mode: kind === 'symlink' ? 0 : Number(s.mode & 0o777n),
    size: kind === 'file' ? Number(s.size) : kind === 'symlink' ? Buffer.byteLength(target!) : 0,
    target,
    key: `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}:${s.mode}`,
    mtimeMs: Number(s.mtimeNs / 1_000_000n),
    linked: kind === 'file' && s.nlink > 1n,
  };
}

/** Every saved path under directory `rel` of the workspace at `root` (all of it for ''), into `found`. */
async function walk(root: string, rel: string, excluded: Excluded, found: Map<string, Observed>): Promise<void> {
  const entries =
    (await bounded(() => fs.readdir(rel === '' ? root : path.join(root, rel), { withFileTypes: true })).catch(unlessGone)) ?? [];
  await Promise.all(
    entries.map(async (d) => {
      const p = rel === '' ? d.name : `${rel}/${d.name}`;
      if (excluded(p, d.isDirectory())) return;
      const o = await look(path.join(root, p));
      if (!o) return;
      found.set(p, o);
      if (o.kind === 'dir') await walk(root, p, excluded, found);
    }),
  );
}

/** Every path of the workspace under `root` that is saved, as lstat sees it. */
export async function observe(root: string, excluded: Excluded): Promise<Map<string, Observed>> {
  const found = new Map<string, Observed>();
  await walk(root, '', excluded, found);
  return found;
}

/**
 * Only the paths in `paths` (with what is under them) and their directories, as lstat sees them: the
 * part of the workspace a call that names its paths (write_file, edit_file) can have changed.
 */
async function observeOnly(root: string, paths: readonly string[], excluded: Excluded): Promise<Map<string, Observed>> {
  const found = new Map<string, Observed>();
  for (const p of paths) {
    const parts = p.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const q = parts.slice(0, i).join('/');
      if (found.has(q)) continue;
      const o = await look(path.join(root, q));
      if (!o || excluded(q, o.kind === 'dir')) break;
      found.set(q, o);
      if (i === parts.length && o.kind === 'dir') await walk(root, q, excluded, found);
    }
  }
  return found;
}

export const sha256Hex = (content: Buffer) => createHash('sha256').update(content).digest('hex');

/** What a scan found: the changes to record, the contents to save first, and how `known` changes with them. */
export interface ScanResult {
  changes: FileChange[];
  blobs: FileBlob[];
  /** Entries of `known` to set (null: to delete) once the changes are saved: see `applied`. */
  updates: Map<string, KnownEntry | null>;
  /** Files, directories and symlinks now. */
  files: number;
  /** How many more bytes of file content the workspace holds now than `known` does (less: negative). */
  bytesAdded: number;
  /** A changed file larger than MAX_FILE_BYTES (not read), when there is one. */
  tooLarge: { path: string; size: number } | null;
}

/** `known` with a scan's updates applied, in place. */
export function applied(known: Map<string, KnownEntry>, updates: ReadonlyMap<string, KnownEntry | null>): Map<string, KnownEntry> {
  for (const [p, e] of updates) {
    if (e) known.set(p, e);
    else known.delete(p);
  }
  return known;
}

/** The paths of `known` that are `p` or under it. */
function under(known: ReadonlyMap<string, KnownEntry>, p: string): string[] {
  if (known.get(p)?.kind !== 'dir') return known.has(p) ? [p] : [];
  const prefix = `${p}/`;
  return [p, ...[...known.keys()].filter((k) => k.startsWith(prefix))];
}

/**
 * Compares the workspace under `root` with `known` (what is saved), reading only the files whose stat
 * changed. With `only`, just those paths (and what is under them, and their directories) are looked at:
 * the rest is taken as it was, and the scan's cost does not grow with it. `now` is the scan's start (ms
 * since the epoch).
 */
export async function scan(
  root: string,
  known: ReadonlyMap<string, KnownEntry>,
  excluded: Excluded,
  now: number,
  only?: readonly string[],
): Promise<ScanResult> {
  const observed = only ? await observeOnly(root, only, excluded) : await observe(root, excluded);
  // A write through a hard link changed its other names too, wherever they are: look at everything.
  if (only && [...observed.values()].some((o) => o.linked)) return scan(root, known, excluded, now);
  const changes: FileChange[] = [];
  const blobs = new Map<string, Buffer>();
  const updates = new Map<string, KnownEntry | null>();
  let tooLarge: ScanResult['tooLarge'] = null;
  await Promise.all(
    [...observed].map(async ([p, o]) => {
      const before = known.get(p);
      const racy = now - o.mtimeMs < RACY_MS;
      if (before && before.kind === o.kind && before.key === o.key && !before.racy) return;
      let sha256: string | null = null;
      if (o.kind === 'file' && o.size > MAX_FILE_BYTES) {
        tooLarge = { path: p, size: o.size };
        return;
      }
      if (o.kind === 'file') {
        const content = await bounded(() => fs.readFile(path.join(root, p))).catch(unlessGone);
        if (content === null) return; // removed while the scan ran: it is not there
        sha256 = sha256Hex(content);
        if (before?.sha256 !== sha256) blobs.set(sha256, content);
      }
      const entry: KnownEntry = { path: p, kind: o.kind, mode: o.mode, size: o.size, sha256, target: o.target, key: o.key, racy };
      updates.set(p, entry);
      if (!before || !sameEntry(before, entry)) changes.push(fileEntry(entry));
    }),
  );
  // What the scan speaks for and did not see is gone: everything, or what is at and under the named paths.
  const gone = (only ? only.flatMap((p) => under(known, p)) : known.keys()) as Iterable<string>;
  for (const p of gone) {
    if (observed.has(p) || updates.has(p)) continue;
    changes.push({ path: p, kind: 'deleted' });
    updates.set(p, null);
  }
  changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const fileBytes = (e: FileEntry | null | undefined) => (e?.kind === 'file' ? e.size : 0);
  let bytesAdded = 0;
  let files = known.size;
  for (const [p, e] of updates) {
    bytesAdded += fileBytes(e) - fileBytes(known.get(p));
    files += (e ? 1 : 0) - (known.has(p) ? 1 : 0);
  }
  return { changes, blobs: [...blobs].map(([sha256, content]) => ({ sha256, content })), updates, files, bytesAdded, tooLarge };
}

/** Whether two entries of one path say the same: kind, mode, content or target. */
export const sameEntry = (a: FileEntry, b: FileEntry) =>
  a.kind === b.kind && a.mode === b.mode && a.size === b.size && a.sha256 === b.sha256 && a.target === b.target;

/** The saved form of an entry (without what a scan saw). */
export const fileEntry = (e: FileEntry): FileEntry => ({
  path: e.path,
  kind: e.kind,
  mode: e.mode,
  size: e.size,
  sha256: e.sha256,
  target: e.target,
});
