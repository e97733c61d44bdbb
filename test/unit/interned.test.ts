import { describe, expect, it } from 'vitest';
import { Interned } from '../../src/core/interned.ts';
import { distinctInHeap } from '../support/heap-snapshot.ts';

/** As the database driver makes them: a new string for each value read. */
const read = (s: string) => Buffer.from(s).toString('utf8');

describe('Interned', () => {
  it('gives back one copy of equal strings read apart', async () => {
    const names = new Interned();
    const apart = [read('claude-sonnet-4-6'), read('claude-sonnet-4-6'), read('support-agent'), read('support-agent')];
    expect(await distinctInHeap(apart)).toBe(4);
    const kept = apart.map((s) => names.of(s));
    expect(kept).toEqual(apart);
    expect(await distinctInHeap(kept)).toBe(2);
    expect(names.of(null)).toBeNull();
  });

  it('holds no more than its size, starting over, and shares copies again after', async () => {
    const names = new Interned(3);
    for (let i = 0; i < 10; i++) expect(names.of(read(`worker-${i}`))).toBe(`worker-${i}`);
    expect(names.size).toBeLessThanOrEqual(3);
    const again = [names.of(read('worker-9')), names.of(read('worker-9'))];
    expect(await distinctInHeap(again)).toBe(1);
  });
});
