import { describe, expect, it } from 'vitest';
import { WriteBatches, type WriteAll } from '../../src/util/write-batches.ts';
import { nextTurn } from '../support/wait-for.ts';

interface Item {
  run: string;
  value: number;
}

/** A writeAll that records each batch and answers when told to. */
function recorder(answer: (items: readonly Item[]) => readonly (number | Error)[] | Error = (items) => items.map((i) => i.value * 10)) {
  const batches: string[][] = [];
  const waiting: (() => void)[] = [];
  const writeAll: WriteAll<Item, number> = (items) => {
    batches.push(items.map((i) => `${i.run}:${i.value}`));
    return new Promise((resolve, reject) => {
      waiting.push(() => {
        const out = answer(items);
        if (out instanceof Error) reject(out);
        else resolve(out);
      });
    });
  };
  const release = async () => {
    while (waiting.length) waiting.shift()!();
    await nextTurn();
  };
  return { batches, writeAll, release };
}

const dbError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

describe('WriteBatches', () => {
  it('sends a lone write at once, and what arrives while slots are busy together in the next batch', async () => {
    const r = recorder();
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 1, maxItems: 10 });
    const first = batches.write({ run: 'a', value: 1 });
    expect(r.batches).toEqual([['a:1']]);
    const rest = [batches.write({ run: 'b', value: 2 }), batches.write({ run: 'c', value: 3 })];
    expect(r.batches).toHaveLength(1);
    await r.release();
    expect(r.batches).toEqual([['a:1'], ['b:2', 'c:3']]);
    await r.release();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30]);
  });

  it('puts a run in a batch at most once, keeps each run in order, and caps a batch at maxItems', async () => {
    const r = recorder();
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 1, maxItems: 2 });
    const all = [
      batches.write({ run: 'x', value: 0 }),
      ...[1, 2, 3, 4].map((v) => batches.write({ run: v === 2 ? 'a' : String.fromCharCode(96 + v), value: v })),
    ];
    for (let i = 0; i < 4; i++) await r.release();
    expect(r.batches).toEqual([['x:0'], ['a:1', 'c:3'], ['a:2', 'd:4']]);
    expect(await Promise.all(all)).toEqual([0, 10, 20, 30, 40]);
  });

  it("gives each write its own outcome, an error value becoming that write's rejection", async () => {
    const r = recorder((items) => items.map((i) => (i.value === 2 ? new Error('lease lost') : i.value)));
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 1, maxItems: 10 });
    const all = Promise.allSettled([1, 2, 3].map((v) => batches.write({ run: `r${v}`, value: v })));
    await r.release();
    await r.release();
    expect(await all).toEqual([
      { status: 'fulfilled', value: 1 },
      { status: 'rejected', reason: new Error('lease lost') },
      { status: 'fulfilled', value: 3 },
    ]);
  });

  it('tries each write alone when the batch failed on what one of them held, and fails every write on any other error', async () => {
    const refused = recorder((items) => (items.length > 1 || items[0]!.value === 2 ? dbError('23505') : items.map((i) => i.value)));
    const batches = new WriteBatches(refused.writeAll, { maxInFlight: 1, maxItems: 10 });
    const all = Promise.allSettled([0, 1, 2, 3].map((v) => batches.write({ run: `r${v}`, value: v })));
    // One release a statement: the singles go one after another, in the failed batch's slot.
    for (let i = 0; i < 5; i++) await refused.release();
    const settled = await all;
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(refused.batches).toEqual([['r0:0'], ['r1:1', 'r2:2', 'r3:3'], ['r1:1'], ['r2:2'], ['r3:3']]);

    const down = recorder((items) => (items.length > 1 ? dbError('57P01') : items.map((i) => i.value)));
    const b2 = new WriteBatches(down.writeAll, { maxInFlight: 1, maxItems: 10 });
    const all2 = Promise.allSettled([0, 1, 2].map((v) => b2.write({ run: `r${v}`, value: v })));
    for (let i = 0; i < 3; i++) await down.release();
    expect((await all2).map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(down.batches).toEqual([['r0:0'], ['r1:1', 'r2:2']]);
  });

  it("holds a run's next write while its last is in flight, and sends other runs' meanwhile", async () => {
    const r = recorder();
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 4, maxItems: 10 });
    const all = Promise.all([
      batches.write({ run: 'a', value: 1 }),
      batches.write({ run: 'a', value: 2 }),
      batches.write({ run: 'b', value: 3 }),
    ]);
    expect(r.batches).toEqual([['a:1'], ['b:3']]);
    await r.release();
    expect(r.batches).toEqual([['a:1'], ['b:3'], ['a:2']]);
    await r.release();
    expect(await all).toEqual([10, 20, 30]);
  });

  it('fails alone a write that cannot be serialized, and every write of a batch whose outcomes do not match it', async () => {
    const r = recorder((items) => items.slice(1).map((i) => i.value));
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 1, maxItems: 10 });
    await expect(batches.write({ run: 'x', value: 10n as unknown as number })).rejects.toThrow(/BigInt/);
    const all = Promise.allSettled([batches.write({ run: 'a', value: 1 }), batches.write({ run: 'b', value: 2 })]);
    await r.release();
    await r.release();
    expect((await all).map((s) => s.status)).toEqual(['rejected', 'rejected']);
  });

  it('fails alone a write that cannot be serialized after waiting for a slot with others', async () => {
    const r = recorder();
    const batches = new WriteBatches(r.writeAll, { maxInFlight: 1, maxItems: 10 });
    const first = batches.write({ run: 'p', value: 5 });
    const waiting = Promise.allSettled([
      batches.write({ run: 'q', value: 6 }),
      batches.write({ run: 'y', value: 7n as unknown as number }),
      batches.write({ run: 'r', value: 8 }),
    ]);
    await r.release();
    await r.release();
    expect(r.batches).toEqual([['p:5'], ['q:6', 'r:8']]);
    expect(await first).toBe(50);
    expect((await waiting).map((s) => (s.status === 'fulfilled' ? s.value : String(s.reason)))).toEqual([
      60,
      expect.stringMatching(/BigInt/),
      80,
    ]);
  });
});
