/**
 * Every API and worker process makes the due slots of the schedules of the agents it knows, whichever
 * comes first: it sleeps until the earliest due slot (one indexed read, one timer), is woken early when
 * a schedule is made or changed anywhere (NOTIFY), takes the due schedules under a short lock, makes
 * their runs, and lets them go with their next slot. The database's clock decides what is due; the
 * slot's unique key decides that a slot has one run, whatever the number of processes and their clocks.
 */
import { listen, SCHEDULE_CHANGED_CHANNEL, type Subscription } from '../db/notifications.ts';
import { InputError } from '../domain/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { RunDefaults } from '../runs/new-run.ts';
import { scheduledRun } from '../runs/schedules.ts';
import { type SlotClock, slotClock } from '../schedules/cron.ts';
import { planSlots, type SlotPlan } from '../schedules/plan.ts';
import type { RunRecords, SlotRun } from '../store/run-records.ts';
import type { ClaimedSchedule, Fired, Schedules } from '../store/schedules.ts';

/** Schedules taken per claim. */
const BATCH = 500;
/**
 * @unit milliseconds — how long a process holds a schedule while it makes its slots (a firing takes
 * milliseconds); a crash lets it go then, while its slots are still on time.
 */
const HOLD_MS = 4_000;
/** @unit milliseconds — the longest sleep: a safety net for a NOTIFY lost while reconnecting. */
const MAX_SLEEP_MS = 60_000;
/** @unit milliseconds — after a failed firing (the database away), the next try. */
const RETRY_MS = 1_000;

export interface SchedulerDeps {
  store: Schedules;
  records: Pick<RunRecords, 'createForSlots'>;
  defaults: RunDefaults;
  /** The agents whose schedules this process makes slots for (the runtime's). */
  agents: readonly string[];
  /**
   * For LISTEN: woken when a schedule is made or changed anywhere; null: it looks every second
   * instead (no session to hold). Absent: only its timer wakes it.
   */
  databaseUrl?: string | null;
  logger: Logger;
}

export interface Scheduler {
  /** Makes what is due now and returns; for tests and for the start. */
  fireDue(): Promise<number>;
  close(): Promise<void>;
}

/** Slot clocks by expression and zone: thousands of schedules share a few expressions. */
const clocks = new Map<string, SlotClock>();
function clockOf(cron: string, timezone: string): SlotClock {
  const key = `${timezone} ${cron}`;
  let c = clocks.get(key);
  if (!c) {
    if (clocks.size >= 10_000) clocks.clear();
    clocks.set(key, (c = slotClock(cron, timezone)));
  }
  return c;
}

const randomDelayMs = (jitterSeconds: number) => (jitterSeconds > 0 ? Math.floor(Math.random() * jitterSeconds * 1000) : 0);

export function startScheduler(d: SchedulerDeps): Scheduler {
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let running: Promise<number> | null = null;
  let again = false;
  let subscription: Subscription | null = null;

  /**
   * The firings of a batch of claimed schedules: which slots each makes (planSlots; overlap against
   * its previous run), their runs in one statement, the schedules let go with their next slots in one
   * more. A slot a crash left half made is made again by the next firing: its unique key keeps it one run.
   */
  const fire = async (claimed: readonly ClaimedSchedule[]): Promise<number> => {
    const overlapping = await d.store.withActiveRuns(claimed.filter((c) => c.schedule.overlap === 'skip').map((c) => c.schedule.id));
    const firings = claimed.map((claim) => {
      const s = claim.schedule;
      const fired: Fired = { nextRunAt: null, lastRun: null, skippedMissed: 0, skippedOverlap: 0, lastSkip: null };
      let plan: SlotPlan;
      try {
        plan = planSlots(clockOf(s.cron, s.timezone), { ...s, nextRunAt: s.nextRunAt! }, claim.now);
      } catch (e) {
        // One schedule that cannot be planned (an expression this croner refuses) holds up no other.
        fired.nextRunAt = s.nextRunAt;
        fired.lastSkip = { reason: `its slots could not be found: ${(e as Error).message}`, at: claim.now };
        return { claim, fired, runs: [] };
      }
      fired.nextRunAt = plan.next;
      fired.skippedMissed = plan.missed;
      if (plan.missed > 0) fired.lastSkip = { reason: 'missed', at: claim.now };
      let make = plan.make;
      if (make.length > 0 && overlapping.has(s.id)) {
        fired.skippedOverlap = make.length;
        fired.lastSkip = { reason: 'overlap', at: claim.now };
        make = [];
      }
      const runs: SlotRun[] = [];
      for (const slot of make) {
        try {
          runs.push(scheduledRun(s, d.defaults, slot, new Date(slot.getTime() + randomDelayMs(s.jitterSeconds))));
        } catch (e) {
          // What the run would be created with no longer holds (a model without a price for its budget, …).
          if (!(e instanceof InputError)) throw e;
          fired.skippedMissed++;
          fired.lastSkip = { reason: `the run could not be created: ${e.message}`, at: claim.now };
        }
      }
      return { claim, fired, runs };
    });
    const made = await d.records.createForSlots(firings.flatMap((f) => f.runs));
    const bySchedule = new Map(made.map((r) => [r.scheduleId, r]));
    for (const f of firings) {
      const run = bySchedule.get(f.claim.schedule.id);
      if (run) f.fired.lastRun = { id: run.id, at: run.createdAt };
    }
    for (const id of await d.store.fired(firings))
      d.logger.warn({ schedule_id: id }, 'a schedule was taken over while its slots were made');
    return made.length;
  };

  const fireDue = async (): Promise<number> => {
    let made = 0;
    for (;;) {
      const { claimed, taken } = await d.store.claimDue(d.agents, BATCH, HOLD_MS, (id, e) =>
        d.logger.warn({ schedule_id: id, err_message: e.message }, 'a schedule cannot be read; it is left as it is'),
      );
      made += await fire(claimed);
      if (taken < BATCH) return made;
    }
  };

  const arm = (ms: number) => {
    clearTimeout(timer);
    if (closed) return;
    timer = setTimeout(() => void tick(), Math.min(Math.max(0, ms), MAX_SLEEP_MS));
    timer.unref();
  };

  /** Makes what is due, then sleeps until the next due slot. A wake-up while it runs makes it look again after. */
  const tick = async (): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    let wait = RETRY_MS;
    running = fireDue();
    try {
      await running;
      const ms = await d.store.nextDueInMs(d.agents);
      wait = ms ?? MAX_SLEEP_MS;
    } catch (e) {
      d.logger.warn({ err_message: (e as Error).message, retry_in_ms: RETRY_MS }, 'could not make the due slots of schedules');
    } finally {
      running = null;
    }
    if (again) {
      again = false;
      wait = 0;
    }
    arm(wait);
  };

  if (d.databaseUrl !== undefined) {
    subscription = listen(
      d.databaseUrl,
      { [SCHEDULE_CHANGED_CHANNEL]: () => void tick() },
      {
        onConnect: () => void tick(),
        onError: (e, retryInMs) => d.logger.warn({ err_message: e.message, retry_in_ms: retryInMs }, 'schedule LISTEN connection failed'),
      },
    );
  } else arm(0);

  return {
    fireDue,
    async close() {
      closed = true;
      clearTimeout(timer);
      await subscription?.close();
      await running?.catch(() => {});
    },
  };
}
