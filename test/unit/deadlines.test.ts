import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Deadlines, type Timed } from '../../src/engine/deadlines.ts';

interface Entry extends Timed {
  name: string;
}
const entry = (name: string): Entry => ({ name, due: 0, place: -1 });

describe('Deadlines', () => {
  let expired: string[];
  let deadlines: Deadlines<Entry>;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    expired = [];
    deadlines = new Deadlines<Entry>(
      (e) => expired.push(e.name),
      () => Date.now(),
    );
  });
  afterEach(() => {
    deadlines.close();
    vi.useRealTimers();
  });

  it('expires each entry once, when its time has come, soonest first, whatever order they came in', () => {
    const [a, b, c] = [entry('a'), entry('b'), entry('c')];
    deadlines.add(c, 300);
    deadlines.add(a, 100);
    deadlines.add(b, 200);
    vi.advanceTimersByTime(99);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['a']);
    vi.advanceTimersByTime(250);
    expect(expired).toEqual(['a', 'b', 'c']);
    expect(deadlines.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never expires an entry taken out before its time, and keeps one timer, for the soonest', () => {
    const entries = Array.from({ length: 5 }, (_, i) => entry(`e${i}`));
    entries.forEach((e, i) => deadlines.add(e, 100 * (i + 1)));
    expect(vi.getTimerCount()).toBe(1);
    deadlines.remove(entries[0]!); // the soonest: the next one's time arms the timer
    deadlines.remove(entries[3]!);
    deadlines.remove(entries[3]!); // twice: nothing
    vi.advanceTimersByTime(1_000);
    expect(expired).toEqual(['e1', 'e2', 'e4']);
  });

  it('expires at once (on the next turn) an entry whose time has passed already', () => {
    deadlines.add(entry('late'), -5_000);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['late']);
  });

  it("waits out a time beyond setTimeout's limit (~24.8 days) in several timers", () => {
    const month = 30 * 24 * 3600 * 1000;
    deadlines.add(entry('in a month'), month);
    vi.advanceTimersByTime(month - 1);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['in a month']);
  });

  it('keeps its order through many adds and removes: each entry left expires at its own time, no other does', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const start = Date.now();
    const at = new Map<string, number>();
    const timed = new Deadlines<Entry>(
      (e) => at.set(e.name, Date.now() - start),
      () => Date.now(),
    );
    const live = new Map<Entry, number>();
    for (let i = 0; i < 2_000; i++) {
      if (live.size > 0 && random() < 0.4) {
        const gone = [...live.keys()][Math.floor(random() * live.size)]!;
        timed.remove(gone);
        live.delete(gone);
      } else {
        const e = entry(`e${i}`);
        const ms = Math.floor(random() * 10_000);
        timed.add(e, ms);
        live.set(e, ms);
      }
    }
    expect(timed.size).toBe(live.size);
    vi.advanceTimersByTime(10_000);
    expect(at).toEqual(new Map([...live].map(([e, ms]) => [e.name, ms])));
  });

  it('expires at once an entry whose time is not a number, and the others still at theirs', () => {
    deadlines.add(entry('later'), 200);
    deadlines.add(entry('unreadable'), Number.NaN);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['unreadable']);
    vi.advanceTimersByTime(199);
    expect(expired).toEqual(['unreadable', 'later']);
  });

  it('expires nothing once closed', () => {
    deadlines.add(entry('a'), 100);
    deadlines.close();
    vi.advanceTimersByTime(1_000);
    expect(expired).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
