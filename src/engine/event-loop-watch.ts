/**
 * Notices when the event loop was blocked: a timer that should fire every `tickMs` fires late by the
 * time something kept the loop busy (a tool doing a long synchronous computation, say). Blocked, a
 * worker makes no progress on any of its runs; its leases survive because the keeper renews them from
 * another thread, but every run it holds waits. The caller is told how long, and roughly when it began.
 */
import { performance } from 'node:perf_hooks';

export interface EventLoopBlock {
  /** @unit milliseconds — how much later than due the watch timer fired. */
  blockedMs: number;
  /** performance.now() by which the block had begun (it began after the last tick on time, and before this). */
  beganBefore: number;
}

export interface EventLoopWatchOptions {
  /** @unit milliseconds — report blocks at least this long. */
  thresholdMs: number;
  /** @unit milliseconds — how often the watch timer fires; the resolution of the measure. Default 200. */
  tickMs?: number;
  onBlocked: (block: EventLoopBlock) => void;
}

export function watchEventLoop(opts: EventLoopWatchOptions): { stop(): void } {
  const tickMs = opts.tickMs ?? 200;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const blockedMs = now - last - tickMs;
    if (blockedMs >= opts.thresholdMs) opts.onBlocked({ blockedMs, beganBefore: last + tickMs });
    last = now;
  }, tickMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
