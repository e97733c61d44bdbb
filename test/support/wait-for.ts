/** Waiting on a condition, never on the clock alone. No database or engine imports: unit tests use it too. */

/** Asks `fn` every 25 ms until it answers something truthy, and returns that; fails after `timeoutMs`, naming `what`. */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * One turn of the event loop: every promise that was already settling has run its callbacks. What
 * has not happened by then cannot happen without I/O or a timer, so code that only chains promises
 * is seen in its settled state.
 */
export const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));
