/**
 * How `serve` and `worker` stop. The first SIGINT/SIGTERM shuts down cleanly; while a non-idempotent
 * tool call runs, that can take as long as the call's timeout (cut off, nobody would know whether it
 * ran), so the process says which call it waits for and for how long. A second signal exits at once:
 * the call is left STARTED, and the worker that next takes its run up stops the run for a person's
 * decision (the rule for a non-idempotent call found started), which the messages say.
 */
import type { Worker } from '../engine/worker.ts';
import type { Logger } from '../observability/logger.ts';
import { duration } from './format.ts';

/** Exit code of a process ended by a second signal (128 + SIGINT's number, as shells report it). */
export const EXIT_NOW = 130;

/**
 * Resolves with the first SIGINT or SIGTERM. A second one of either calls `exitNow` (given the signal)
 * instead: the process is to exit at once.
 */
export function untilSignal(exitNow: (signal: NodeJS.Signals) => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const first = (signal: NodeJS.Signals) => {
      process.off('SIGINT', first);
      process.off('SIGTERM', first);
      process.once('SIGINT', exitNow);
      process.once('SIGTERM', exitNow);
      resolve(signal);
    };
    process.on('SIGINT', first);
    process.on('SIGTERM', first);
  });
}

/** At the first signal: one line for each non-idempotent tool call the shutdown waits for. */
export function announceShutdown(worker: Worker | null, logger: Logger, toolTimeoutMs: number): void {
  for (const t of worker?.unstoppableTools() ?? []) {
    const leftMs = Math.max(0, toolTimeoutMs - t.runningMs);
    logger.warn(
      {
        event: 'shutdown_waits_for_tool',
        run_id: t.runId,
        step_seq: t.seq,
        tool_name: t.tool,
        running_ms: Math.round(t.runningMs),
        wait_up_to_ms: Math.round(leftMs),
      },
      `shutdown waits for tool "${t.tool}" of run ${t.runId} (step ${t.seq}) to finish: it is not idempotent, so it is never cut off; ` +
        `up to ${duration(leftMs)} more (its timeout, TOOL_TIMEOUT_SECONDS=${toolTimeoutMs / 1000}). ` +
        `Press Ctrl-C again to exit now and leave the call to a person's decision`,
    );
  }
}

/** At the second signal, before exiting: what becomes of each non-idempotent call still running. */
export function announceExit(worker: Worker | null, logger: Logger, signal: NodeJS.Signals): void {
  const tools = worker?.unstoppableTools() ?? [];
  for (const t of tools) {
    logger.warn(
      { event: 'tool_left_to_decide', run_id: t.runId, step_seq: t.seq, tool_name: t.tool, signal },
      `exiting without waiting for tool "${t.tool}" of run ${t.runId} (step ${t.seq}): whether it ran is for a person to decide; ` +
        `the run waits for that decision once a worker takes it up again (durable-agent runs show ${t.runId} says how)`,
    );
  }
  if (tools.length === 0) logger.warn({ signal }, 'second signal: exiting now');
  logger.flush?.();
}
