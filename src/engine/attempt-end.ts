/**
 * How an attempt ends when its driver did not finish the run, by what stopped it:
 * - a hand-back at shutdown, or a model provider that kept failing: back to the queue (after the
 *   provider's wait, at the latest at the deadline), the attempt not counted;
 * - a cancel: CANCELLED; the deadline: TIMED_OUT;
 * - a lost lease this worker lived to see: the attempt the takeover cost the run is given back;
 * - a crash of the driver (a bug, a failed database write): the cause recorded on the run, which is
 *   claimable again at once, the attempt counted, so a run that crashes every driver still ends at
 *   the attempt limit — then with that cause in its error.
 * A run with a cancel pending that goes back to the queue ends CANCELLED instead (see `release`).
 */
import type { TerminalStatus } from '../domain/types.ts';
import { DatabaseUnavailableError, FatalError, LeaseLostError } from '../domain/errors.ts';
import type { Logger } from '../observability/logger.ts';
import { classifyDatabaseError } from '../core/database-errors.ts';
import type { EngineStore, LeaseOwner, Release, RunEnd } from '../ports/engine-store.ts';
import { storableText } from '../core/storable.ts';
import { AttemptHandedBack, AttemptRequeued, AttemptWaiting } from './driver-types.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import { CancelSignal, DeadlineSignal, type HeldRun } from './run-stops.ts';

export interface AttemptEndDeps {
  store: EngineStore;
  events: Required<EngineEvents>;
  logger: Logger;
  owner: LeaseOwner;
  /** Claims a run may take without finishing before it is failed as abandoned (a poison run). */
  maxRunAttempts: number;
  /** How long a run waits in the queue after its model provider kept failing (at least its retry-after). */
  requeueDelayMs: number;
}

/** A write the database refused for what it holds, not for being unreachable. */
const PERMANENT = Symbol('permanent');

/** Tries of a write that ends an attempt (a release, a finish) before the lease is left to lapse. */
const WRITE_TRIES = 3;
const WRITE_BACKOFF_MS = 200;

/** The cause of a driver crash as the run records it: short, and naming a database error's SQLSTATE. */
export function describeCrash(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  const text = typeof code === 'string' ? `database error ${code}: ${message}` : `${e instanceof Error ? e.name : 'Error'}: ${message}`;
  return storableText(text.length > 1000 ? `${text.slice(0, 1000)}…` : text);
}

export class AttemptEnds {
  constructor(private readonly d: AttemptEndDeps) {}

  /** A run claimed more often than the limit allows: it crashed every worker that drove it. */
  async abandon(h: HeldRun): Promise<TerminalStatus> {
    const { run } = h;
    const cause = run.lastError?.message ?? run.error;
    const error = `abandoned: claimed ${run.attempts - 1} times without finishing (limit ${this.d.maxRunAttempts})${cause ? `; last error: ${cause}` : ''}`;
    await this.d.store.finish(run.id, run.lease, { status: 'FAILED', error });
    this.d.events.runFinished({ run, worker: run.lease.worker, status: 'FAILED', error, tokensUsed: run.tokensUsed });
    return 'FAILED';
  }

  /**
   * Ends the attempt by what stopped it: `e` is what the driver threw, the signal's reason (when it
   * was aborted) says why. Returns the run's terminal status, or null when it went back to the queue;
   * with `rethrow`, a crash or a lost lease is thrown again once dealt with.
   */
  async settle(h: HeldRun, e: unknown, rethrow: boolean): Promise<TerminalStatus | null> {
    const { run } = h;
    const worker = this.d.owner.worker;
    // The run waits, holding nothing: the write that made it wait gave the lease up already.
    if (e instanceof AttemptWaiting) return null;
    const reason: unknown = h.signal.aborted ? h.signal.reason : e;
    if (reason instanceof AttemptHandedBack) return this.handBack(h);
    if (reason instanceof AttemptRequeued) {
      const delayMs = Math.max(this.d.requeueDelayMs, reason.retryAfterMs ?? 0);
      return this.release(
        h,
        { countAttempt: false, providerRequeue: true, delayMs, error: reason.message, ...reason.unrecorded },
        'requeued',
        reason,
      );
    }
    // Nobody wants this run driven further: the cancel pending makes the release end it CANCELLED.
    if (reason instanceof CancelSignal) return this.release(h, { countAttempt: false, ...h.unrecorded }, null);
    if (reason instanceof DeadlineSignal)
      return this.end(h, { status: 'TIMED_OUT', error: reason.message, budget: 'time', ...h.unrecorded });
    if (reason instanceof LeaseLostError) {
      await this.lostLease(h);
    } else if (reason instanceof FatalError) {
      // A simulated process crash: nothing is recorded; the lease lapses and another worker resumes.
      this.d.events.attemptEnded({ runId: run.id, worker, reason: 'crash', error: e });
    } else {
      // An outage (the database stayed unreachable through the write's retries) is not the run's fault:
      // its attempt is not counted. Anything else is a crash of the driver, and counts.
      const outage = e instanceof DatabaseUnavailableError || classifyDatabaseError(e) === 'transient';
      const database = outage || typeof (e as { code?: unknown } | null)?.code === 'string';
      this.d.events.attemptEnded({ runId: run.id, worker, reason: database ? 'database' : 'crash', error: e });
      await this.release(h, { countAttempt: !outage, error: describeCrash(e), ...h.unrecorded }, null);
    }
    if (rethrow) throw e;
    return null;
  }

  /** Back to the queue at once, in its old place, the attempt not counted. */
  handBack(h: HeldRun): Promise<TerminalStatus | null> {
    return this.release(h, { countAttempt: false, ...h.unrecorded }, 'handed-back');
  }

  private async release(
    h: HeldRun,
    how: Release,
    reported: 'handed-back' | 'requeued' | null,
    error?: unknown,
  ): Promise<TerminalStatus | null> {
    const { run } = h;
    let released = await this.write(h, 'release', () => this.d.store.release(run.id, run.lease, how));
    if (released === PERMANENT && how.error) {
      // The cause itself could not be stored: release without it rather than leave the lease to lapse.
      released = await this.write(h, 'release', () =>
        this.d.store.release(run.id, run.lease, { ...how, error: 'the cause of this attempt could not be stored' }),
      );
    }
    if (released === undefined || released === PERMANENT) return null;
    if (released === false) {
      await this.lostLease(h);
      return null;
    }
    if (reported) this.d.events.attemptEnded({ runId: run.id, worker: this.d.owner.worker, reason: reported, error });
    if (released.status !== 'CANCELLED') return null;
    this.d.events.runFinished({
      run,
      worker: run.lease.worker,
      status: 'CANCELLED',
      error: 'cancelled on request',
      tokensUsed: released.tokensUsed,
    });
    return 'CANCELLED';
  }

  private async end(h: HeldRun, end: RunEnd & { status: TerminalStatus }): Promise<TerminalStatus | null> {
    const { run } = h;
    try {
      const done = await this.write(h, 'finish', () => this.d.store.finish(run.id, run.lease, end).then(() => true));
      if (done !== true) return null;
    } catch (e) {
      if (!(e instanceof LeaseLostError)) throw e;
      await this.lostLease(h);
      return null;
    }
    this.d.events.runFinished({
      run,
      worker: run.lease.worker,
      status: end.status,
      error: end.error ?? null,
      tokensUsed: h.tokensUsed,
      ...(end.budget ? { budget: end.budget } : {}),
    });
    return end.status;
  }

  /**
   * This worker lived to see the lease lost, so the run did not kill it: it stalled, or could not
   * reach the database. The attempt the takeover cost the run is given back.
   */
  private async lostLease(h: HeldRun): Promise<void> {
    const { run } = h;
    this.d.events.leaseLost({ runId: run.id, worker: this.d.owner.worker });
    try {
      if (await this.d.store.forgiveLapsedAttempt(run.id, run.lease)) {
        this.d.logger.info(
          { run_id: run.id, worker: this.d.owner.worker },
          'the attempt lost with the lease is not counted against the run',
        );
      }
    } catch (e) {
      this.d.logger.warn({ err: e, run_id: run.id, worker: this.d.owner.worker }, 'could not give back the attempt lost with the lease');
    }
  }

  /**
   * A write that ends an attempt, tried a few times: failing, the run would sit RUNNING until its
   * lease lapses. Undefined when every try failed, PERMANENT when the database refused the write itself
   * (trying it again would fail alike); each failure is logged. LeaseLostError passes through.
   */
  private async write<T>(h: HeldRun, what: string, write: () => Promise<T>): Promise<T | typeof PERMANENT | undefined> {
    for (let tries = 1; ; tries++) {
      try {
        return await write();
      } catch (e) {
        if (e instanceof LeaseLostError) throw e;
        if (classifyDatabaseError(e) === 'permanent') {
          this.d.logger.error({ err: e, run_id: h.id, worker: this.d.owner.worker, tries }, `${what} refused by the database`);
          return PERMANENT;
        }
        const last = tries >= WRITE_TRIES;
        this.d.logger.error(
          { err: e, run_id: h.id, worker: this.d.owner.worker, tries },
          last ? `${what} failed; the run is taken over when its lease lapses` : `${what} failed; trying again`,
        );
        if (last) return undefined;
        await new Promise((r) => setTimeout(r, WRITE_BACKOFF_MS * tries));
      }
    }
  }
}
