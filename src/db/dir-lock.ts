import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError } from '../domain/errors.ts';

/** When a process started (clock ticks since boot), so a pid reused after a restart is not taken for the owner. */
function startTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function ownerAlive(lockDir: string): boolean {
  let owner: string;
  try {
    owner = fs.readFileSync(path.join(lockDir, 'owner'), 'utf8');
  } catch {
    // No owner file yet: the lock is being taken right now, unless that was long ago (a crash in between).
    try {
      return Date.now() - fs.statSync(lockDir).mtimeMs < 5000;
    } catch {
      return false;
    }
  }
  const [pidText, started] = owner.split(' ');
  const pid = Number(pidText);
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false; // EPERM: it exists, and is not ours
  }
  const now = startTime(pid);
  return now === null || started === undefined || now === started;
}

/**
 * Runs `fn` while holding the lock `lockDir`, shared by the processes of this machine.
 *
 * On Linux the lock is a directory only its owner can enter (0700), so no other user can take it,
 * block it or fake a holder. Each process that wants the lock puts a listening Unix socket in it; the
 * kernel stops answering a socket the moment its process dies, however it dies, so a socket that
 * refuses a connection is a dead process's and is removed: there is no stale lock to guess about.
 * Who goes first is Lamport's bakery algorithm: while its socket is named `c-<id>` ("choosing") a
 * process takes a number one above every ticket it sees, then renames itself `t-<number>-<id>` and
 * waits until it sees no one choosing and no live ticket before its own. Two processes that choose
 * at once may draw the same number; the id breaks the tie.
 * Elsewhere it is a directory created with mkdir that names its owner (see `withMkdirLock`).
 */
export async function withDirectoryLock<T>(lockDir: string, fn: () => Promise<T>, timeoutMs = 180_000): Promise<T> {
  if (process.platform !== 'linux') return withMkdirLock(lockDir, fn, timeoutMs);
  const dir = privateDirectory(lockDir);
  // A socket path is limited to 107 bytes (and Node cuts a longer one short without a word), so the
  // sockets are reached through this process's handle on the directory: /proc/self/fd/<n>/<name>.
  const handle = fs.openSync(dir, 'r');
  const at = (name: string) => `/proc/self/fd/${handle}/${name}`;
  const id = `${process.pid}.${randomBytes(6).toString('hex')}`;
  const server = net.createServer((c) => c.destroy());
  let own: string[] = [];
  try {
    // Listening before it is visible: a `c-` socket that refuses connections would be taken for a dead one.
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(at(`.new-${id}`), resolve);
    });
    server.unref();
    fs.renameSync(path.join(dir, `.new-${id}`), path.join(dir, `c-${id}`));
    own = [`c-${id}`];
    const number = 1 + Math.max(0, ...entries(dir).map((e) => (e.ticket ? e.ticket.number : 0)));
    const ticket = `t-${number}-${id}`;
    fs.linkSync(path.join(dir, `c-${id}`), path.join(dir, ticket));
    own = [`c-${id}`, ticket];
    fs.unlinkSync(path.join(dir, `c-${id}`));
    own = [ticket];

    const until = Date.now() + timeoutMs;
    while (!(await noOneAhead(dir, at, { number, id }))) {
      if (Date.now() > until) throw new Error(`timed out waiting for the lock on ${lockDir} (held by a live process)`);
      await sleep(50);
    }
    return await fn();
  } finally {
    await new Promise((r) => server.close(r));
    for (const name of own) fs.rmSync(path.join(dir, name), { force: true });
    fs.closeSync(handle);
  }
}

interface Entry {
  name: string;
  id: string;
  /** Absent while the process is choosing its number. */
  ticket?: { number: number; id: string };
}

function entries(dir: string): Entry[] {
  return fs.readdirSync(dir).flatMap((name): Entry[] => {
    const choosing = /^c-(.+)$/.exec(name);
    if (choosing) return [{ name, id: choosing[1]! }];
    const ticket = /^t-(\d+)-(.+)$/.exec(name);
    return ticket ? [{ name, id: ticket[2]!, ticket: { number: Number(ticket[1]), id: ticket[2]! } }] : [];
  });
}

const ahead = (a: { number: number; id: string }, b: { number: number; id: string }) =>
  a.number < b.number || (a.number === b.number && a.id < b.id);

/**
 * True when one reading of the directory shows no other process choosing and no ticket before `mine`.
 * Anything else found (a live one to wait for, or a dead one, removed now) means: read again later.
 */
async function noOneAhead(dir: string, at: (name: string) => string, mine: { number: number; id: string }): Promise<boolean> {
  let clear = true;
  for (const e of entries(dir)) {
    if (e.id === mine.id || (e.ticket && !ahead(e.ticket, mine))) continue;
    clear = false;
    if ((await probe(at(e.name))) === 'dead') fs.rmSync(path.join(dir, e.name), { force: true });
  }
  return clear;
}

/** A socket answers while its process lives; ECONNREFUSED means no one listens on it any more. */
function probe(socketPath: string): Promise<'live' | 'dead' | 'gone'> {
  return new Promise((resolve) => {
    const c = net.connect(socketPath);
    c.once('connect', () => {
      c.destroy();
      resolve('live');
    });
    c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED' ? 'dead' : e.code === 'ENOENT' ? 'gone' : 'live'));
  });
}

/** The lock directory: created for this user only; one left open to others is closed, one of another user refused. */
function privateDirectory(dir: string): string {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== process.getuid!()) {
    throw new ConfigError(`${dir} is not a directory of this user; it only holds a lock between processes, remove it`);
  }
  if ((st.mode & 0o777) !== 0o700) fs.chmodSync(dir, 0o700);
  return dir;
}

/**
 * The lock as a directory created atomically with mkdir, naming its owner (pid and start time); a
 * lock whose owner died is taken over. Two waiters can both take over the same stale lock, so it is
 * only the fallback for systems where the socket lock above cannot be used.
 */
async function withMkdirLock<T>(lockDir: string, fn: () => Promise<T>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      if (!ownerAlive(lockDir)) {
        fs.rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > until) throw new Error(`timed out waiting for ${lockDir} (held by a live process)`, { cause: e });
      await sleep(50);
    }
  }
  fs.writeFileSync(path.join(lockDir, 'owner'), `${process.pid} ${startTime(process.pid) ?? ''}`.trim());
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}
