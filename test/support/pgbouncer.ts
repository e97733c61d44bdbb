/**
 * A real PgBouncer (the Debian package `pgbouncer`) in front of a test database, on a free port, in
 * transaction mode unless told otherwise: every database name is passed through to the server of
 * `url`, with trust authentication for its user (towards the server, the password of `url` if it has one).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './cli-process.ts';
import { waitFor } from './wait-for.ts';

/** Debian puts it in /usr/sbin, which a non-root PATH may lack. */
const PGBOUNCER = process.env.PGBOUNCER ?? (fs.existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : 'pgbouncer');

export interface PgBouncer {
  /** `url` with its host and port made PgBouncer's. */
  url: string;
  port: number;
  /** What PgBouncer logged. */
  log(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  mode?: 'transaction' | 'session';
  /** Server connections per database and user. Default 20. */
  poolSize?: number;
  maxClients?: number;
}

export async function startPgBouncer(url: string, opts: PgBouncerOptions = {}): Promise<PgBouncer> {
  let version: string;
  try {
    version = execFileSync(PGBOUNCER, ['--version'], { encoding: 'utf8' });
  } catch {
    throw new Error(`${PGBOUNCER} is missing: the pooler tests need Debian's pgbouncer. Install it with: apt-get install -y pgbouncer`);
  }
  const [major = 0, minor = 0] = (/PgBouncer (\d+)\.(\d+)/.exec(version) ?? []).slice(1).map(Number);
  // From 1.21 PgBouncer can carry statements prepared by name (on by default from 1.24): off, so the
  // tests see what a pooler that cannot does to them.
  const carriesPrepared = major > 1 || (major === 1 && minor >= 21);
  const server = new URL(url);
  const user = decodeURIComponent(server.username || 'postgres');
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgbouncer-'));
  fs.chmodSync(dir, 0o755); // it drops to nobody when started as root, and must still read its files
  const users = path.join(dir, 'users.txt');
  // PgBouncer logs in to the server with the password it finds here (clients reach it without one).
  fs.writeFileSync(users, `"${user}" "${decodeURIComponent(server.password)}"\n`);
  const ini = path.join(dir, 'pgbouncer.ini');
  fs.writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      `pool_mode = ${opts.mode ?? 'transaction'}`,
      `default_pool_size = ${opts.poolSize ?? 20}`,
      `max_client_conn = ${opts.maxClients ?? 2000}`,
      'ignore_startup_parameters = extra_float_digits,options',
      ...(carriesPrepared ? ['max_prepared_statements = 0'] : []),
      '',
    ].join('\n'),
  );
  for (const f of [users, ini]) fs.chmodSync(f, 0o644);
  const args = process.getuid?.() === 0 ? ['-u', 'nobody', ini] : [ini];
  const child: ChildProcess = spawn(PGBOUNCER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pooled = new URL(url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(port);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      'PgBouncer to accept connections',
      async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}: ${output}`);
        const c = new pg.Client({ connectionString: pooled.toString() });
        try {
          await c.connect();
          await c.query('SELECT 1');
          return true;
        } catch {
          return false;
        } finally {
          await c.end().catch(() => {});
        }
      },
      20_000,
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { url: pooled.toString(), port, log: () => output, stop };
}
