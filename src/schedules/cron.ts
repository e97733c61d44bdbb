/**
 * A schedule's slots: the times its cron expression names in its time zone. Five fields, or six with
 * seconds first; croner reads the expression (ranges, steps, names, `L`, `W`, `#`).
 *
 * The expression is matched against local wall-clock time, then each wall-clock time is put on the
 * time line. That gives the daylight-saving rule, one for every expression: a local time that does not
 * exist (the hour skipped in spring) runs at the next valid time, once, however many of the
 * expression's times fell in the gap; a local time that happens twice (the hour repeated in autumn)
 * runs once, the first time. A schedule every second runs each wall-clock second once: it pauses for
 * the repeated hour rather than running it twice.
 */
import { Cron } from 'croner';

/** A cron expression or time zone that cannot be used: the message names which and why. */
export class ScheduleSpecError extends Error {
  constructor(
    readonly field: 'cron' | 'timezone',
    message: string,
  ) {
    super(message);
  }
}

function checkTimezone(tz: string): void {
  // Intl also takes fixed offsets ("+05:00"), which have no daylight saving and no name: not IANA.
  const offset = /^[+-]\d/.test(tz);
  try {
    if (!offset) new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    /* refused below */
  }
  if (offset || !isZone(tz)) {
    throw new ScheduleSpecError('timezone', `unknown time zone "${tz}": use an IANA name such as UTC, Europe/Berlin or America/New_York`);
  }
}

function isZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export interface SlotClock {
  /** The first slot strictly after `after` (by the daylight-saving rule); null when the expression names no later time. */
  next(after: Date): Date | null;
  /** The latest `n` slots at or before `atOrBefore`, oldest first (fewer where times of a gap share an instant). */
  previous(atOrBefore: Date, n: number): Date[];
}

/** @unit milliseconds */
const HALF_DAY = 43_200_000;

/** The slots of `cron` in `timezone`; throws ScheduleSpecError for an expression or zone that cannot be used. */
export function slotClock(cron: string, timezone: string): SlotClock {
  checkTimezone(timezone);
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6)
    throw new ScheduleSpecError(
      'cron',
      `"${cron}" has ${fields.length} fields: give 5 (minute hour day month weekday) or 6 (seconds first)`,
    );
  let pattern: Cron;
  try {
    // Matched against wall-clock time, written as if it were UTC (a time line with no daylight saving).
    pattern = new Cron(fields.join(' '), { timezone: 'UTC', paused: true });
  } catch (e) {
    throw new ScheduleSpecError('cron', `"${cron}" is not a cron expression: ${(e as Error).message.replace(/^CronPattern: /, '')}`);
  }
  const format = new Intl.DateTimeFormat('en-CA', {
    timeZone: timezone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  /** The wall-clock time of instant `t` (ms), as ms of a UTC time line; to the second. */
  const wall = (t: number): number => {
    const p = Object.fromEntries(format.formatToParts(new Date(t)).map((x) => [x.type, Number(x.value)]));
    return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour! % 24, p.minute!, p.second!);
  };
  /** The instant a wall-clock time first happens; for one in a gap, the first instant after the gap. */
  const instant = (w: number): number => {
    const offsets = [...new Set([wall(w - HALF_DAY) - (w - HALF_DAY), wall(w + HALF_DAY) - (w + HALF_DAY)])];
    const exact = offsets.map((o) => w - o).filter((t) => wall(t) === w);
    if (exact.length) return Math.min(...exact);
    // In a gap: the first second whose wall clock is past w (the end of the jump).
    let lo = Math.min(...offsets.map((o) => w - o));
    let hi = Math.max(...offsets.map((o) => w - o));
    while (hi - lo > 1000) {
      const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
      if (wall(mid) > w) hi = mid;
      else lo = mid;
    }
    return hi;
  };
  return {
    next(after) {
      let floor = wall(Math.floor(after.getTime() / 1000) * 1000);
      // Wall-clock times whose instant is not after `after` ran already: several times of a gap land on
      // its end, and the second pass of a repeated hour repeats times of the first.
      for (;;) {
        const w = pattern.nextRun(new Date(floor));
        if (!w) return null;
        const t = instant(w.getTime());
        if (t > after.getTime()) return new Date(t);
        floor = w.getTime();
      }
    },
    previous(atOrBefore, n) {
      const ceiling = wall(Math.floor(atOrBefore.getTime() / 1000) * 1000) + 1000;
      const times = pattern
        .previousRuns(n, new Date(ceiling))
        .map((w) => instant(w.getTime()))
        .filter((t) => t <= atOrBefore.getTime());
      return [...new Set(times)].sort((a, b) => a - b).map((t) => new Date(t));
    },
  };
}
