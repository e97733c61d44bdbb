import { describe, expect, it } from 'vitest';
import { sharedWhileRunning } from '../../src/api/routes-overview.ts';

describe('sharedWhileRunning (one overview read at a time, however many dashboards ask)', () => {
  it('gives the calls made during a read that read, and starts a new one after it settles', async () => {
    const finishers: ((v: number) => void)[] = [];
    const read = sharedWhileRunning(() => new Promise<number>((resolve) => finishers.push(resolve)));
    const a = read();
    const b = read();
    expect(a).toBe(b);
    expect(finishers).toHaveLength(1);
    finishers[0]!(1);
    expect(await a).toBe(1);
    const c = read();
    expect(finishers).toHaveLength(2);
    finishers[1]!(2);
    expect(await c).toBe(2);
  });

  it('does not keep a failure: the next call reads again', async () => {
    let calls = 0;
    const read = sharedWhileRunning(async () => {
      calls++;
      if (calls === 1) throw new Error('database down');
      return 'ok';
    });
    await expect(read()).rejects.toThrow('database down');
    await expect(read()).resolves.toBe('ok');
    expect(calls).toBe(2);
  });
});
