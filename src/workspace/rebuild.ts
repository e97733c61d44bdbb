/**
 * Makes a workspace directory hold exactly what a manifest says, from the saved contents, and checks it
 * before any step runs on it: a content missing or not matching its digest, or a manifest the rebuild
 * refuses (a path with `..`, a path under something that is not a directory), stops the run with the
 * cause. A model handed half a tree would go on working on it.
 *
 * The directory is made anew. Directories first, then files (created exclusively: nothing is ever
 * written through an existing path), symlinks last, so no symlink exists while anything is written and
 * none is ever followed; directory modes are set at the end, deepest first, so a read-only directory
 * still receives its files.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { WorkspaceMismatchError } from '../domain/errors.ts';
import type { FileChange, FileEntry } from '../ports/workspace.ts';
import { workspacePath } from './paths.ts';
import { type KnownEntry, observe, RACY_MS, sameEntry, sha256Hex } from './scan.ts';

/** Fetches saved contents by digest (a missing one is absent from the map). */
export type FetchBlobs = (sha256s: readonly string[]) => Promise<Map<string, Buffer>>;

/** @unit bytes — contents fetched per round trip. */
const FETCH_BYTES = 32 * 1024 * 1024;

function checkManifest(entries: readonly FileEntry[]): void {
  const kinds = new Map(entries.map((e) => [e.path, e.kind]));
  if (kinds.size !== entries.length) throw new WorkspaceMismatchError('the saved workspace names a path twice');
  for (const e of entries) {
    let valid: boolean;
    try {
      valid = e.path !== '' && workspacePath(e.path) === e.path;
    } catch {
      valid = false;
    }
    if (!valid) throw new WorkspaceMismatchError(`the saved workspace holds a path the rebuild refuses: ${JSON.stringify(e.path)}`);
    const parent = e.path.includes('/') ? e.path.slice(0, e.path.lastIndexOf('/')) : '';
    if (parent !== '' && kinds.get(parent) !== 'dir')
      throw new WorkspaceMismatchError(`the saved workspace holds ${e.path} under ${parent}, which it does not hold as a directory`);
    if (e.kind === 'file' && !e.sha256) throw new WorkspaceMismatchError(`the saved workspace holds ${e.path} without its content`);
  }
}

/** Chunks of digests whose contents add up to about FETCH_BYTES each. */
function fetchChunks(files: readonly FileEntry[]): string[][] {
  const chunks: string[][] = [];
  const seen = new Set<string>();
  let chunk: string[] = [];
  let bytes = 0;
  for (const f of files) {
    if (seen.has(f.sha256!)) continue;
    seen.add(f.sha256!);
    if (chunk.length && bytes + f.size > FETCH_BYTES) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(f.sha256!);
    bytes += f.size;
  }
  if (chunk.length) chunks.push(chunk);
  return chunks;
}

/**
 * Makes `dir` hold exactly the manifest's entries, and returns them as known entries of the fresh
 * directory. Throws WorkspaceMismatchError when it cannot.
 */
export async function rebuild(
  dir: string,
  manifest: readonly FileEntry[],
  fetch: FetchBlobs,
  signal?: AbortSignal,
): Promise<Map<string, KnownEntry>> {
  // Parents before children, whatever order (or collation) the manifest came in.
  const entries = [...manifest].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  checkManifest(entries);
  await removeTree(dir);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const at = (p: string) => path.join(dir, p);
  const dirs = entries.filter((e) => e.kind === 'dir');
  for (const d of dirs) await fs.mkdir(at(d.path), { mode: 0o700 });
  const files = entries.filter((e) => e.kind === 'file');
  const byDigest = new Map<string, FileEntry[]>();
  for (const f of files) byDigest.set(f.sha256!, [...(byDigest.get(f.sha256!) ?? []), f]);
  for (const chunk of fetchChunks(files)) {
    signal?.throwIfAborted();
    const contents = await fetch(chunk);
    for (const sha of chunk) {
      const content = contents.get(sha);
      const named = byDigest.get(sha)!;
      if (!content) throw new WorkspaceMismatchError(`the saved content of ${named[0]!.path} (sha256 ${sha}) is missing`);
      if (sha256Hex(content) !== sha)
        throw new WorkspaceMismatchError(`the saved content of ${named[0]!.path} does not match its sha256 ${sha}`);
      for (const f of named) {
        await fs.writeFile(at(f.path), content, { flag: 'wx', mode: f.mode });
        await fs.chmod(at(f.path), f.mode); // the umask narrowed the mode writeFile gave it
      }
    }
  }
  for (const l of entries) if (l.kind === 'symlink') await fs.symlink(l.target!, at(l.path));
  // Modification times are not saved. Set in the past, any write from now on changes them, so what
  // the rebuild wrote needs no second read to be trusted (see RACY_MS).
  const past = new Date(Date.now() - 10 * RACY_MS);
  for (const e of entries) await fs.lutimes(at(e.path), past, past);
  for (const d of [...dirs].reverse()) await fs.chmod(at(d.path), d.mode);
  return check(dir, entries);
}

/** Throws unless every directory on the way from `dir` to `rel` is a directory, not a symlink to one. */
async function assertRealParents(dir: string, rel: string): Promise<void> {
  const parts = rel.split('/').slice(0, -1);
  for (let i = 1; i <= parts.length; i++) {
    const s = await fs.lstat(path.join(dir, ...parts.slice(0, i))).catch(() => null);
    if (s && !s.isDirectory())
      throw new WorkspaceMismatchError(`cannot undo ${rel}: ${parts.slice(0, i).join('/')} is no longer a directory`);
  }
}

/**
 * Puts back what `changes` changed in `dir`, from `known` (what is saved): a path added is removed, one
 * changed or deleted is written again, a directory whose mode changed is given its mode back (what is
 * in it stays). Nothing else is touched (excluded paths stay as they are). Paths are taken shallow
 * first, so a directory a command replaced by a symlink is removed (the link, not what it points to)
 * before anything under it is touched, and nothing is ever reached through a symlink.
 */
export async function undo(
  dir: string,
  known: ReadonlyMap<string, KnownEntry>,
  changes: readonly FileChange[],
  fetch: FetchBlobs,
): Promise<void> {
  const at = (p: string) => path.join(dir, p);
  const ordered = [...changes].sort((a, b) => (a.path < b.path ? -1 : 1));
  const back: KnownEntry[] = [];
  for (const c of ordered) {
    const before = known.get(c.path);
    await assertRealParents(dir, c.path);
    const now = await fs.lstat(at(c.path)).catch(() => null);
    if (before?.kind === 'dir' && now?.isDirectory()) {
      await fs.chmod(at(c.path), before.mode);
      continue;
    }
    if (now) await removeTree(at(c.path)); // a symlink is removed itself, never followed
    if (before) back.push(before);
  }
  const files = back.filter((e) => e.kind === 'file');
  const contents = files.length ? await fetch([...new Set(files.map((f) => f.sha256!))]) : new Map<string, Buffer>();
  for (const e of back) {
    await assertRealParents(dir, e.path);
    if (e.kind === 'dir') await fs.mkdir(at(e.path), { mode: e.mode });
    else if (e.kind === 'symlink') await fs.symlink(e.target!, at(e.path));
    else {
      const content = contents.get(e.sha256!);
      if (!content) throw new WorkspaceMismatchError(`the saved content of ${e.path} (sha256 ${e.sha256}) is missing`);
      await fs.writeFile(at(e.path), content, { flag: 'wx', mode: e.mode });
    }
    if (e.kind !== 'symlink') await fs.chmod(at(e.path), e.mode);
  }
}

/** Removes `dir` and everything in it, also what a command made read-only. */
export async function removeTree(dir: string): Promise<void> {
  try {
    await fs.rm(dir, { recursive: true, force: true });
  } catch {
    const writable = async (d: string): Promise<void> => {
      await fs.chmod(d, 0o700).catch(() => {});
      const entries = await fs.readdir(d, { withFileTypes: true }).catch(() => []);
      await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => writable(path.join(d, e.name))));
    };
    await writable(dir);
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** The rebuilt directory, looked at again: exactly the manifest's paths, each as the manifest says. */
async function check(dir: string, entries: readonly FileEntry[]): Promise<Map<string, KnownEntry>> {
  const observed = await observe(dir, () => false);
  const now = Date.now();
  const known = new Map<string, KnownEntry>();
  for (const e of entries) {
    const o = observed.get(e.path);
    const seen: FileEntry = o ? { ...e, kind: o.kind, mode: o.mode, size: o.size, target: o.target } : e;
    if (!o || !sameEntry(seen, e)) throw new WorkspaceMismatchError(`the rebuilt workspace does not hold ${e.path} as saved`);
    known.set(e.path, { ...e, key: o.key, racy: now - o.mtimeMs < RACY_MS });
  }
  if (observed.size !== entries.length) {
    const extra = [...observed.keys()].find((p) => !known.has(p));
    throw new WorkspaceMismatchError(`the rebuilt workspace holds ${extra}, which the saved one does not`);
  }
  return known;
}
