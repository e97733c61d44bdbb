/**
 * What a save finds and what a rebuild makes, on real directories: only changed files are read and
 * saved, symlinks are kept as symlinks, a rebuild is exact and checked, an undo puts back what a call
 * changed and nothing else.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WorkspaceMismatchError } from '../../src/domain/errors.ts';
import type { FileEntry } from '../../src/ports/workspace.ts';
import { excludeMatcher } from '../../src/workspace/exclude.ts';
import { rebuild, undo } from '../../src/workspace/rebuild.ts';
import { applied, type KnownEntry, RACY_MS, scan, sha256Hex } from '../../src/workspace/scan.ts';

/** The files a scan reads, in order; and stats lstat answers instead of the file's own (a coarse clock). */
const { reads, frozen } = vi.hoisted(() => ({ reads: [] as string[], frozen: new Map<string, unknown>() }));
vi.mock('node:fs/promises', async (original) => {
  const real = await original<typeof import('node:fs/promises')>();
  const readFile = ((p: string, ...rest: never[]) => {
    reads.push(String(p));
    return (real.readFile as (...a: unknown[]) => unknown)(p, ...rest);
  }) as typeof real.readFile;
  const lstat = ((p: string, ...rest: never[]) =>
    frozen.has(String(p))
      ? Promise.resolve(frozen.get(String(p)))
      : (real.lstat as (...a: unknown[]) => unknown)(p, ...rest)) as typeof real.lstat;
  return { ...real, readFile, lstat, default: { ...(real as unknown as { default: typeof real }).default, readFile, lstat } };
});

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'da-save-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const none = excludeMatcher([]);
/** Contents by digest, as the store would hold them. */
const saved = new Map<string, Buffer>();
const fetch = async (ids: readonly string[]) => new Map(ids.filter((i) => saved.has(i)).map((i) => [i, saved.get(i)!]));
/** A scan a while after the files were written: nothing is racy. */
const later = () => Date.now() + 10 * RACY_MS;

/** A scan whose contents are saved, and the workspace as known after it (`next`). */
async function saveAll(dir: string, known: Map<string, KnownEntry>) {
  const found = await scan(dir, known, none, later());
  for (const b of found.blobs) saved.set(b.sha256, b.content);
  return { ...found, next: applied(new Map(known), found.updates) };
}
const scanned = async (...args: Parameters<typeof scan>) => {
  const found = await scan(...args);
  return { ...found, next: applied(new Map(args[1]), found.updates) };
};

describe('a save', () => {
  it('finds new, changed and deleted paths, reads only files whose stat changed, and keeps symlinks as symlinks', async () => {
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'src'));
    fs.writeFileSync(path.join(dir, 'src', 'a.txt'), 'a');
    fs.writeFileSync(path.join(dir, 'b.bin'), Buffer.from([0, 1, 2]));
    fs.symlinkSync('/etc/passwd', path.join(dir, 'link'));
    const first = await saveAll(dir, new Map());
    expect(first.changes.map((c) => [c.path, c.kind])).toEqual([
      ['b.bin', 'file'],
      ['link', 'symlink'],
      ['src', 'dir'],
      ['src/a.txt', 'file'],
    ]);
    expect(first.changes.find((c) => c.path === 'link')).toMatchObject({ target: '/etc/passwd', sha256: null });
    expect(first.blobs.map((b) => b.sha256).sort()).toEqual([sha256Hex(Buffer.from('a')), sha256Hex(Buffer.from([0, 1, 2]))].sort());
    expect([first.files, first.bytesAdded]).toEqual([4, 4]);

    // Nothing changed: nothing to save, and no file read again.
    reads.length = 0;
    const same = await scanned(dir, first.next, none, later());
    expect(same.changes).toEqual([]);
    expect(reads).toEqual([]);

    fs.writeFileSync(path.join(dir, 'src', 'a.txt'), 'A, longer');
    fs.rmSync(path.join(dir, 'link'));
    const next = await scanned(dir, same.next, none, later());
    expect(next.changes).toEqual([
      { path: 'link', kind: 'deleted' },
      { path: 'src/a.txt', kind: 'file', mode: 0o644, size: 9, sha256: sha256Hex(Buffer.from('A, longer')), target: null },
    ]);
    expect(reads).toEqual([path.join(dir, 'src', 'a.txt')]);
  });

  it('reads again a file written too close to the scan that saw it, so a same-size rewrite in the same tick is not missed', async () => {
    const dir = tmp();
    const f = path.join(dir, 'f');
    fs.writeFileSync(f, 'one');
    const soon = await scanned(dir, new Map(), none, Date.now());
    const later_ = await scanned(dir, new Map(), none, later());
    expect([soon.next.get('f')!.racy, later_.next.get('f')!.racy]).toEqual([true, false]);
    // A rewrite the clock's granularity hides: the same size, and lstat answers what it did before.
    frozen.set(f, await (await vi.importActual<typeof import('node:fs/promises')>('node:fs/promises')).lstat(f, { bigint: true }));
    fs.writeFileSync(f, 'two');
    try {
      expect((await scan(dir, soon.next, none, later())).changes).toMatchObject([{ path: 'f', sha256: sha256Hex(Buffer.from('two')) }]);
      // Seen long enough after its write, a file is trusted by its stat: this is what the rule guards.
      expect((await scan(dir, later_.next, none, later())).changes).toEqual([]);
    } finally {
      frozen.clear();
    }
  });

  it('looks only at the paths a call names, and their directories, when it names them', async () => {
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'a'));
    fs.writeFileSync(path.join(dir, 'a', 'x'), 'x');
    fs.writeFileSync(path.join(dir, 'b'), 'b');
    const first = await saveAll(dir, new Map());
    fs.writeFileSync(path.join(dir, 'b'), 'changed, but not named');
    fs.mkdirSync(path.join(dir, 'new', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'new', 'deep', 'f'), 'named');
    reads.length = 0;
    const only = await scanned(dir, first.next, none, later(), ['new/deep/f']);
    expect(only.changes.map((c) => [c.path, c.kind])).toEqual([
      ['new', 'dir'],
      ['new/deep', 'dir'],
      ['new/deep/f', 'file'],
    ]);
    expect(reads).toEqual([path.join(dir, 'new', 'deep', 'f')]);
    expect([...only.next.keys()].sort()).toEqual(['a', 'a/x', 'b', 'new', 'new/deep', 'new/deep/f']);
    expect([only.files, only.bytesAdded]).toEqual([6, 5]);
    // A named directory that is gone: it and everything under it.
    fs.rmSync(path.join(dir, 'a'), { recursive: true });
    expect((await scanned(dir, first.next, none, later(), ['a'])).changes).toEqual([
      { path: 'a', kind: 'deleted' },
      { path: 'a/x', kind: 'deleted' },
    ]);
  });

  it('leaves excluded paths out, and does not descend into an excluded directory', async () => {
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'node_modules', 'x'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'node_modules', 'x', 'i.js'), '');
    fs.writeFileSync(path.join(dir, 'debug.log'), '');
    fs.writeFileSync(path.join(dir, 'keep'), '');
    const found = await scanned(dir, new Map(), excludeMatcher(['node_modules/', '*.log']), later());
    expect(found.changes.map((c) => c.path)).toEqual(['keep']);
  });
});

describe('a rebuild', () => {
  it('makes the directory exactly as saved: contents byte for byte, modes, empty directories, symlinks not followed', async () => {
    const source = tmp();
    fs.mkdirSync(path.join(source, 'bin'));
    fs.mkdirSync(path.join(source, 'empty'));
    fs.writeFileSync(path.join(source, 'bin', 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    fs.writeFileSync(path.join(source, 'blob'), Buffer.from([0xff, 0x00, 0xfe]));
    fs.symlinkSync('../outside', path.join(source, 'up'));
    const found = await saveAll(source, new Map());
    const manifest = [...found.next.values()] as FileEntry[];

    const target = path.join(tmp(), 'ws');
    fs.mkdirSync(target);
    fs.writeFileSync(path.join(target, 'stale-from-a-crash'), 'x');
    const known = await rebuild(target, manifest, fetch);
    expect(fs.readdirSync(target).sort()).toEqual(['bin', 'blob', 'empty', 'up']);
    expect(fs.readFileSync(path.join(target, 'blob'))).toEqual(Buffer.from([0xff, 0x00, 0xfe]));
    expect(fs.statSync(path.join(target, 'bin', 'run.sh')).mode & 0o777).toBe(0o755);
    expect(fs.readlinkSync(path.join(target, 'up'))).toBe('../outside');
    expect(fs.existsSync(path.join(path.dirname(target), 'outside'))).toBe(false);
    // What it wrote needs no second read: the next scan finds nothing changed.
    expect((await scanned(target, known, none, Date.now())).changes).toEqual([]);
  });

  it('refuses a manifest with a missing or altered content, a path with .., or a path under something not a directory', async () => {
    const dir = tmp();
    const file = (p: string, content: string): FileEntry => ({
      path: p,
      kind: 'file',
      mode: 0o644,
      size: content.length,
      sha256: sha256Hex(Buffer.from(content)),
      target: null,
    });
    await expect(rebuild(dir, [file('a', 'never saved')], fetch)).rejects.toThrow(/saved content of a \(sha256 [0-9a-f]+\) is missing/);
    saved.set(sha256Hex(Buffer.from('real')), Buffer.from('tampered'));
    await expect(rebuild(dir, [file('a', 'real')], fetch)).rejects.toThrow(/does not match its sha256/);
    await expect(rebuild(dir, [file('../a', 'x')], fetch)).rejects.toThrow(WorkspaceMismatchError);
    const link: FileEntry = { path: 'l', kind: 'symlink', mode: 0, size: 4, sha256: null, target: '/etc' };
    await expect(rebuild(dir, [link, file('l/passwd', 'x')], fetch)).rejects.toThrow(/under l, which it does not hold as a directory/);
  });
});

describe('an undo', () => {
  it('puts back what a call changed, removes what it added, and leaves excluded paths alone', async () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'kept'), 'v1');
    fs.writeFileSync(path.join(dir, 'gone'), 'g');
    const before = await saveAll(dir, new Map());
    fs.writeFileSync(path.join(dir, 'kept'), 'v2');
    fs.rmSync(path.join(dir, 'gone'));
    fs.mkdirSync(path.join(dir, 'new', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'cache.log'), 'excluded');
    const excluded = excludeMatcher(['*.log']);
    const after = await scanned(dir, before.next, excluded, later());
    await undo(dir, before.next, after.changes, fetch);
    expect(fs.readdirSync(dir).sort()).toEqual(['cache.log', 'gone', 'kept']);
    expect(fs.readFileSync(path.join(dir, 'kept'), 'utf8')).toBe('v1');
    expect(fs.readFileSync(path.join(dir, 'gone'), 'utf8')).toBe('g');
  });

  it('never reaches through a symlink a command put where a directory was, and gives a directory only its mode back', async () => {
    const dir = tmp();
    const victim = tmp();
    fs.writeFileSync(path.join(victim, 'precious'), 'host file');
    fs.mkdirSync(path.join(dir, 'd'));
    fs.writeFileSync(path.join(dir, 'd', 'f'), 'saved');
    fs.mkdirSync(path.join(dir, 'src'), { mode: 0o755 });
    fs.writeFileSync(path.join(dir, 'src', 'main.c'), 'int main;');
    const before = await saveAll(dir, new Map());
    // The command: d moved away and replaced by a symlink to a host directory; src's mode changed.
    fs.renameSync(path.join(dir, 'd'), path.join(dir, 'd2'));
    fs.symlinkSync(victim, path.join(dir, 'd'));
    fs.writeFileSync(path.join(victim, 'f'), 'host file named like a saved one');
    fs.chmodSync(path.join(dir, 'src'), 0o700);
    const after = await scan(dir, before.next, none, later());
    await undo(dir, before.next, after.changes, fetch);
    expect(fs.readdirSync(victim).sort()).toEqual(['f', 'precious']);
    expect(fs.lstatSync(path.join(dir, 'd')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(dir, 'd', 'f'), 'utf8')).toBe('saved');
    expect(fs.readFileSync(path.join(dir, 'src', 'main.c'), 'utf8')).toBe('int main;');
    expect(fs.statSync(path.join(dir, 'src')).mode & 0o777).toBe(0o755);
    expect(fs.existsSync(path.join(dir, 'd2'))).toBe(false);
  });
});

describe('a save after a call that names its path', () => {
  it('looks at everything when the file has another hard link, whose content changed with it', async () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'a'), 'v1');
    fs.linkSync(path.join(dir, 'a'), path.join(dir, 'b'));
    const first = await saveAll(dir, new Map());
    fs.writeFileSync(path.join(dir, 'b'), 'v2');
    const found = await scan(dir, first.next, none, later(), ['b']);
    expect(found.changes.map((c) => c.path)).toEqual(['a', 'b']);
  });
});
