/**
 * `tsx bench/snapshot-summary.ts a.heapsnapshot [b.heapsnapshot] [--per=N] [--top=N]`: what a heap
 * snapshot holds, by kind of object (a constructor's name; closures, strings, code and V8's internal
 * arrays each as one kind), in bytes and counts. With two, what the first holds beyond the second, kind
 * by kind: to read the agent-loop bench's snapshots (BENCH_AGENT_LOOP_SNAPSHOT) of the runtime against
 * the floor's at the same step count. `--per=N` divides the differences by N (the runs in flight), so
 * the table reads in bytes a run.
 */
import fs from 'node:fs';

interface Kinds {
  total: number;
  bySize: Map<string, { bytes: number; count: number }>;
}

function kinds(file: string): Kinds {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const bySize = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const name = snap.strings[snap.nodes[i + nameAt]!]!;
    const size = snap.nodes[i + sizeAt]!;
    const kind =
      type === 'object' || type === 'native' || type === 'hidden' || type === 'array'
        ? `${name.slice(0, 60)}${type === 'object' ? '' : ` (${type})`}`
        : type.includes('string')
          ? '(strings)'
          : `(${type})`;
    const k = bySize.get(kind) ?? { bytes: 0, count: 0 };
    k.bytes += size;
    k.count++;
    bySize.set(kind, k);
    total += size;
  }
  return { total, bySize };
}

const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const option = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
if (files.length < 1 || files.length > 2) {
  throw new Error('usage: tsx bench/snapshot-summary.ts a.heapsnapshot [b.heapsnapshot] [--per=N] [--top=N]');
}
const per = option('per', 1);
const top = option('top', 40);
const a = kinds(files[0]!);
const b = files[1] ? kinds(files[1]) : { total: 0, bySize: new Map<string, { bytes: number; count: number }>() };
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(2);
const unit = per === 1 ? 'MB' : `bytes a unit of ${per}`;
const shown = (bytes: number) => (per === 1 ? mb(bytes) : (bytes / per).toFixed(0));
console.log(
  `${files[0]}: ${mb(a.total)} MB${files[1] ? `; ${files[1]}: ${mb(b.total)} MB; difference ${shown(a.total - b.total)} ${unit}` : ''}`,
);
const rows = [...new Set([...a.bySize.keys(), ...b.bySize.keys()])].map((kind) => {
  const x = a.bySize.get(kind) ?? { bytes: 0, count: 0 };
  const y = b.bySize.get(kind) ?? { bytes: 0, count: 0 };
  return { kind, bytes: x.bytes - y.bytes, count: x.count - y.count };
});
for (const r of rows.sort((p, q) => Math.abs(q.bytes) - Math.abs(p.bytes)).slice(0, top)) {
  const count = per === 1 ? String(r.count) : (r.count / per).toFixed(2);
  console.log(`${shown(r.bytes).padStart(10)} ${unit === 'MB' ? 'MB' : 'B'} ${count.padStart(10)} × ${r.kind}`);
}
