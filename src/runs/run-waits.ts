/**
 * Waiting for runs to finish without polling: a run reaching a terminal status is announced on
 * RUN_FINISHED_CHANNEL with its id (a trigger sends it in the transaction that ends the run), and
 * each announcement re-reads only the runs waited for under that id. One LISTEN connection serves
 * every wait of the process; it is opened by the first wait. After a (re)connect every waited run
 * is read again, since announcements sent while disconnected are lost.
 */
import { listen, RUN_FINISHED_CHANNEL, type Subscription } from '../db/notifications.ts';
import { isTerminal, type Run, type RunId } from '../domain/types.ts';
import { DurableAgentError, NotFoundError, WaitTimeoutError } from '../domain/errors.ts';
import type { Logger } from '../observability/logger.ts';

interface Waiter {
  /** Reads the run again and settles the wait if it has finished. */
  check(): void;
  /** Ends the wait with this error. */
  abandon(error: Error): void;
}

export class RunWaits {
  private readonly waiters = new Map<RunId, Set<Waiter>>();
  private subscription: Subscription | null = null;
  private closed = false;

  constructor(
    /** Where to LISTEN; null: the waited runs are read every second instead (no session to hold). */
    private readonly databaseUrl: string | null,
    private readonly read: (id: RunId) => Promise<Run | null>,
    private readonly logger: Logger,
  ) {}

  /** Resolves with the run once it is in a terminal status; rejects after `timeoutMs` (when given) or on close. */
  wait(id: RunId, timeoutMs?: number): Promise<Run> {
    if (this.closed) return Promise.reject(new DurableAgentError('the runtime is closed'));
    this.subscription ??= listen(
      this.databaseUrl,
      { [RUN_FINISHED_CHANNEL]: (payload) => this.wake((payload || undefined) as RunId | undefined) },
      {
        onConnect: () => this.wake(undefined),
        onError: (e) => this.logger.warn({ err_message: e.message }, 'LISTEN connection for run waits failed; reconnecting'),
      },
    );
    return new Promise<Run>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        const set = this.waiters.get(id);
        set?.delete(waiter);
        if (set?.size === 0) this.waiters.delete(id);
        fn();
      };
      const waiter: Waiter = {
        check: () => {
          this.read(id).then(
            (run) => {
              if (!run) settle(() => reject(new NotFoundError(`run ${id} not found`)));
              else if (isTerminal(run.status)) settle(() => resolve(run));
            },
            // A read that failed is tried again at the next wake-up (a notification, a reconnect or the
            // poll): a blip of the database does not fail a wait that may last hours.
            (e: Error) =>
              this.logger.warn({ err_message: e.message, run_id: id }, 'could not read a waited run; trying again at the next wake-up'),
          );
        },
        abandon: (error) => settle(() => reject(error)),
      };
      const set = this.waiters.get(id) ?? new Set();
      set.add(waiter);
      this.waiters.set(id, set);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => waiter.abandon(new WaitTimeoutError(id, timeoutMs)), timeoutMs);
      }
      // Registered before this first read, so an announcement sent in between is not missed.
      waiter.check();
    });
  }

  /** An announcement for one run, or (without an id) a reconnect after which anything may have finished. */
  private wake(id: RunId | undefined): void {
    const targets = id ? [...(this.waiters.get(id) ?? [])] : [...this.waiters.values()].flatMap((s) => [...s]);
    for (const w of targets) w.check();
  }

  /** Rejects every pending wait and closes the LISTEN connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.waiters.values()].flatMap((s) => [...s]))
      w.abandon(new DurableAgentError('the runtime was closed while waiting for a run'));
    await this.subscription?.close();
  }
}
