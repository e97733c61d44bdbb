/**
 * Paths the model and people give: relative to the workspace, or absolute under `/workspace` (where
 * commands see it). Anything that could leave the workspace is refused before a byte is read or
 * written: `..`, another absolute path, a NUL, and a symlink whose target lies outside.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** Where the workspace is inside the sandbox (and the root of absolute paths the file tools take). */
export const SANDBOX_WORKSPACE = '/workspace';

/** A path that would leave the workspace, or is not one: the call's is_error result says why. */
export class PathRefused extends Error {}

/**
 * `input` as a workspace path: `/`-separated, no `.` or empty components, '' for the root. Throws
 * PathRefused for `..`, an absolute path outside `/workspace`, or a NUL.
 */
export function workspacePath(input: string): string {
  if (input.includes('\0')) throw new PathRefused('a path cannot hold a NUL character');
  // Not trimmed: "notes.txt " and "Icon\r" are names a command can make, and must be kept as they are.
  let p = input;
  if (p.startsWith('/')) {
    if (p !== SANDBOX_WORKSPACE && !p.startsWith(`${SANDBOX_WORKSPACE}/`))
      throw new PathRefused(`${input} is outside the workspace: give a path relative to it, or under ${SANDBOX_WORKSPACE}/`);
    p = p.slice(SANDBOX_WORKSPACE.length);
  }
  const parts = p.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..')) throw new PathRefused(`${input} uses "..": give the path inside the workspace without it`);
  return parts.join('/');
}

const inside = (root: string, p: string) => p === root || p.startsWith(root + path.sep);

/**
 * The real path on this worker of workspace path `rel` under `root`, every symlink on the way
 * resolved and the result checked to stay in the workspace. A path that does not exist (yet) is
 * resolved through its deepest existing ancestor; a symlink that points nowhere is refused, since
 * writing through it would create its target wherever that is.
 */
export async function resolveInside(root: string, rel: string): Promise<string> {
  const realRoot = await fs.realpath(root);
  const wanted = path.join(realRoot, rel);
  let existing = wanted;
  const rest: string[] = [];
  for (;;) {
    try {
      const real = await fs.realpath(existing);
      const resolved = path.join(real, ...rest);
      if (!inside(realRoot, resolved)) throw new PathRefused(`${rel} leads outside the workspace (through a symlink)`);
      return resolved;
    } catch (e) {
      if (e instanceof PathRefused) throw e;
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw e;
      const stat = await fs.lstat(existing).catch(() => null);
      if (stat?.isSymbolicLink()) throw new PathRefused(`${rel} is (or goes through) a symlink that points nowhere`);
      if (existing === realRoot) throw e;
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
}
