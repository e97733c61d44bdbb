import { describe, expect, it } from 'vitest';
import { excludeMatcher } from '../../src/workspace/exclude.ts';

describe('exclude patterns, as gitignore reads them', () => {
  const excluded = excludeMatcher(['node_modules/', '*.log', '/build', 'docs/**/*.tmp', '!keep.log', '# a comment', '']);

  it('matches a name at any depth unless a / anchors it, and a trailing / only directories', () => {
    expect(excluded('node_modules', true)).toBe(true);
    expect(excluded('pkg/node_modules', true)).toBe(true);
    expect(excluded('node_modules', false)).toBe(false); // a file of that name is not a directory
    expect(excluded('a.log', false)).toBe(true);
    expect(excluded('src/deep/b.log', false)).toBe(true);
    expect(excluded('build', true)).toBe(true);
    expect(excluded('src/build', true)).toBe(false); // anchored at the root
  });

  it('** spans directories, ! re-includes, and the last pattern that matches decides', () => {
    expect(excluded('docs/x.tmp', false)).toBe(true);
    expect(excluded('docs/a/b/x.tmp', false)).toBe(true);
    expect(excluded('src/x.tmp', false)).toBe(false);
    expect(excluded('keep.log', false)).toBe(false);
    expect(excluded('sub/keep.log', false)).toBe(false);
    expect(excludeMatcher(['!keep.log', '*.log'])('keep.log', false)).toBe(true);
  });

  it('* and ? stay within a component; special characters are literal', () => {
    const m = excludeMatcher(['a?c', 'x*z', 'v1.0', 'a\\*b']);
    expect(m('abc', false)).toBe(true);
    expect(m('a/c', false)).toBe(false);
    expect(m('xyyz', false)).toBe(true);
    expect(m('x/z', false)).toBe(false);
    expect(m('v1.0', false)).toBe(true);
    expect(m('v1x0', false)).toBe(false);
    expect(m('a*b', false)).toBe(true);
    expect(m('axb', false)).toBe(false);
  });

  it('takes classes as fnmatch does, keeps leading spaces, and drops trailing ones unless escaped', () => {
    const m = excludeMatcher(['*.py[co]', '[Bb]uild/', 'x[!0-9]', ' lead', 'trail  ', 'kept\\ ']);
    expect(m('a.pyc', false)).toBe(true);
    expect(m('a.pyo', false)).toBe(true);
    expect(m('a.py', false)).toBe(false);
    expect(m('Build', true)).toBe(true);
    expect(m('build', true)).toBe(true);
    expect(m('xa', false)).toBe(true);
    expect(m('x1', false)).toBe(false);
    expect(m(' lead', false)).toBe(true);
    expect(m('lead', false)).toBe(false);
    expect(m('trail', false)).toBe(true);
    expect(m('kept ', false)).toBe(true);
    expect(m('kept', false)).toBe(false);
  });

  it('excludes nothing without patterns', () => {
    expect(excludeMatcher([])('anything', true)).toBe(false);
  });
});
