import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineList } from '../../src/util/deadline-list.ts';

/** A list of 1 s deadlines, and what it expired, in order. */
function expiring() {
  const expired: string[] = [];
  return { expired, list: new DeadlineList<string>(1_000, (item) => expired.push(item)) };
}

describe('DeadlineList', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('expires each entry its length after it was added, in order, on one timer', () => {
    const { expired, list } = expiring();
    list.add('a');
    vi.advanceTimersByTime(400);
    list.add('b');
    list.add('c');
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(599);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['a']);
    vi.advanceTimersByTime(399);
    expect(expired).toEqual(['a']);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['a', 'b', 'c']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never expires a deleted entry, and keeps no timer once none is left', () => {
    const { expired, list } = expiring();
    list.add('a');
    vi.advanceTimersByTime(500);
    list.add('b');
    list.delete('a');
    vi.advanceTimersByTime(600);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(400);
    expect(expired).toEqual(['b']);
    list.add('c');
    list.delete('c');
    list.delete('never added');
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5_000);
    expect(expired).toEqual(['b']);
  });

  it('counts an entry added again from its second add', () => {
    const { expired, list } = expiring();
    list.add('a');
    list.add('b');
    vi.advanceTimersByTime(500);
    list.add('a');
    vi.advanceTimersByTime(500);
    expect(expired).toEqual(['b']);
    vi.advanceTimersByTime(500);
    expect(expired).toEqual(['b', 'a']);
  });
});
