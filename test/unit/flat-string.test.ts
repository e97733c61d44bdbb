import { describe, expect, it } from 'vitest';
import { flattenInPlace } from '../../src/util/flat-string.ts';
import { optimized, optimizeNextCall, ropePieces } from '../support/heap-ropes.ts';

/** A string joined from `n` pieces after `marker`, as a stream's deltas are. */
function joined(marker: string, n: number): string {
  let text = marker;
  for (let i = 0; i < n; i++) text += ` piece ${i}`;
  return text;
}

describe('flattenInPlace', () => {
  it('leaves a string joined from many pieces one flat string, interpreted and once V8 has optimized it', async () => {
    const kept = { interpreted: joined('flat-interpreted', 50), optimized: '', left: joined('left-a-rope', 50) };
    flattenInPlace(kept.interpreted);
    optimizeNextCall(flattenInPlace, () => flattenInPlace(joined('warm-up', 10)));
    kept.optimized = joined('flat-optimized', 50);
    flattenInPlace(kept.optimized);
    expect(optimized(flattenInPlace)).toBe(true);
    const [interpreted] = await ropePieces('Object', 'interpreted', 'flat-interpreted');
    const [afterOptimizing] = await ropePieces('Object', 'optimized', 'flat-optimized');
    expect(interpreted).toBeLessThanOrEqual(1);
    expect(afterOptimizing).toBeLessThanOrEqual(1);
    // What the check sees of a string nobody flattened: one concatenation per piece.
    expect(await ropePieces('Object', 'left', 'left-a-rope')).toEqual([50]);
  });
});
