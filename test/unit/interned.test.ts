import { describe, expect, it } from 'vitest';
import { Interned } from '../../src/core/interned.ts';
import { heapSnapshot } from '../support/heap-snapshot.ts';

/** As the database driver makes them: a new string for each value read. */
const read = (s: string) => Buffer.from(s).toString('utf8');

/** How many distinct strings the probe's array holds, by the heap's own count. */
async function distinctStrings(strings: string[]): Promise<number> {
  (globalThis as { internedProbe?: unknown }).internedProbe = { internedStrings: strings };
  try {
    const heap = await heapSnapshot();
    for (const n of heap.nodes()) {
      const held = heap.typeOf(n) === 'object' && heap.edgesOf(n).find((e) => e.name === 'internedStrings');
      if (!held) continue;
      const elements = heap.edgesOf(held.to).find((e) => e.name === 'elements')!.to;
      return new Set(heap.edgesOf(elements).map((e) => e.to)).size;
    }
    throw new Error('the probe is not in the snapshot');
  } finally {
    delete (globalThis as { internedProbe?: unknown }).internedProbe;
  }
}

describe('Interned', () => {
  it('gives back one copy of equal strings read apart', async () => {
    const names = new Interned();
    const apart = [read('claude-sonnet-4-6'), read('claude-sonnet-4-6'), read('support-agent'), read('support-agent')];
    expect(await distinctStrings(apart)).toBe(4);
    const kept = apart.map((s) => names.of(s));
    expect(kept).toEqual(apart);
    expect(await distinctStrings(kept)).toBe(2);
    expect(names.of(null)).toBeNull();
  });

  it('starts over past its size, and still gives back equal strings', () => {
    const names = new Interned(3);
    const values = Array.from({ length: 10 }, (_, i) => read(`worker-${i % 5}`));
    expect(values.map((s) => names.of(s))).toEqual(values);
  });
});
