/**
 * Whether strings kept by live objects are ropes, read from a heap snapshot of this process: a string
 * built by concatenation is a tree of them (one per piece joined), one flattened in place is a single
 * concatenation of its flat text and an empty string, a flat one none.
 */
import v8 from 'node:v8';
import { heapSnapshot } from './heap-snapshot.ts';

/**
 * The concatenations each string at `field` of a live object named `holder` (a class's name, or
 * "Object") is made of, for every such string whose text contains `marker`: 0 or 1 for a flat one.
 */
export async function ropePieces(holder: string, field: string, marker: string): Promise<number[]> {
  const { nodes, typeOf, nameOf, edgesOf } = await heapSnapshot();
  const rope = (n: number) => edgesOf(n).filter((e) => e.name === 'first' || e.name === 'second');
  const pieces = (n: number): number => (typeOf(n) === 'concatenated string' ? 1 + rope(n).reduce((sum, e) => sum + pieces(e.to), 0) : 0);
  // A concatenation is named as such in the snapshot: its text is its pieces'.
  const text = (n: number): string =>
    typeOf(n) === 'concatenated string'
      ? rope(n)
          .map((e) => text(e.to))
          .join('')
      : nameOf(n);
  const found: number[] = [];
  for (const n of nodes()) {
    if (typeOf(n) !== 'object' || nameOf(n) !== holder) continue;
    const held = edgesOf(n).find((e) => e.name === field);
    if (held && typeOf(held.to)!.includes('string') && text(held.to).includes(marker)) found.push(pieces(held.to));
  }
  return found;
}

/**
 * Has V8 optimize `f` with TurboFan at its next call, as it would in a busy process, after `warmUp`
 * called it: there a read whose result goes unused is dropped, which the interpreter would do. Whether
 * it was: `optimized(f)` after that call.
 */
export function optimizeNextCall(f: (...args: never[]) => unknown, warmUp: () => void): void {
  natives('%PrepareFunctionForOptimization(f)')(f);
  warmUp();
  warmUp();
  natives('%OptimizeFunctionOnNextCall(f)')(f);
}

/** Whether V8 runs `f` optimized now (bit 4 of %GetOptimizationStatus). */
export function optimized(f: (...args: never[]) => unknown): boolean {
  return ((natives('return %GetOptimizationStatus(f)')(f) as number) & 16) !== 0;
}

/** A function of `f` in V8's own syntax (its natives); the flag that allows it stays set in this process. */
function natives(code: string): (f: unknown) => unknown {
  v8.setFlagsFromString('--allow-natives-syntax');
  return new Function('f', code) as (f: unknown) => unknown;
}
