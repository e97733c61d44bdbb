import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_MS, timerSleeper } from '../../src/util/sleep.ts';

describe('timerSleeper', () => {
  afterEach(() => {
    // In this order: the spy was put on the fake setTimeout, so it is taken off before the real one is back.
    vi.restoreAllMocks();
    vi.useRealTimers();
  });

  it('never arms a timer of 2^31 ms or more, and still waits the whole of a longer wait', async () => {
    vi.useFakeTimers();
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    let woke = false;
    const sleeping = timerSleeper.sleep(2 ** 31 + 5_000).then(() => (woke = true));
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS);
    expect(woke).toBe(false);
    await vi.advanceTimersByTimeAsync(5_001);
    await sleeping;
    expect(woke).toBe(true);
    const delays = setTimeoutSpy.mock.calls.map((call) => call[1] ?? 0);
    expect(delays.length).toBeGreaterThanOrEqual(2);
    for (const d of delays) expect(d).toBeLessThanOrEqual(MAX_TIMER_MS);
  });

  it('waits, and rejects with the reason as soon as the signal aborts', async () => {
    const started = Date.now();
    await timerSleeper.sleep(20);
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    const controller = new AbortController();
    const sleeping = timerSleeper.sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(sleeping).rejects.toThrow('stop');
  });
});
