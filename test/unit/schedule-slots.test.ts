import { describe, expect, it } from 'vitest';
import { ScheduleSpecError, slotClock } from '../../src/schedules/cron.ts';
import { firstSlot, MAX_CATCH_UP, ON_TIME_MS, planSlots, type SlotRule } from '../../src/schedules/plan.ts';

const iso = (d: Date | null) => d?.toISOString() ?? null;
function slots(cron: string, tz: string, from: string, n: number): string[] {
  const clock = slotClock(cron, tz);
  const out: string[] = [];
  let t: Date | null = new Date(from);
  for (let i = 0; i < n && t; i++) out.push(iso((t = clock.next(t)))!);
  return out;
}

describe('slots', () => {
  it('follow the cron expression in its time zone, with seconds as an optional first field', () => {
    expect(slots('0 9 * * 1-5', 'Europe/Berlin', '2026-12-04T00:00:00Z', 2)).toEqual([
      '2026-12-04T08:00:00.000Z',
      '2026-12-07T08:00:00.000Z',
    ]);
    expect(slots('*/20 * * * * *', 'UTC', '2026-01-01T00:00:00Z', 3)).toEqual([
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
  });

  it('on a spring daylight-saving day, a local time that does not exist runs at the next valid time', () => {
    // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    expect(slots('30 2 * * *', 'Europe/Berlin', '2026-03-28T00:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the next valid time
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    // America/New_York, 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    expect(slots('0 2 * * *', 'America/New_York', '2026-03-07T00:00:00Z', 3)).toEqual([
      '2026-03-07T07:00:00.000Z',
      '2026-03-08T07:00:00.000Z', // 03:00 EDT
      '2026-03-09T06:00:00.000Z',
    ]);
  });

  it('on an autumn daylight-saving day, a local time that happens twice runs once', () => {
    // Europe/Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    expect(slots('30 2 * * *', 'Europe/Berlin', '2026-10-24T00:00:00Z', 3)).toEqual([
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z', // 02:30 CEST; not again at 02:30 CET
      '2026-10-26T01:30:00.000Z',
    ]);
    // America/New_York, 2026-11-01: 02:00 EDT goes back to 01:00 EST; every half hour runs 01:00 and 01:30 once.
    expect(slots('*/30 * * * *', 'America/New_York', '2026-11-01T04:45:00Z', 4)).toEqual([
      '2026-11-01T05:00:00.000Z', // 01:00 EDT
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T07:00:00.000Z', // 02:00 EST: 01:00 and 01:30 EST were run already
      '2026-11-01T07:30:00.000Z',
    ]);
  });

  it('refuse a bad expression or time zone, naming which', () => {
    const refused = (cron: string, tz = 'UTC') => {
      try {
        slotClock(cron, tz);
      } catch (e) {
        return e instanceof ScheduleSpecError ? [e.field, e.message] : e;
      }
      return null;
    };
    expect(refused('61 * * * *')).toEqual(['cron', expect.stringMatching(/minute/)]);
    expect(refused('* * * *')).toEqual(['cron', expect.stringMatching(/4 fields: give 5/)]);
    expect(refused('* * * * * * *')).toEqual(['cron', expect.stringMatching(/7 fields/)]);
    expect(refused('* * * * *', 'Mars/Base')).toEqual(['timezone', expect.stringMatching(/unknown time zone "Mars\/Base"/)]);
  });
});

describe('a firing', () => {
  const everyMinute = slotClock('* * * * *', 'UTC');
  const rule = (over: Partial<SlotRule>): SlotRule => ({
    nextRunAt: new Date('2026-01-01T10:00:00Z'),
    catchUp: 'latest',
    catchUpWindowSeconds: null,
    startAt: null,
    endAt: null,
    ...over,
  });
  const at = (s: string) => new Date(`2026-01-01T${s}Z`);

  it('makes the slot due now, and goes on to the next', () => {
    expect(planSlots(everyMinute, rule({}), at('10:00:00.200'))).toEqual({ make: [at('10:00:00')], missed: 0, next: at('10:01:00') });
    expect(planSlots(everyMinute, rule({}), at('09:59:59'))).toEqual({ make: [], missed: 0, next: at('10:00:00') });
  });

  it("after an outage makes what catchUp says: 'latest' one run for the latest due slot, 'all' one per slot, 'none' only one on time", () => {
    const now = at('10:10:03'); // eleven slots were due: 10:00 … 10:10, the latest 3 s ago
    expect(planSlots(everyMinute, rule({ catchUp: 'latest' }), now)).toEqual({ make: [at('10:10:00')], missed: 10, next: at('10:11:00') });
    expect(planSlots(everyMinute, rule({ catchUp: 'all' }), now).make).toHaveLength(11);
    expect(planSlots(everyMinute, rule({ catchUp: 'none' }), now)).toMatchObject({ make: [at('10:10:00')], missed: 10 });
    // The latest due slot is no longer on time: 'none' makes nothing of the outage, 'latest' still its latest slot.
    const late = at('10:10:30');
    expect(planSlots(everyMinute, rule({ catchUp: 'none' }), late)).toMatchObject({ make: [], missed: 11 });
    expect(planSlots(everyMinute, rule({ catchUp: 'latest' }), late)).toMatchObject({ make: [at('10:10:00')], missed: 10 });
    expect(ON_TIME_MS).toBe(5000);
  });

  it("'all' makes at most MAX_CATCH_UP slots, else the latest; the window leaves older ones out", () => {
    const day = planSlots(everyMinute, rule({ catchUp: 'all' }), at('23:59:01'));
    expect(day.make).toEqual([at('23:59:00')]);
    expect(day.missed).toBe(14 * 60 - 1); // 840 slots due: only the latest is made
    const many = planSlots(everyMinute, rule({ catchUp: 'all' }), new Date(at('10:00:00').getTime() + (MAX_CATCH_UP - 1) * 60_000 + 1000));
    expect(many.make).toHaveLength(MAX_CATCH_UP);
    expect(planSlots(everyMinute, rule({ catchUp: 'all', catchUpWindowSeconds: 150 }), at('10:10:03')).make).toEqual([
      at('10:08:00'),
      at('10:09:00'),
      at('10:10:00'),
    ]);
    // Outside the window, not even the latest.
    expect(planSlots(everyMinute, rule({ catchUp: 'latest', catchUpWindowSeconds: 10 }), at('10:10:30')).make).toEqual([]);
  });

  it('makes every slot still on time, whatever catchUp says: a firing a moment late misses nothing', () => {
    const everySecond = slotClock('* * * * * *', 'UTC');
    const lagging = rule({ catchUp: 'none', nextRunAt: at('10:00:00') });
    expect(planSlots(everySecond, lagging, at('10:00:02.500')).make).toEqual([at('10:00:00'), at('10:00:01'), at('10:00:02')]);
  });

  it('a day behind, a schedule every second costs the work of a hundred slots, its missed slots counted near enough', () => {
    const everySecond = slotClock('* * * * * *', 'UTC');
    const day = planSlots(everySecond, rule({ nextRunAt: new Date('2025-12-31T10:00:00Z') }), at('10:00:00.500'));
    // The last five seconds are on time; the day before them was missed, and 'latest' makes nothing more of it.
    expect(day.make).toEqual([at('09:59:56'), at('09:59:57'), at('09:59:58'), at('09:59:59'), at('10:00:00')]);
    expect(Math.abs(day.missed - 86_396)).toBeLessThan(100);
    expect(day.next).toEqual(at('10:00:01'));
  });

  it('keeps to startAt and endAt', () => {
    expect(planSlots(everyMinute, rule({ startAt: at('10:05:00') }), at('10:05:10')).make).toEqual([at('10:05:00')]);
    expect(planSlots(everyMinute, rule({ endAt: at('10:00:30') }), at('10:00:10'))).toEqual({
      make: [at('10:00:00')],
      missed: 0,
      next: null,
    });
    expect(iso(firstSlot(everyMinute, at('10:00:00'), { startAt: at('11:00:00'), endAt: null }))).toBe('2026-01-01T11:00:00.000Z');
    expect(firstSlot(everyMinute, at('10:00:00'), { startAt: null, endAt: at('09:00:00') })).toBeNull();
  });
});

describe('daylight saving, whatever the expression', () => {
  it('a gap: every time of the expression in it runs once, at its end', () => {
    // Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00Z). 02:00, 02:15, 02:30 and 02:45 do not exist.
    expect(slots('*/15 2 * * *', 'Europe/Berlin', '2026-03-28T23:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:00:00.000Z',
    ]);
    expect(slots('* 2 * * *', 'Europe/Berlin', '2026-03-29T00:59:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:00:00.000Z',
    ]);
    // New York, 2026-03-08: every two hours, 02:00 does not exist: 03:00 EDT, then 04:00.
    expect(slots('0 */2 * * *', 'America/New_York', '2026-03-08T05:30:00Z', 2)).toEqual([
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T08:00:00.000Z',
    ]);
  });

  it('a repeated hour: a schedule every second runs each wall-clock second once, and never stops', () => {
    // Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET at 01:00Z.
    expect(slots('* * * * * *', 'Europe/Berlin', '2026-10-25T00:59:58Z', 3)).toEqual([
      '2026-10-25T00:59:59.000Z', // 02:59:59 CEST
      '2026-10-25T02:00:00.000Z', // 03:00:00 CET: 02:00:00 … 02:59:59 ran in CEST already
      '2026-10-25T02:00:01.000Z',
    ]);
    expect(slots('*/2 * * * * *', 'America/New_York', '2026-11-01T05:59:56Z', 3)).toEqual([
      '2026-11-01T05:59:58.000Z', // 01:59:58 EDT
      '2026-11-01T07:00:00.000Z', // 02:00:00 EST
      '2026-11-01T07:00:02.000Z',
    ]);
    // Made in the second pass of the repeated hour: nothing until the hour has passed.
    expect(slots('*/10 * * * *', 'Europe/Berlin', '2026-10-25T01:30:00Z', 1)).toEqual(['2026-10-25T02:00:00.000Z']);
  });

  it('an expression that names no time that comes has no slot; a fixed offset is not a time zone', () => {
    expect(slotClock('0 0 31 2 *', 'UTC').next(new Date('2026-01-01T00:00:00Z'))).toBeNull();
    expect(() => slotClock('* * * * *', '+05:00')).toThrow(ScheduleSpecError);
  });
});
