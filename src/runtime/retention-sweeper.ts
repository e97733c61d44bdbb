/**
 * RETENTION_DAYS: each worker process deletes finished runs older than that, once at start and then
 * every `intervalMs`, in small batches (store/retention.ts). Workers sharing a database share the
 * work: a batch skips the rows another one holds. A failed sweep is logged and tried again at the
 * next interval; nothing is lost by a sweep that did not happen.
 */
import type { Logger } from '../observability/logger.ts';
import type { RunDeletion } from '../store/retention.ts';

export interface RetentionOptions {
  /** @unit milliseconds — finished runs that finished longer ago than this are deleted. */
  retentionMs: number;
  /** @unit milliseconds — between sweeps. Default 15 minutes. */
  intervalMs?: number;
  /** Runs per batch (one short transaction each). Default 500. */
  batchSize?: number;
}

export interface RetentionSweeper {
  /** Resolves after the first sweep (the one at start) has finished, whatever its outcome. */
  readonly firstSweep: Promise<void>;
  /** Stops between two batches and waits for the sweep under way. */
  close(): Promise<void>;
}

export const RETENTION_INTERVAL_MS = 15 * 60_000;

export function startRetention(deletion: Pick<RunDeletion, 'purge'>, opts: RetentionOptions, logger: Logger): RetentionSweeper {
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();

  const sweep = async (): Promise<void> => {
    const cutoff = new Date(Date.now() - opts.retentionMs);
    try {
      const deleted = await deletion.purge(cutoff, { batchSize: opts.batchSize ?? 500, signal: stop.signal });
      if (deleted.runs > 0) {
        logger.info(
          { event: 'retention', runs_deleted: deleted.runs, blobs_deleted: deleted.blobs, cutoff: cutoff.toISOString() },
          'retention: deleted finished runs past RETENTION_DAYS',
        );
      }
    } catch (e) {
      if (stop.signal.aborted) return;
      logger.warn({ err_message: (e as Error).message }, 'retention sweep failed; trying again at the next interval');
    }
  };
  const schedule = () => {
    if (stop.signal.aborted) return;
    timer = setTimeout(() => {
      sweeping = sweep().then(schedule);
    }, opts.intervalMs ?? RETENTION_INTERVAL_MS);
    timer.unref();
  };

  const firstSweep = sweep();
  sweeping = firstSweep.then(schedule);
  return {
    firstSweep,
    async close() {
      stop.abort();
      clearTimeout(timer);
      await sweeping;
    },
  };
}
