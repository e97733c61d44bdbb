import type { ChildProcess } from 'node:child_process';

/**
 * Kills every child in `children` with SIGKILL, empties the list and waits until each has exited: no
 * test's worker process may live on to claim the next test's run.
 */
export async function killAll(children: ChildProcess[]): Promise<void> {
  const exited = children.map((c) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r))));
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await Promise.all(exited);
}
