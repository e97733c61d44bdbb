import { describe, expect, it } from 'vitest';
import { Semaphore } from '../../src/tools/semaphore.ts';
import { nextTurn } from '../support/wait-for.ts';

describe('Semaphore', () => {
  it('lets `size` holders in, then one more for each place given back, in order', async () => {
    const s = new Semaphore(2);
    const a = await s.acquire();
    await s.acquire();
    const order: string[] = [];
    const c = s.acquire().then((r) => (order.push('c'), r));
    const d = s.acquire().then((r) => (order.push('d'), r));
    await nextTurn();
    expect(order).toEqual([]);
    a();
    a(); // giving a place back twice frees it once
    (await c)();
    await d;
    expect(order).toEqual(['c', 'd']);
  });

  it('gives up a wait when its signal aborts, and the place goes to the next in line', async () => {
    const s = new Semaphore(1);
    const held = await s.acquire();
    const controller = new AbortController();
    const abandoned = s.acquire(controller.signal);
    const next = s.acquire();
    controller.abort(new Error('stopped'));
    await expect(abandoned).rejects.toThrow('stopped');
    held();
    await expect(next).resolves.toBeTypeOf('function');
  });

  it("refuses a signal aborted already with a rejection (the signal's reason), not a throw", async () => {
    const controller = new AbortController();
    controller.abort(new Error('stopped before'));
    const refused = new Semaphore(1).acquire(controller.signal);
    await expect(refused).rejects.toThrow('stopped before');
  });
});
