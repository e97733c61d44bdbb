/**
 * Which of a schedule's due slots get a run, decided from the slots and the database's clock alone.
 *
 * Normally one slot is due when a process looks, and it gets its run. When several are due at once
 * (every process was down, or the database away), the schedule's `catchUp` decides, as Kubernetes'
 * CronJob does for the latest: 'latest' makes one run, for the latest due slot; 'all' one per due slot
 * (at most MAX_CATCH_UP, else the latest only); 'none' only a slot that is on time (made within
 * ON_TIME_MS of its time), so nothing of an outage. Missed slots older than `catchUpWindowSeconds` are
 * never made. Slots outside `startAt`..`endAt` are not slots at all.
 */
import type { SlotClock } from './cron.ts';

/** @unit milliseconds — a slot made this late at most is on time (what `catchUp: 'none'` still makes). */
export const ON_TIME_MS = 5_000;
/** The most missed slots `catchUp: 'all'` makes at once; more, and it makes the latest only. */
export const MAX_CATCH_UP = 100;
/** The most due slots looked at in one firing (a per-second schedule down for a day has 86,400). */
const MAX_DUE = 1_000_000;

export type CatchUp = 'none' | 'latest' | 'all';

export interface SlotRule {
  /** The first slot not yet handled. */
  nextRunAt: Date;
  catchUp: CatchUp;
  catchUpWindowSeconds: number | null;
  startAt: Date | null;
  endAt: Date | null;
}

export interface SlotPlan {
  /** The slots to make a run for, oldest first. */
  make: Date[];
  /** Due slots left without a run: missed, outside the catch-up window, or over what catchUp makes. */
  missed: number;
  /** The first slot after `now`; null when there is none (past endAt). */
  next: Date | null;
}

/** The first slot at or after `from` within the rule's start and end; null when there is none. */
export function firstSlot(clock: SlotClock, from: Date, rule: Pick<SlotRule, 'startAt' | 'endAt'>): Date | null {
  const after = new Date(Math.max(from.getTime(), rule.startAt?.getTime() ?? -Infinity) - 1);
  const s = clock.next(after);
  return s && (!rule.endAt || s <= rule.endAt) ? s : null;
}

export function planSlots(clock: SlotClock, rule: SlotRule, now: Date): SlotPlan {
  const inWindow = (t: Date) => rule.catchUpWindowSeconds === null || now.getTime() - t.getTime() <= rule.catchUpWindowSeconds * 1000;
  const due: Date[] = []; // the latest MAX_CATCH_UP + 1 of them
  let count = 0;
  let windowed = 0;
  let t: Date | null = rule.nextRunAt;
  while (t && t <= now && count < MAX_DUE) {
    if (rule.endAt && t > rule.endAt) {
      t = null;
      break;
    }
    if (!rule.startAt || t >= rule.startAt) {
      count++;
      if (inWindow(t)) windowed++;
      due.push(t);
      if (due.length > MAX_CATCH_UP + 1) due.shift();
    }
    t = clock.next(t);
  }
  // Past MAX_DUE (a very long outage of a very frequent schedule): go on from now.
  if (t && t <= now) t = clock.next(now);
  const next = t && (!rule.endAt || t <= rule.endAt) ? t : null;
  if (count === 0) return { make: [], missed: 0, next };
  const latest = due.at(-1)!;
  const onTime = now.getTime() - latest.getTime() <= ON_TIME_MS;
  const latestOnly = onTime || inWindow(latest) ? [latest] : [];
  const make =
    rule.catchUp === 'none'
      ? onTime
        ? [latest]
        : []
      : rule.catchUp === 'latest' || windowed > MAX_CATCH_UP
        ? latestOnly
        : due.filter((t) => inWindow(t) || (t === latest && onTime));
  return { make, missed: count - make.length, next };
}
