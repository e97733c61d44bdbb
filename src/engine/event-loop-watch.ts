/**
 * Notices when the event loop was blocked (a tool doing a long synchronous computation, say) and says
 * what blocked it. Blocked, a worker makes no progress on any of its runs; their leases survive
 * because the keeper renews them from another thread, but every run it holds waits.
 *
 * A tool is named only on evidence that its code was what ran. Two measures give it: the synchronous
 * start of each tool call is timed, which names a tool that blocks as it starts exactly; and a loop
 * blocked for half the threshold is sampled (stall-sampler.ts), which names a tool whose code was
 * running in every sample, after an await too. A timer that should fire every `tickMs` and fires late
 * tells how long the loop was blocked; with no such evidence the runtime itself stalled, whatever
 * tools were in flight (a tool waiting on the network does not block anything).
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/logger.ts';
import type { ToolExecutor } from '../tools/executor.ts';
import type { HeldRun } from './run-stops.ts';
import { markToolCall, sampleStalls, type StallSample, type StallSampling } from './stall-sampler.ts';

export interface EventLoopWatchOptions {
  /** @unit milliseconds — report blocks at least this long. */
  thresholdMs: number;
  /** @unit milliseconds — how often the watch timer fires; the resolution of the measure. Default 200. */
  tickMs?: number;
}

export class EventLoopWatch {
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  private sampling: StallSampling | null = null;
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
    this.sampling = sampleStalls({ sampleAfterMs: this.opts.thresholdMs / 2, sampleEveryMs: Math.max(20, this.opts.thresholdMs / 4) });
    let last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      const blockedMs = now - last - this.tickMs;
      // Reported already if a tool's start was timed blocking since the last tick on time.
      if (blockedMs >= this.opts.thresholdMs && this.namedAt < last) {
        const to = Date.now();
        this.blame(blockedMs, this.sampling?.samples(to - (now - last), to) ?? []);
      }
      last = now;
    }, this.tickMs);
    this.timer.unref();
  }

  /** Settles when a stall can be sampled (or never will be, where the inspector cannot be used). */
  ready(): Promise<void> {
    return this.sampling?.ready ?? Promise.resolve();
  }

  stop(): void {
    clearInterval(this.timer);
    this.sampling?.close();
    this.sampling = null;
  }

  /**
   * `tools`, each call run in a function that names it for the samples, and the synchronous part of
   * each call timed (where a computation that blocks as it starts runs).
   */
  timeTools(tools: ToolExecutor): ToolExecutor {
    const marked = tools.mapTools(markToolCall);
    const timed = Object.create(marked) as ToolExecutor;
    timed.execute = (use, ctx) => {
      const started = performance.now();
      const outcome = marked.execute(use, ctx);
      const blockedMs = performance.now() - started;
      if (blockedMs >= this.opts.thresholdMs) {
        this.namedAt = performance.now();
        const seq = [...this.runs()].find((h) => h.id === ctx.runId)?.tool?.seq;
        const suspect = { run_id: ctx.runId, step_seq: seq, tool: use.name };
        this.report(
          blockedMs,
          suspect,
          `tool "${use.name}" blocked the event loop for ${Math.round(blockedMs)} ms as it started (run ${ctx.runId})`,
        );
      }
      return outcome;
    };
    return timed;
  }

  /**
   * A block the timing of tool starts did not catch: a tool's, when its code was running in every
   * sample taken during it; else the runtime's (a model reply being read, thousands of runs' steps at
   * once, a collection of garbage).
   */
  private blame(blockedMs: number, samples: StallSample[]): void {
    const ms = Math.round(blockedMs);
    const call = samples[0]?.call;
    if (call && samples.every((s) => s.call?.tool === call.tool && s.call.runId === call.runId)) {
      const seq = [...this.runs()].find((h) => h.id === call.runId)?.tool?.seq;
      const suspect = { run_id: call.runId, step_seq: seq, tool: call.tool };
      const seen = samples.length === 1 ? 'the sample' : `all ${samples.length} samples`;
      this.report(
        blockedMs,
        suspect,
        `event loop blocked for ${ms} ms by tool "${call.tool}": its code was running in ${seen} of the stall (run ${call.runId}, step ${seq})`,
      );
      return;
    }
    const running = samples.at(-1)?.where;
    const why = samples.length
      ? `no tool's code was running in every sample of it (it was in ${running?.[0] ?? 'no JavaScript'})`
      : "no sample of it showed a tool's code running";
    this.report(blockedMs, undefined, `event loop blocked for ${ms} ms by the runtime itself, not by a tool: ${why}`, running);
  }

  private report(
    blockedMs: number,
    suspect: { run_id: string; step_seq?: number | undefined; tool: string } | undefined,
    msg: string,
    running?: string[],
  ): void {
    const held = [...this.runs()];
    this.logger.warn(
      { event: 'event_loop_blocked', blocked_ms: Math.round(blockedMs), runs_waiting: held.length, suspect, running },
      `${msg}; every run of this worker waited`,
    );
  }
}
