import fs from 'node:fs';
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
 * Runs `fn` while holding a lock shared by the processes of this machine: a directory created
 * atomically with mkdir, naming its owner (pid and start time). A lock whose owner died (SIGKILL) is
 * taken over.
 */
export async function withDirectoryLock<T>(lockDir: string, fn: () => Promise<T>, timeoutMs = 180_000): Promise<T> {
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
