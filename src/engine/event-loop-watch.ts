/**
 * Notices when the event loop was blocked (a tool doing a long synchronous computation, say) and says
 * what blocked it. Blocked, a worker makes no progress on any of its runs; their leases survive
 * because the keeper renews them from another thread, but every run it holds waits.
 *
 * Two measures: the synchronous start of each tool call is timed, which names a tool that blocks as
 * it starts exactly; and a timer that should fire every `tickMs` fires late by the time anything else
 * kept the loop busy, which is blamed on the tool most likely to have done it.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/logger.ts';
import type { ToolExecutor } from '../tools/executor.ts';
import type { HeldRun } from './run-stops.ts';

export interface EventLoopWatchOptions {
  /** @unit milliseconds — report blocks at least this long. */
  thresholdMs: number;
  /** @unit milliseconds — how often the watch timer fires; the resolution of the measure. Default 200. */
  tickMs?: number;
}

export class EventLoopWatch {
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() of the last block already blamed on a tool by timing its start. */
  private namedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly logger: Logger,
    private readonly runs: () => Iterable<HeldRun>,
    private readonly opts: EventLoopWatchOptions,
  ) {
    this.tickMs = opts.tickMs ?? 200;
  }

  start(): void {
    let last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      const blockedMs = now - last - this.tickMs;
      // Reported already if a tool's start was timed blocking since the last tick on time.
      if (blockedMs >= this.opts.thresholdMs && this.namedAt < last) this.blame(blockedMs, last + this.tickMs);
      last = now;
    }, this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** `tools`, with the synchronous part of each call timed (where a computation that blocks as it starts runs). */
  timeTools(tools: ToolExecutor): ToolExecutor {
    const timed = Object.create(tools) as ToolExecutor;
    timed.execute = (use, ctx) => {
      const started = performance.now();
      const outcome = tools.execute(use, ctx);
      const blockedMs = performance.now() - started;
      if (blockedMs >= this.opts.thresholdMs) {
        this.namedAt = performance.now();
        const seq = [...this.runs()].find((h) => h.id === ctx.runId)?.tool?.seq;
        const suspect = { run_id: ctx.runId, step_seq: seq, tool: use.name };
        this.report(blockedMs, suspect, `tool "${use.name}" blocked the event loop for ${Math.round(blockedMs)} ms as it started (run ${ctx.runId})`);
      }
      return outcome;
    };
    return timed;
  }

  /** A block the tool timing did not catch: the likeliest culprit is the tool in flight that started last before it began. */
  private blame(blockedMs: number, beganBefore: number): void {
    const tools = [...this.runs()].filter((h) => h.tool !== null);
    const h = tools.filter((x) => x.tool!.startedAt <= beganBefore).sort((x, y) => y.tool!.startedAt - x.tool!.startedAt)[0];
    const ms = Math.round(blockedMs);
    if (!h) {
      this.report(blockedMs, undefined, `event loop blocked for ${ms} ms with no tool in flight (a model call or the runtime itself)`);
      return;
    }
    const suspect = { run_id: h.id, step_seq: h.tool!.seq, tool: h.tool!.tool };
    this.report(blockedMs, suspect, `event loop blocked for ${ms} ms, most likely by tool "${suspect.tool}" (run ${h.id}, step ${suspect.step_seq})`);
  }

  private report(blockedMs: number, suspect: { run_id: string; step_seq?: number | undefined; tool: string } | undefined, msg: string): void {
    const held = [...this.runs()];
    this.logger.warn(
      { event: 'event_loop_blocked', blocked_ms: Math.round(blockedMs), runs_waiting: held.length, suspect },
      `${msg}; every run of this worker waited`,
    );
  }
}
