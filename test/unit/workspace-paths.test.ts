import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PathRefused, resolveInside, workspacePath } from '../../src/workspace/paths.ts';

describe('workspacePath', () => {
  it('takes relative paths and paths under /workspace, normalised', () => {
    expect(workspacePath('src/app.ts')).toBe('src/app.ts');
    expect(workspacePath('./src//app.ts/')).toBe('src/app.ts');
    expect(workspacePath('/workspace/src/app.ts')).toBe('src/app.ts');
    expect(workspacePath('/workspace')).toBe('');
    expect(workspacePath('.')).toBe('');
  });

  it('refuses .., other absolute paths and NUL, saying why', () => {
    expect(() => workspacePath('../etc/passwd')).toThrow(PathRefused);
    expect(() => workspacePath('a/../../b')).toThrow(/uses "\.\."/);
    expect(() => workspacePath('/etc/passwd')).toThrow(/outside the workspace/);
    expect(() => workspacePath('/workspacex/a')).toThrow(/outside the workspace/);
    expect(() => workspacePath('a\0b')).toThrow(/NUL/);
  });
});

describe('resolveInside', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'da-paths-'));
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'da-outside-'));
  fs.mkdirSync(path.join(root, 'src'));
  fs.writeFileSync(path.join(root, 'src', 'a.txt'), 'a');
  fs.symlinkSync('src', path.join(root, 'inner-link'));
  fs.symlinkSync(outside, path.join(root, 'out-link'));
  fs.symlinkSync(path.join(outside, 'missing'), path.join(root, 'dangling'));
  afterAll(() => {
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(outside, { recursive: true, force: true });
  });
  const real = fs.realpathSync(root);

  it('resolves symlinks that stay inside, and paths that do not exist yet', async () => {
    expect(await resolveInside(root, 'inner-link/a.txt')).toBe(path.join(real, 'src', 'a.txt'));
    expect(await resolveInside(root, 'new/dir/file.txt')).toBe(path.join(real, 'new', 'dir', 'file.txt'));
    expect(await resolveInside(root, '')).toBe(real);
  });

  it('refuses a symlink that leads outside, and one that points nowhere', async () => {
    await expect(resolveInside(root, 'out-link/x')).rejects.toThrow(/leads outside the workspace/);
    await expect(resolveInside(root, 'out-link')).rejects.toThrow(/leads outside the workspace/);
    await expect(resolveInside(root, 'dangling')).rejects.toThrow(/points nowhere/);
  });
});
