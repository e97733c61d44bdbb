import { describe, expect, it } from 'vitest';
import { sharedWhileRunning } from '../../src/api/routes-overview.ts';

describe('sharedWhileRunning (one overview read at a time, however many dashboards ask)', () => {
  it('gives the calls made during a read that read, and starts a new one after it settles', async () => {
    const finishers: ((v: number) => void)[] = [];
    const read = sharedWhileRunning((_key: string) => new Promise<number>((resolve) => finishers.push(resolve)));
    const a = read('acme');
    const b = read('acme');
    expect(a).toBe(b);
    expect(finishers).toHaveLength(1);
    finishers[0]!(1);
    expect(await a).toBe(1);
    const c = read('acme');
    expect(finishers).toHaveLength(2);
    finishers[1]!(2);
    expect(await c).toBe(2);
  });

  it("keeps each key's read apart: one tenant's figures are never another's", async () => {
    const read = sharedWhileRunning(async (tenant: string | null) => `figures of ${tenant ?? 'everyone'}`);
    const [a, b, all] = await Promise.all([read('acme'), read('globex'), read(null)]);
    expect([a, b, all]).toEqual(['figures of acme', 'figures of globex', 'figures of everyone']);
  });

  it('does not keep a failure: the next call reads again', async () => {
    let calls = 0;
    const read = sharedWhileRunning(async (_key: null) => {
      calls++;
      if (calls === 1) throw new Error('database down');
      return 'ok';
    });
    await expect(read(null)).rejects.toThrow('database down');
    await expect(read(null)).resolves.toBe('ok');
    expect(calls).toBe(2);
  });
});
