import { describe, expect, it } from 'vitest';
import { ToolUseIds } from '../../src/core/tool-use-ids.ts';
import { elementsCapacity } from '../support/heap-snapshot.ts';

describe('ToolUseIds', () => {
  it('tells the step that first made an id, and nothing of an id not made', () => {
    const ids = new ToolUseIds();
    ids.add('toolu_a', 1);
    ids.add('toolu_b', 1);
    ids.add('toolu_c', 3);
    expect([ids.firstSeq('toolu_a'), ids.firstSeq('toolu_b'), ids.firstSeq('toolu_c')]).toEqual([1, 1, 3]);
    expect(ids.firstSeq('toolu_d')).toBeUndefined();
    expect(ids.firstSeq('1')).toBeUndefined(); // a seq is not an id
  });

  it('keeps every id when there are many, those from before included', () => {
    const ids = new ToolUseIds();
    for (let i = 0; i < 1_000; i++) ids.add(`toolu_${i}`, 2 * i + 1);
    for (let i = 0; i < 1_000; i += 37) expect(ids.firstSeq(`toolu_${i}`)).toBe(2 * i + 1);
    expect(ids.firstSeq('toolu_1000')).toBeUndefined();
  });

  it('finds every id across the change from the array to the map, the last in the array included', () => {
    const ids = new ToolUseIds();
    for (let i = 1; i <= 32; i++) ids.add(`toolu_${i}`, i);
    expect(ids.firstSeq('toolu_32')).toBe(32);
    expect((ids as unknown as { map: unknown }).map).toBeNull();
    ids.add('toolu_33', 33);
    expect((ids as unknown as { map: unknown }).map).not.toBeNull();
    for (let i = 1; i <= 33; i++) expect(ids.firstSeq(`toolu_${i}`)).toBe(i);
    expect(ids.firstSeq('toolu_34')).toBeUndefined();
  });

  it('holds a few ids in an array made to their size', async () => {
    const ids = new ToolUseIds();
    for (let i = 0; i < 5; i++) ids.add(`toolu_${i}`, i);
    const pairs = (ids as unknown as { pairs: unknown[] }).pairs;
    expect(pairs).toHaveLength(10);
    expect(await elementsCapacity(pairs)).toBe(10);
  });
});
