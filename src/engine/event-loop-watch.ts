/**
 * Notices when the event loop was blocked: a timer that should fire every `tickMs` fires late by the
 * time something kept the loop busy (a tool doing a long synchronous computation, say). Blocked, a
 * worker makes no progress on any of its runs; its leases survive because the keeper renews them from
 * another thread, but every run it holds waits. The caller is told how long, and roughly when it began.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/logger.ts';
import type { HeldRun } from './run-stops.ts';

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

/**
 * Logs a block of the event loop with the tool most likely to blame: the one in flight that started
 * last before the block began (a synchronous computation blocks as its tool starts).
 */
export function reportBlock(logger: Logger, b: EventLoopBlock, runs: Iterable<HeldRun>): void {
  const tools = [...runs].filter((h) => h.tool !== null);
  const suspect = tools.filter((h) => h.tool!.startedAt <= b.beganBefore).sort((x, y) => y.tool!.startedAt - x.tool!.startedAt)[0];
  const blockedMs = Math.round(b.blockedMs);
  logger.warn(
    {
      event: 'event_loop_blocked',
      blocked_ms: blockedMs,
      tools_in_flight: tools.length,
      suspect: suspect && { run_id: suspect.id, step_seq: suspect.tool!.seq, tool: suspect.tool!.tool },
    },
    suspect
      ? `event loop blocked for ${blockedMs} ms, most likely by tool "${suspect.tool!.tool}" (run ${suspect.id}, step ${suspect.tool!.seq}); every run of this worker waited`
      : `event loop blocked for ${blockedMs} ms with no tool in flight (a model call or the runtime itself)`,
  );
}
