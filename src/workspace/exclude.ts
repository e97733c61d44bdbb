/**
 * `exclude` patterns, as gitignore reads them: `*`, `?` and `[…]` within one path component, `**` across
 * components, a trailing `/` for directories only, a `/` at the start or in the middle anchors the
 * pattern at the workspace's root (otherwise it matches a name at any depth), `!` re-includes what an
 * earlier pattern excluded. The last pattern that matches decides. A directory excluded is not
 * descended into, so nothing under it can be re-included (as in git).
 */

interface Rule {
  regex: RegExp;
  dirOnly: boolean;
  negated: boolean;
}

/** Tells whether a workspace path (relative, `/`-separated) is left out of what is saved. */
export type Excluded = (path: string, isDir: boolean) => boolean;

const escapeChar = (c: string) => (/[.*?+^${}()|[\]\\]/.test(c) ? `\\${c}` : c);

/** The regular expression of a glob body (no leading `!`, no trailing `/`). */
function globSource(glob: string): string {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const before = i === 0 || glob[i - 1] === '/';
        const after = glob[i + 2] === undefined || glob[i + 2] === '/';
        if (before && after) {
          // `**/` any leading directories (none included), `/**` everything under, `/**/` zero or more between.
          if (glob[i + 2] === '/') {
            out += '(?:.*/)?';
            i += 2;
          } else {
            out += '.*';
            i += 1;
          }
          continue;
        }
      }
      out += '[^/]*';
    } else if (c === '?') out += '[^/]';
    else if (c === '[' && glob.indexOf(']', i + 2) > i) {
      // A class, as fnmatch reads it: [abc], [a-z], [!abc] (or [^abc]); never a /.
      const end = glob.indexOf(']', i + 2);
      let body = glob.slice(i + 1, end);
      const negated = body.startsWith('!') || body.startsWith('^');
      if (negated) body = body.slice(1);
      out += `[${negated ? '^/' : ''}${body.replace(/[\\\]^]/g, (x) => `\\${x}`)}]`;
      i = end;
    } else if (c === '\\' && i + 1 < glob.length) out += escapeChar(glob[++i]!);
    else out += escapeChar(c);
  }
  return out;
}

function rule(pattern: string): Rule | null {
  // Trailing spaces are dropped unless escaped ("\\ "); leading ones are part of the name, as in git.
  let p = pattern.replace(/(?<!\\) +$/, '');
  if (p === '' || p.startsWith('#')) return null;
  const negated = p.startsWith('!');
  if (negated) p = p.slice(1);
  const dirOnly = p.endsWith('/');
  if (dirOnly) p = p.replace(/\/+$/, '');
  if (p === '') return null;
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  const body = globSource(p);
  return { regex: new RegExp(`^${anchored ? '' : '(?:.*/)?'}${body}$`), dirOnly, negated };
}

/** The matcher of `patterns`; one that excludes nothing when there are none. */
export function excludeMatcher(patterns: readonly string[]): Excluded {
  const rules = patterns.map(rule).filter((r): r is Rule => r !== null);
  if (rules.length === 0) return () => false;
  return (path, isDir) => {
    let excluded = false;
    for (const r of rules) {
      if (r.negated !== excluded) continue; // only a rule that could change the verdict is tried
      if (r.dirOnly && !isDir) continue;
      if (r.regex.test(path)) excluded = !r.negated;
    }
    return excluded;
  };
}
