/**
 * Whether strings kept by live objects are ropes, read from a heap snapshot of this process: a string
 * built by concatenation is a tree of them (one per piece joined), one flattened in place is a single
 * concatenation of its flat text and an empty string, a flat one none.
 */
import v8 from 'node:v8';

/**
 * The concatenations each string at `field` of a live object named `holder` (a class's name, or
 * "Object") is made of, for every such string whose text contains `marker`: 0 or 1 for a flat one.
 */
export async function ropePieces(holder: string, field: string, marker: string): Promise<number[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of v8.getHeapSnapshot()) chunks.push(chunk as Buffer);
  const snapshot = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const { meta } = snapshot.snapshot;
  const [NF, EF] = [meta.node_fields.length, meta.edge_fields.length];
  const [TYPE, NAME, EDGES] = ['type', 'name', 'edge_count'].map((f) => meta.node_fields.indexOf(f)) as [number, number, number];
  const [EDGE_NAME, TO] = ['name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f)) as [number, number];
  const { nodes, edges, strings } = snapshot;
  const firstEdge = new Map<number, number>();
  for (let n = 0, e = 0; n < nodes.length; e += nodes[n + EDGES]! * EF, n += NF) firstEdge.set(n, e);
  const typeOf = (n: number) => meta.node_types[0][nodes[n + TYPE]!];
  const edgesOf = (n: number) =>
    Array.from({ length: nodes[n + EDGES]! }, (_, i) => firstEdge.get(n)! + i * EF).map((e) => ({
      name: strings[edges[e + EDGE_NAME]!],
      to: edges[e + TO]!,
    }));
  const rope = (n: number) => edgesOf(n).filter((e) => e.name === 'first' || e.name === 'second');
  const pieces = (n: number): number => (typeOf(n) === 'concatenated string' ? 1 + rope(n).reduce((sum, e) => sum + pieces(e.to), 0) : 0);
  // A concatenation is named as such in the snapshot: its text is its pieces'.
  const text = (n: number): string =>
    typeOf(n) === 'concatenated string'
      ? rope(n)
          .map((e) => text(e.to))
          .join('')
      : strings[nodes[n + NAME]!]!;
  const found: number[] = [];
  for (let n = 0; n < nodes.length; n += NF) {
    if (typeOf(n) !== 'object' || strings[nodes[n + NAME]!] !== holder) continue;
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
