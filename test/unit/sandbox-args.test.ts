import { describe, expect, it } from 'vitest';
import { workspaceSettings } from '../../src/workspace/options.ts';
import { bwrapArgs, CappedOutput, commandEnv, SANDBOX_PATH } from '../../src/workspace/sandbox.ts';

const root = [
  { name: 'usr', link: null },
  { name: 'bin', link: 'usr/bin' },
  { name: 'etc', link: null },
  { name: 'proc', link: null },
  { name: 'tmp', link: null },
  { name: 'run', link: null },
  { name: 'workspace', link: null },
];

describe('the bubblewrap command line', () => {
  const settings = workspaceSettings(true);
  const spec = { command: 'ls', dir: '/data/ws/run-1', settings, hidden: ['/tmp', '/'] };
  const args = bwrapArgs(spec, root, { PATH: SANDBOX_PATH, HOME: '/workspace' }, 1000);

  it('unshares every namespace, network included, and binds the host read-only, the workspace writable at /workspace', () => {
    expect(args.slice(0, 3)).toEqual(['--die-with-parent', '--new-session', '--unshare-all']);
    expect(args).not.toContain('--share-net');
    expect(args.join(' ')).toContain('--ro-bind /usr /usr --symlink usr/bin /bin --ro-bind /etc /etc');
    expect(args.join(' ')).toContain('--bind /data/ws/run-1 /workspace --chdir /workspace --clearenv');
    // proc, dev, tmp and run are new; the host's own /workspace is never bound.
    expect(args.filter((a, i) => a === '--ro-bind' && ['/proc', '/tmp', '/run', '/workspace'].includes(args[i + 1]!))).toEqual([]);
    expect(args.join(' ')).toContain('--proc /proc --dev /dev --tmpfs /tmp --tmpfs /run');
    expect(args.join(' ')).toContain('--setenv PATH /usr/local/sbin');
    expect(args).not.toContain('--cap-drop'); // not root: bwrap drops every capability itself
  });

  it('keeps the network only when the agent allows it, drops capabilities as root, and hides what exists of the given paths', () => {
    const open = bwrapArgs({ ...spec, settings: workspaceSettings({ network: true }) }, root, {}, 0);
    expect(open).toContain('--share-net');
    expect(open.join(' ')).toContain('--cap-drop ALL');
    expect(open.join(' ')).toContain('--tmpfs /tmp --tmpfs /run --tmpfs /tmp --tmpfs /');
    expect(bwrapArgs({ ...spec, hidden: ['/no/such/dir'] }, root, {}, 0)).not.toContain('/no/such/dir');
  });

  it('gives commands PATH, HOME, LANG and what the agent lists, nothing else of the worker', () => {
    const worker = { DATABASE_URL: 'postgres://secret', NPM_TOKEN: 't0k', LANG: 'de_DE.UTF-8' };
    expect(commandEnv(workspaceSettings({ env: ['NPM_TOKEN', 'UNSET'] }), '/workspace', worker)).toEqual({
      PATH: SANDBOX_PATH,
      HOME: '/workspace',
      LANG: 'de_DE.UTF-8',
      TMPDIR: '/tmp',
      NPM_TOKEN: 't0k',
    });
    expect(commandEnv(workspaceSettings({ env: { CI: '1' } }), '/w', {})).toMatchObject({ CI: '1', LANG: 'C.UTF-8' });
  });
});

describe("a command's output", () => {
  it('is kept whole within the limit', () => {
    const out = new CappedOutput(100);
    out.push(Buffer.from('hello '));
    out.push(Buffer.from('world'));
    expect(out.text()).toBe('hello world');
  });

  it('past the limit keeps its head and its tail, and says how much is left out', () => {
    const out = new CappedOutput(20);
    for (let i = 0; i < 100; i++) out.push(Buffer.from(`${i % 10}`));
    const text = out.text();
    expect(text.startsWith('0123456789\n[output cut: 80 of 100 bytes left out here;')).toBe(true);
    expect(text.endsWith('\n0123456789')).toBe(true);
  });
});
