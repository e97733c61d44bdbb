/**
 * A schedule's slots: the times its cron expression names in its time zone (croner does the calendar,
 * leap years and daylight saving included). Five fields, or six with seconds first.
 *
 * Daylight saving, one documented rule: a local time that does not exist (the hour skipped in spring)
 * runs at the next valid time; a local time that happens twice (the hour repeated in autumn) runs once,
 * the first time. Whatever croner answers, a slot is never earlier in local wall-clock time than the
 * slot before it, so a repeated hour cannot make a second run of a wall-clock time already run.
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

/** Whether `tz` is an IANA time zone this runtime knows. */
function checkTimezone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new ScheduleSpecError('timezone', `unknown time zone "${tz}": use an IANA name such as UTC, Europe/Berlin or America/New_York`);
  }
}

/** Local wall-clock time of `d` in `tz`, as sortable text (YYYY-MM-DD HH:MM:SS). */
function wallClock(format: Intl.DateTimeFormat, d: Date): string {
  const parts = Object.fromEntries(format.formatToParts(d).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour === '24' ? '00' : parts.hour}:${parts.minute}:${parts.second}`;
}

export interface SlotClock {
  /** The first slot strictly after `after`, following the daylight-saving rule; null when there is none. */
  next(after: Date): Date | null;
}

/** The slots of `cron` in `timezone`; throws ScheduleSpecError for an expression or zone that cannot be used. */
export function slotClock(cron: string, timezone: string): SlotClock {
  checkTimezone(timezone);
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6)
    throw new ScheduleSpecError(
      'cron',
      `"${cron}" has ${fields.length} fields: give 5 (minute hour day month weekday) or 6 (seconds first)`,
    );
  let c: Cron;
  try {
    c = new Cron(fields.join(' '), { timezone, paused: true });
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
  return {
    next(after) {
      const floor = wallClock(format, after);
      let from = after;
      // A repeated hour: croner may answer a time whose wall clock was run already; step past it.
      for (let i = 0; i < 1000; i++) {
        const s = c.nextRun(from);
        if (!s) return null;
        if (wallClock(format, s) > floor) return s;
        from = s;
      }
      return null;
    },
  };
}
