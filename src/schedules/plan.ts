/**
 * Which of a schedule's due slots get a run, decided from the slots and the database's clock alone.
 *
 * A slot made within ON_TIME_MS of its time is on time, and gets its run whatever else: a firing a
 * moment late (a busy database, a process taking over a crashed one's lock) misses nothing. Older due
 * slots were missed (every process down, the database away), and the schedule's `catchUp` decides, as
 * Kubernetes' CronJob does for the latest: 'latest' one run for the latest missed slot (none when a
 * slot on time is made anyway); 'all' one per missed slot (at most MAX_CATCH_UP, else as 'latest');
 * 'none' none. Missed slots older than `catchUpWindowSeconds` are never made. Slots outside
 * `startAt`..`endAt` are not slots at all.
 */
import type { SlotClock } from './cron.ts';

/** @unit milliseconds — a slot made this late at most is on time (what `catchUp: 'none'` still makes). */
export const ON_TIME_MS = 5_000;
/** The most missed slots `catchUp: 'all'` makes at once; more, and it makes the latest only. */
export const MAX_CATCH_UP = 100;
/** Due slots looked for forwards from the next slot before looking backwards from now. */
const FORWARD = 8;

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
  const inRange = (t: Date) => t >= rule.nextRunAt && (!rule.startAt || t >= rule.startAt) && (!rule.endAt || t <= rule.endAt);
  const until = rule.endAt && rule.endAt < now ? rule.endAt : now;
  // Normally a slot or two is due: found forwards from the next slot. Further behind, the latest
  // MAX_CATCH_UP + 1 are found backwards from now: however far behind the schedule is, the work is that
  // of a hundred slots, not of every slot since.
  let due: Date[] = [];
  let t: Date | null = rule.nextRunAt;
  for (let i = 0; t && t <= until && i < FORWARD; i++, t = clock.next(t)) if (inRange(t)) due.push(t);
  let count = due.length;
  if (t && t <= until) {
    due = clock.previous(until, MAX_CATCH_UP + 1).filter(inRange);
    count = due.length < MAX_CATCH_UP + 1 ? due.length : estimateFrom(rule.nextRunAt, due);
  }
  const after = t && t > now ? t : clock.next(now);
  const next = after && (!rule.endAt || after <= rule.endAt) ? after : null;
  if (count === 0) return { make: [], missed: 0, next };
  const onTime = due.filter((t) => now.getTime() - t.getTime() <= ON_TIME_MS);
  const late = due.filter((t) => now.getTime() - t.getTime() > ON_TIME_MS && inWindow(t));
  // Missed slots in the window: those found, and more when slots before them are due and in the window too.
  const windowedLate = late.length + (count > due.length && inWindow(due[0]!) ? count - due.length : 0);
  // Slots on time are made whatever catchUp says: a firing a moment late (a busy database) misses nothing.
  const caught =
    rule.catchUp === 'none' || late.length === 0
      ? []
      : rule.catchUp === 'all' && windowedLate <= MAX_CATCH_UP
        ? late
        : onTime.length
          ? []
          : [late.at(-1)!];
  const make = [...caught, ...onTime];
  return { make, missed: count - make.length, next };
}

/**
 * How many slots lie from `from` to the last of `latest` (the latest due ones, oldest first), by their
 * spacing: the count only feeds `skipped`, and walking a day of a schedule every second would block.
 */
function estimateFrom(from: Date, latest: readonly Date[]): number {
  const spacing = (latest.at(-1)!.getTime() - latest[0]!.getTime()) / (latest.length - 1);
  return latest.length + Math.max(0, Math.round((latest[0]!.getTime() - from.getTime()) / spacing));
}
