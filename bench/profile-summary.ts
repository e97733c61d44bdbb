/**
 * `tsx bench/profile-summary.ts file.cpuprofile [top]`: where a CPU profile (node --cpu-prof) spent its
 * time — self time by package or source file, then the heaviest functions — to read the agent-loop
 * bench's profiles (BENCH_AGENT_LOOP_PROFILE=cpu) without a browser.
 */
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const file = process.argv[2];
if (!file) throw new Error('usage: tsx bench/profile-summary.ts file.cpuprofile [top]');
const top = Number(process.argv[3] ?? 25);
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

/** node_modules/<package>, src/<file>, node:<module>, or the frame's kind ((garbage collector), (program)…). */
function where(n: Node): string {
  const url = n.callFrame.url;
  if (!url) return n.callFrame.functionName || '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url;
  const s = /\/(src|dist|bench|test)\/(.*)$/.exec(url);
  return s ? `${s[1]}/${s[2]}` : url;
}

function table(title: string, key: (n: Node) => string): void {
  const sums = new Map<string, number>();
  for (const [id, t] of self) {
    const k = key(byId.get(id)!);
    sums.set(k, (sums.get(k) ?? 0) + t);
  }
  console.log(`\n${title} (of ${(total / 1000).toFixed(0)} ms sampled)`);
  for (const [k, t] of [...sums].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${((100 * t) / total).toFixed(1).padStart(6)}%  ${k}`);
}

table('self time by package or file', where);
table('self time by function', (n) => `${n.callFrame.functionName || '(anonymous)'}  ${where(n)}:${n.callFrame.lineNumber + 1}`);

// Inclusive time: a function counts every sample in which it is on the stack (once, however deep).
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const inclusive = new Map<string, number>();
for (const [id, t] of self) {
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur)!;
    if (!/\/(src|dist|bench)\//.test(n.callFrame.url)) continue;
    const k = `${n.callFrame.functionName || '(anonymous)'}  ${where(n)}:${n.callFrame.lineNumber + 1}`;
    if (seen.has(k)) continue;
    seen.add(k);
    inclusive.set(k, (inclusive.get(k) ?? 0) + t);
  }
}
console.log(`\ninclusive time of the project's functions`);
for (const [k, t] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${((100 * t) / total).toFixed(1).padStart(6)}%  ${k}`);
