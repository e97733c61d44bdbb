/**
 * What each process of the agent-loop bench measures about itself, the same way for the floor and the
 * runtime: steps per second from the moment the work starts, CPU time of the process per step
 * (`process.cpuUsage`, user + system, every thread), and the peak resident set size of its whole life.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import v8 from 'node:v8';

/**
 * The process's own peak resident set, in KB: Linux's high-water mark of its memory since it was
 * started (VmHWM). Not getrusage's maxRSS, which Linux carries across exec: a child reports at least
 * its parent's resident set at the fork (~280 MB after the rest of `npm run bench`), whatever it used.
 */
function peakRssKb(): number {
  const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(fs.existsSync('/proc/self/status') ? fs.readFileSync('/proc/self/status', 'utf8') : '');
  return hwm ? Number(hwm[1]) : process.resourceUsage().maxRSS;
}

/** Model calls per run: the stand-in asks for one tool call in each answer but the last. */
export const TURNS = 6;
/** Steps per run: the model calls and the tool steps between them. */
export const STEPS_PER_RUN = 2 * TURNS - 1;

export interface AgentLoopFigures {
  steps: number;
  seconds: number;
  stepsPerSecond: number;
  cpuMsPerStep: number;
  peakRssMb: number;
  /** The largest V8 heap (heapTotal) and memory outside it (external + array buffers) seen, sampled every 250 ms. */
  peakHeapMb: number;
  peakExternalMb: number;
  /** Transactions the database committed per step (counted by the bench from the outside). */
  commitsPerStep?: number;
}

/**
 * Counts a step done and, at the counts BENCH_AGENT_LOOP_SNAPSHOT names, takes a heap snapshot to
 * bench/results/profiles/<name>-<steps>.heapsnapshot (`name`: the process's --name, its side, case and
 * round: <floor|fetch-floor|runtime>-<in flight>-<L ms>-<round>): `1` is halfway (every run in flight),
 * `N,M…` after N steps, after M… Both sides take them at the same counts, so two snapshots tell what
 * one holds that the other does not, and two of one side what its live heap gained in between.
 */
export function stepCounter(name: string, runs: number): { step: () => void; readonly steps: number } {
  const at = (process.env.BENCH_AGENT_LOOP_SNAPSHOT ?? '')
    .split(',')
    .filter(Boolean)
    .map(Number)
    .map((n) => (n === 1 ? Math.floor((runs * STEPS_PER_RUN) / 2) : n));
  let steps = 0;
  return {
    get steps() {
      return steps;
    },
    step() {
      if (!at.includes(++steps)) return;
      fs.mkdirSync(new URL('results/profiles/', import.meta.url), { recursive: true });
      if (liveAt) return liveAt(steps);
      v8.writeHeapSnapshot(new URL(`results/profiles/${name}-${steps}.heapsnapshot`, import.meta.url).pathname);
    },
  };
}

/** The value of `--name=value` on the command line. */
export function arg(name: string): string {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (found === undefined) throw new Error(`--${name}= is required`);
  return found.slice(name.length + 3);
}

/** Runs `work`, timed from when it calls `started` until it resolves with the number of steps done. */
export async function measure(work: (started: () => void) => Promise<number>): Promise<AgentLoopFigures> {
  let t0 = 0;
  let cpu0: NodeJS.CpuUsage | undefined;
  let heap = 0;
  let external = 0;
  const sample = setInterval(() => {
    const m = process.memoryUsage();
    heap = Math.max(heap, m.heapTotal);
    external = Math.max(external, m.external + m.arrayBuffers);
  }, 250);
  const steps = await work(() => {
    if (cpu0) return;
    t0 = performance.now();
    cpu0 = process.cpuUsage();
  });
  clearInterval(sample);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return {
    steps,
    seconds: Number(seconds.toFixed(3)),
    stepsPerSecond: Math.round(steps / seconds),
    cpuMsPerStep: Number(((cpu.user + cpu.system) / 1000 / steps).toFixed(3)),
    peakRssMb: Math.round(peakRssKb() / 1024),
    peakHeapMb: Math.round(heap / 2 ** 20),
    peakExternalMb: Math.round(external / 2 ** 20),
  };
}

/** With BENCH_AGENT_LOOP_PROFILE=live, what stepCounter does at its counts instead of a heap snapshot. */
let liveAt: ((steps: number) => void) | undefined;

/**
 * BENCH_AGENT_LOOP_PROFILE=alloc|promoted|live: starts V8's sampling heap profiler. `alloc` counts every
 * allocation, the collected ones included (what a side allocates per step); `promoted` only what
 * outlived a young-generation collection: what a call keeps across its wait for the model, which fills
 * the old generation and sets how far the heap grows between full collections (the peak RSS). The
 * function it returns writes bench/results/profiles/<name>.<alloc|promoted>.heapprofile (`name` as
 * stepCounter's); undefined when not asked for. `live`: what is alive at the BENCH_AGENT_LOOP_SNAPSHOT
 * counts instead of a snapshot there, by the stack that allocated it (sampled every 4 KB), to
 * <name>-<steps>.live.heapprofile: where the live heap of one side comes from, next to the other's.
 */
export async function allocationProfile(name: string): Promise<(() => Promise<void>) | undefined> {
  const kind = process.env.BENCH_AGENT_LOOP_PROFILE;
  if (kind !== 'alloc' && kind !== 'promoted' && kind !== 'live') return undefined;
  const session = new Session();
  session.connect();
  const dir = new URL('results/profiles/', import.meta.url);
  if (kind === 'live') {
    await session.post('HeapProfiler.startSampling', { samplingInterval: 4_096 });
    liveAt = (steps) =>
      void session
        .post('HeapProfiler.collectGarbage')
        .then(() => session.post('HeapProfiler.getSamplingProfile'))
        .then(({ profile }) => fs.writeFileSync(new URL(`${name}-${steps}.live.heapprofile`, dir), JSON.stringify(profile)))
        .catch((e: unknown) => process.stderr.write(`live profile at ${steps} steps: ${(e as Error).message}\n`));
    return async () => {
      await session.post('HeapProfiler.stopSampling');
      session.disconnect();
    };
  }
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 32_768,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: kind === 'alloc',
  });
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    session.disconnect();
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(new URL(`${name}.${kind}.heapprofile`, dir), JSON.stringify(profile));
  };
}

/**
 * Resident memory by mapping at the end: a file's by its name, an anonymous one by its permissions and
 * size. V8 maps its heap in pages of 256 KB (the `<1MB` ones), glibc's malloc its main arena as [heap]
 * and each other arena in 64 MB reservations (`>=60MB`); thread stacks are the `1-60MB` ones.
 */
export function residentByMapping(side: string): void {
  const kinds: Record<string, number> = {};
  let kind = '';
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2]!, 16) - parseInt(head[1]!, 16)) / 2 ** 20;
      kind = head[4] ? head[4].replace(/.*\//, '') : `anon ${head[3]} ${size >= 60 ? '>=60MB' : size >= 1 ? '1-60MB' : '<1MB'}`;
    } else if (line.startsWith('Rss:')) kinds[kind] = (kinds[kind] ?? 0) + Number(line.split(/\s+/)[1]);
  }
  const m = process.memoryUsage();
  const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
  process.stderr.write(
    `trace ${side} memory at the end: rss ${mb(m.rss)} MB, heap total ${mb(m.heapTotal)} MB, external ${mb(m.external)} MB; resident by mapping (MB): ${Object.entries(
      kinds,
    )
      .filter(([, kb]) => kb > 1024)
      .sort((a, b) => b[1] - a[1])
      .map(([k, kb]) => `${k} ${Math.round(kb / 1024)}`)
      .join(', ')}\n`,
  );
}
