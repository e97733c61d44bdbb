/** A heap snapshot of this process, read: its nodes with their type, name, size and outgoing edges. */
import v8 from 'node:v8';

export interface HeapSnapshot {
  /** Every node, as its index into the snapshot's node array. */
  nodes(): Iterable<number>;
  typeOf(n: number): string;
  /** A string's text (as far as the snapshot keeps it); an object's constructor name. */
  nameOf(n: number): string;
  sizeOf(n: number): number;
  edgesOf(n: number): { name: string; to: number }[];
}

export async function heapSnapshot(): Promise<HeapSnapshot> {
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
  const [TYPE, NAME, SIZE, EDGES] = ['type', 'name', 'self_size', 'edge_count'].map((f) => meta.node_fields.indexOf(f)) as [
    number,
    number,
    number,
    number,
  ];
  const [EDGE_TYPE, EDGE_NAME, TO] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const { nodes, edges, strings } = snapshot;
  const firstEdge = new Map<number, number>();
  for (let n = 0, e = 0; n < nodes.length; e += nodes[n + EDGES]! * EF, n += NF) firstEdge.set(n, e);
  // Element and hidden edges are named by their index, the others by a string.
  const byIndex = new Set(['element', 'hidden']);
  const edgeTypes = (meta as unknown as { edge_types: [string[]] }).edge_types[0];
  return {
    *nodes() {
      for (let n = 0; n < nodes.length; n += NF) yield n;
    },
    typeOf: (n) => meta.node_types[0][nodes[n + TYPE]!]!,
    nameOf: (n) => strings[nodes[n + NAME]!]!,
    sizeOf: (n) => nodes[n + SIZE]!,
    edgesOf: (n) =>
      Array.from({ length: nodes[n + EDGES]! }, (_, i) => firstEdge.get(n)! + i * EF).map((e) => ({
        name: byIndex.has(edgeTypes[edges[e + EDGE_TYPE]!]!) ? String(edges[e + EDGE_NAME]) : strings[edges[e + EDGE_NAME]!]!,
        to: edges[e + TO]!,
      })),
  };
}

/**
 * What `read` finds in the backing store of `array`'s elements, in a snapshot taken while a probe (the
 * one object with a property of its name) holds the array.
 */
async function probeElements<T>(array: unknown[], read: (heap: HeapSnapshot, elements: number) => T): Promise<T> {
  (globalThis as { heapProbe?: unknown }).heapProbe = { heapSnapshotProbe: array };
  try {
    const heap = await heapSnapshot();
    for (const n of heap.nodes()) {
      if (heap.typeOf(n) !== 'object') continue;
      const held = heap.edgesOf(n).find((e) => e.name === 'heapSnapshotProbe');
      if (held) return read(heap, heap.edgesOf(held.to).find((e) => e.name === 'elements')!.to);
    }
    throw new Error('the probe is not in the snapshot');
  } finally {
    delete (globalThis as { heapProbe?: unknown }).heapProbe;
  }
}

/**
 * The elements `array` has room for, as V8 keeps it: its length, or more when it grew by push (or was
 * made by filter) and kept the room it grew.
 */
export function elementsCapacity(array: unknown[]): Promise<number> {
  // A FixedArray: a map and a length, then one tagged slot per element.
  return probeElements(array, (heap, elements) => (heap.sizeOf(elements) - 16) / 8);
}

/**
 * How many distinct objects in the heap `values` are: strings equal in value may be one string or
 * several, which no comparison in JavaScript can tell.
 */
export function distinctInHeap(values: readonly unknown[]): Promise<number> {
  return probeElements([...values], (heap, elements) => new Set(heap.edgesOf(elements).map((e) => e.to)).size);
}
