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
import { slotClock } from '../schedules/cron.ts';
import { planSlots } from '../schedules/plan.ts';
import type { RunRecords } from '../store/run-records.ts';
import type { ClaimedSchedule, Fired, Schedules } from '../store/schedules.ts';

/** Schedules taken per claim. */
const BATCH = 100;
/** @unit milliseconds — how long a process holds a schedule while it makes its slots (a crash lets it go then). */
const HOLD_MS = 30_000;
/** @unit milliseconds — the longest sleep: a safety net for a NOTIFY lost while reconnecting. */
const MAX_SLEEP_MS = 60_000;
/** @unit milliseconds — after a failed firing (the database away), the next try. */
const RETRY_MS = 1_000;

export interface SchedulerDeps {
  store: Schedules;
  records: Pick<RunRecords, 'createForSlot'>;
  defaults: RunDefaults;
  /** The agents whose schedules this process makes slots for (the runtime's). */
  agents: readonly string[];
  /** For LISTEN: woken when a schedule is made or changed. Without it, only its timer wakes it. */
  databaseUrl?: string;
  logger: Logger;
}

export interface Scheduler {
  /** Makes what is due now and returns; for tests and for the start. */
  fireDue(): Promise<number>;
  close(): Promise<void>;
}

const randomDelayMs = (jitterSeconds: number) => (jitterSeconds > 0 ? Math.floor(Math.random() * jitterSeconds * 1000) : 0);

export function startScheduler(d: SchedulerDeps): Scheduler {
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let running: Promise<number> | null = null;
  let again = false;
  let subscription: Subscription | null = null;

  /** One firing of one claimed schedule: its due slots' runs, then the schedule let go with its next slot. */
  const fire = async (c: ClaimedSchedule): Promise<number> => {
    const s = c.schedule;
    const plan = planSlots(slotClock(s.cron, s.timezone), { ...s, nextRunAt: s.nextRunAt! }, c.now);
    const fired: Fired = { nextRunAt: plan.next, lastRun: null, skippedMissed: plan.missed, skippedOverlap: 0, lastSkip: null };
    if (plan.missed > 0) fired.lastSkip = { reason: 'missed', at: c.now };
    let make = plan.make;
    if (make.length > 0 && s.overlap === 'skip' && s.lastRunId && (await d.store.runActive(s.lastRunId))) {
      fired.skippedOverlap = make.length;
      fired.lastSkip = { reason: 'overlap', at: c.now };
      make = [];
    }
    let made = 0;
    for (const slot of make) {
      try {
        const startAt = new Date(slot.getTime() + randomDelayMs(s.jitterSeconds));
        const run = await d.records.createForSlot(
          scheduledRun(s, d.defaults, slot, startAt) as Parameters<typeof d.records.createForSlot>[0],
        );
        if (run) {
          fired.lastRun = { id: run.id, at: run.createdAt };
          made++;
        }
      } catch (e) {
        // What the run would be created with no longer holds (a model without a price for its budget, …).
        if (!(e instanceof InputError)) throw e;
        fired.skippedMissed++;
        fired.lastSkip = { reason: `the run could not be created: ${e.message}`, at: c.now };
      }
    }
    if (!(await d.store.fired(c, fired))) d.logger.warn({ schedule_id: s.id }, 'a schedule was taken over while its slots were made');
    return made;
  };

  const fireDue = async (): Promise<number> => {
    let made = 0;
    for (;;) {
      const claimed = await d.store.claimDue(d.agents, BATCH, HOLD_MS);
      for (const c of claimed) made += await fire(c);
      if (claimed.length < BATCH) return made;
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

  if (d.databaseUrl) {
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
