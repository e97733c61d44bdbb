import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

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
 * Runs `fn` while holding a lock named after `lockDir`, shared by the processes of this machine.
 * On Linux the lock is a listening socket in the abstract namespace: the kernel releases it the
 * moment its owner dies, however it dies, so there is no stale lock to detect and no take-over race.
 * Elsewhere it is a directory created with mkdir that names its owner (see `withMkdirLock`).
 */
export async function withDirectoryLock<T>(lockDir: string, fn: () => Promise<T>, timeoutMs = 180_000): Promise<T> {
  if (process.platform !== 'linux') return withMkdirLock(lockDir, fn, timeoutMs);
  const real = path.join(fs.realpathSync(path.dirname(lockDir)), path.basename(lockDir));
  const name = `\0durable-agent-lock-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`;
  const until = Date.now() + timeoutMs;
  const server = net.createServer();
  for (;;) {
    const taken = await new Promise<boolean>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(false) : reject(e));
      server.once('error', onError);
      server.listen(name, () => {
        server.off('error', onError);
        resolve(true);
      });
    });
    if (taken) break;
    if (Date.now() > until) throw new Error(`timed out waiting for the lock on ${lockDir} (held by a live process)`);
    await sleep(50);
  }
  server.unref();
  try {
    return await fn();
  } finally {
    await new Promise((r) => server.close(r));
  }
}

/**
 * The lock as a directory created atomically with mkdir, naming its owner (pid and start time); a
 * lock whose owner died is taken over. Two waiters can both take over the same stale lock, so it is
 * only the fallback for systems without abstract sockets.
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
      if (Date.now() > until) throw new Error(`timed out waiting for ${lockDir} (held by a live process)`);
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
