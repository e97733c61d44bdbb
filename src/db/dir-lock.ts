import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

function ownerAlive(lockDir: string): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(lockDir, 'owner'), 'utf8'));
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but is not ours. A missing owner file: the lock is being taken right now.
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'EPERM' || code === 'ENOENT' && fs.existsSync(lockDir) && Date.now() - fs.statSync(lockDir).mtimeMs < 5000;
  }
}

/**
 * Runs `fn` while holding a lock shared by the processes of this machine: a directory created
 * atomically with mkdir, naming its owner's pid. A lock whose owner died (SIGKILL) is taken over.
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
      if (Date.now() > until) throw new Error(`timed out waiting for ${lockDir}`);
      await sleep(100);
    }
  }
  fs.writeFileSync(path.join(lockDir, 'owner'), String(process.pid));
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}
