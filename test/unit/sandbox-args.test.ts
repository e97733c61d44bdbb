import { describe, expect, it } from 'vitest';
import { workspaceSettings } from '../../src/workspace/options.ts';
import { bwrapArgs, CappedOutput, commandEnv, SANDBOX_PATH } from '../../src/workspace/sandbox.ts';

const root = [
  { name: 'usr', link: null },
  { name: 'bin', link: 'usr/bin' },
  { name: 'etc', link: null },
  { name: 'home', link: null },
  { name: 'root', link: null },
  { name: 'var', link: null },
  { name: 'proc', link: null },
  { name: 'tmp', link: null },
  { name: 'run', link: null },
  { name: 'workspace', link: null },
];

describe('the bubblewrap command line', () => {
  const settings = workspaceSettings(true);
  const spec = { command: 'ls', dir: '/data/ws/run-1', settings, hidden: ['/tmp', '/'] };
  const args = bwrapArgs(spec, root, 1000);

  it('unshares every namespace, network included, binds the system directories read-only, the workspace writable at /workspace', () => {
    expect(args.slice(0, 3)).toEqual(['--die-with-parent', '--new-session', '--unshare-all']);
    expect(args).not.toContain('--share-net');
    expect(args.join(' ')).toContain('--ro-bind /usr /usr --symlink usr/bin /bin --ro-bind /etc /etc');
    expect(args.join(' ')).toContain('--bind /data/ws/run-1 /workspace --chdir /workspace');
    // Only the system's directories: no home, no /root, no /var; proc, dev, tmp and run are new.
    const sources = args.filter((_, i) => args[i - 1] === '--ro-bind');
    expect(sources.filter((p) => p !== '/dev/null')).toEqual(['/usr', '/etc']);
    // Its secrets are covered even so (this machine's /etc/shadow, when it has one).
    expect(args.join(' ')).toMatch(/--ro-bind \/dev\/null \/etc\/shadow|^(?!.*shadow)/);
    expect(args.join(' ')).toContain('--proc /proc --dev /dev --size 1073741824 --tmpfs /tmp --size 1048576 --tmpfs /run');
    // The environment is the process's, never on the command line.
    expect(args).not.toContain('--setenv');
    expect(args).not.toContain('--cap-drop'); // not root: bwrap drops every capability itself
  });

  it('keeps the network only when the agent allows it, drops capabilities as root, binds the paths it lists, hides what exists of the given ones', () => {
    const open = bwrapArgs({ ...spec, settings: workspaceSettings({ network: true, readOnlyPaths: ['/home/me/.nvm'] }) }, root, 0);
    expect(open).toContain('--share-net');
    expect(open.join(' ')).toContain('--cap-drop ALL');
    expect(open.join(' ')).toContain('--ro-bind-try /home/me/.nvm /home/me/.nvm');
    expect(open.join(' ')).toContain('--size 4096 --tmpfs /tmp --remount-ro /tmp');
    expect(bwrapArgs({ ...spec, hidden: ['/no/such/dir'] }, root, 0)).not.toContain('/no/such/dir');
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
