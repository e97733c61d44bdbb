/**
 * The agent-loop scenario of `npm run bench`: N runs in flight in one process, each making 6 model calls
 * (latency L) to a Messages API stand-in in another process and 5 tool steps, driven by the runtime as
 * a library — next to the floor, the same work with no runtime (its calls over node:http on kept-alive
 * connections as the runtime's are, one autocommitted INSERT per step, a pool of 24), measured in the
 * same bench, in turn, so that all see the same machine. A second floor makes its calls with `fetch`
 * instead, as most code would: the runtime is held to the first, the faster.
 *
 * Each measurement is its own process (its peak RSS is its own): bench/agent-loop-floor.ts and
 * bench/agent-loop-runtime.ts, with the stand-in in bench/agent-loop-standin.ts.
 *
 * BENCH_AGENT_LOOP chooses the cases: `quick` (the default: 100 in flight with no latency, 2,000 with
 * 1 s), `full` (100, 2,000 and 10,000 in flight, each with L = 0 and 1 s), `off`, or a list such as
 * `100@0,2000@1000` (in flight @ latency in ms). BENCH_AGENT_LOOP_REPEATS (default 1 for quick, 3 for
 * full) repeats each case, floor and runtime in turn, and reports the medians: of each side, the repeat
 * with the median steps/s, and the median peak RSS.
 * BENCH_AGENT_LOOP_PROFILE=cpu|heap writes a profile of each runtime process to bench/results/profiles/;
 * `alloc` a sampled profile of everything each process allocates, the collected objects included
 * (<name>.alloc.heapprofile, <name> being <floor|fetch-floor|runtime>-<in flight>-<L ms>-<round>);
 * `promoted` the same of what outlives a young-generation collection only (<name>.promoted.heapprofile);
 * `live` what is alive at the BENCH_AGENT_LOOP_SNAPSHOT counts, by allocating stack (<name>-<steps>.live.heapprofile);
 * `gc` each process's stdout, with V8's line per collection, to <name>.gc.log.
 * BENCH_AGENT_LOOP_SNAPSHOT: heap snapshots of both sides (stepCounter in bench/agent-loop-measure.ts);
 * BENCH_AGENT_LOOP_TRACE: see bench/agent-loop-runtime.ts.
 * Other variables (LEASE_SECONDS, LOG_LEVEL, …) reach the runtime process as its configuration.
 *
 * `tsx bench/agent-loop.ts` runs this scenario alone and merges it into bench/results/latest.json.
 */
import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { RunRecords } from '../src/store/run-records.ts';
import { type AgentLoopFigures, STEPS_PER_RUN } from './agent-loop-measure.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface AgentLoopCase {
  inFlight: number;
  latencyMs: number;
  /** Runs in all: more than in flight when one wave would be too short to time. */
  runs: number;
}

export interface AgentLoopResult extends AgentLoopCase {
  /** The floor over node:http with kept-alive connections: what the targets are against. */
  floor: AgentLoopFigures;
  /** The same floor making its calls with fetch. */
  fetchFloor: AgentLoopFigures;
  runtime: AgentLoopFigures;
  /**
   * runtime ÷ floor: steps/s (target ≥ 0.8) and CPU ms per step of the rows above; peak RSS (target ≤ 1.3)
   * of each side's median peak over the repeats, not of the rows: the repeat with the median steps/s has
   * no reason to have the median peak, and one side's peak moves by 10% from repeat to repeat.
   */
  ratio: { stepsPerSecond: number; cpuMsPerStep: number; peakRss: number };
  /** Each side's median peak RSS over the repeats, in MB: floor, fetch floor, runtime. */
  medianPeakRssMb: { floor: number; fetchFloor: number; runtime: number };
  /** runtime ÷ the fetch floor: steps/s of the rows, peak RSS of the medians (as `ratio`). */
  fetchRatio: { stepsPerSecond: number; peakRss: number };
  /** Each repeat's steps/s (peak RSS): floor, fetch floor, runtime. */
  rounds: string;
}

export type FloorTransport = 'http' | 'fetch';

/** Enough runs that a case lasts several seconds: with no latency, 100 in flight finish a wave in ~1 s. */
const caseOf = (inFlight: number, latencyMs: number): AgentLoopCase => ({
  inFlight,
  latencyMs,
  runs: Math.max(inFlight, latencyMs === 0 ? Math.min(10 * inFlight, 2_000) : Math.min(3 * inFlight, 1_000)),
});

export function agentLoopCases(spec = process.env.BENCH_AGENT_LOOP ?? 'quick'): AgentLoopCase[] {
  if (spec === 'off') return [];
  if (spec === 'quick') return [caseOf(100, 0), caseOf(2_000, 1_000)];
  if (spec === 'full') return [100, 2_000, 10_000].flatMap((n) => [caseOf(n, 0), caseOf(n, 1_000)]);
  return spec.split(',').map((item) => {
    const m = /^(\d+)@(\d+)$/.exec(item.trim());
    if (!m) throw new Error(`BENCH_AGENT_LOOP: "${item}" is not quick, full, off or <in flight>@<latency ms>`);
    return caseOf(Number(m[1]), Number(m[2]));
  });
}

const defaultRepeats = (spec = process.env.BENCH_AGENT_LOOP ?? 'quick') =>
  Number(process.env.BENCH_AGENT_LOOP_REPEATS ?? (spec === 'full' ? 3 : 1));

/** A bench process under tsx, with IPC; `message` is the first it sends, `exited` when it is gone. */
function child<T>(
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; execArgv?: string[]; stdoutFile?: string } = {},
): { process: ChildProcess; message: Promise<T>; exited: Promise<void> } {
  const stdout = opts.stdoutFile === undefined ? 'ignore' : fs.openSync(opts.stdoutFile, 'w');
  const cp = fork(path.join(here, file), args, {
    execArgv: ['--import', 'tsx', ...(opts.execArgv ?? [])],
    env: opts.env ?? process.env,
    stdio: ['ignore', stdout, 'inherit', 'ipc'],
  });
  if (typeof stdout === 'number') fs.closeSync(stdout); // the child has its own
  const message = new Promise<T>((resolve, reject) => {
    cp.once('message', (m) => resolve(m as T));
    cp.once('exit', (code, signal) => reject(new Error(`${file} exited (${signal ?? code}) before reporting`)));
  });
  const exited = new Promise<void>((resolve) => cp.once('exit', () => resolve()));
  return { process: cp, message, exited };
}

/**
 * Transactions committed in the database so far. A backend reports its counts when it goes idle (at
 * most once a second) and when it exits, so this is read once the measured process has exited.
 */
async function commits(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query(`SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = current_database()`);
  return Number(rows[0].n);
}

/** A statement as the trace shows it: its first words, on one line. */
const STATEMENT = (q: string) => `left(regexp_replace(${q}, '\\s+', ' ', 'g'), 70)`;
/** Backends of the bench's database but the trace's own. */
const OTHERS = (a = 'a') => `${a}.datname = current_database() AND ${a}.pid <> pg_backend_pid()`;

/** The trace's looks at the database (one line each, when there is something to show). */
const TRACE_QUERIES = {
  // How many backends are in each state, waiting for what.
  backends: `SELECT coalesce(state, '-') || '/' || coalesce(wait_event_type, '-') || ':' || coalesce(wait_event, '-') || '=' || count(*) AS k
    FROM pg_stat_activity a WHERE ${OTHERS()} GROUP BY state, wait_event_type, wait_event ORDER BY count(*) DESC`,
  // Which statement waits for a lock, held by which.
  blocked: `SELECT w.application_name || ': ' || ${STATEMENT('w.query')} || ' <= ' || b.application_name || ': ' || ${STATEMENT('b.query')} || ' x' || count(*) AS k
    FROM pg_stat_activity w CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker (pid) JOIN pg_stat_activity b ON b.pid = blocker.pid
    WHERE ${OTHERS('w')} GROUP BY w.application_name, w.query, b.application_name, b.query ORDER BY count(*) DESC`,
  // Statements running for more than 150 ms.
  slow: `SELECT application_name || ' ' || round(extract(epoch FROM now() - query_start) * 1000) || ' ms: ' || ${STATEMENT('query')} AS k
    FROM pg_stat_activity a WHERE ${OTHERS()} AND state = 'active' AND now() - query_start > interval '150 ms'`,
};

/** Runs a measured process, adding the commits per step it made (the bench's own queries are a handful). */
async function measured(
  pool: pg.Pool,
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; execArgv?: string[]; stdoutFile?: string },
): Promise<AgentLoopFigures> {
  await pool.query('SELECT pg_stat_force_next_flush()');
  const before = await commits(pool);
  const c = child<AgentLoopFigures>(file, args, opts);
  // BENCH_AGENT_LOOP_TRACE=1: what the database's backends do, every second of a runtime round.
  const trace =
    process.env.BENCH_AGENT_LOOP_TRACE && file.includes('runtime')
      ? setInterval(() => {
          for (const [label, sql] of Object.entries(TRACE_QUERIES)) {
            void pool.query<{ k: string }>(sql).then(
              ({ rows }) => rows.length && process.stderr.write(`trace database ${label}: ${rows.map((r) => r.k).join(' | ')}\n`),
              () => {},
            );
          }
        }, 1000)
      : undefined;
  void c.exited.then(() => clearInterval(trace));
  const figures = await c.message;
  await c.exited;
  await pool.query('SELECT pg_stat_force_next_flush()');
  await new Promise((r) => setTimeout(r, 200));
  return { ...figures, commitsPerStep: Number((((await commits(pool)) - before) / figures.steps).toFixed(2)) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ratio = (a: number, b: number) => Number((a / b).toFixed(2));

/** The figures of the repeat whose steps/s is the median (so each row is one real measurement). */
function medianOf(all: AgentLoopFigures[]): AgentLoopFigures {
  const m = median(all.map((f) => f.stepsPerSecond));
  return all.find((f) => f.stepsPerSecond === m)!;
}

/** `n` runs of the bench's agent, queued in batches of 200. */
export async function queueRuns(records: RunRecords, n: number): Promise<void> {
  const batch = 200;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, (_, j) =>
        records.create({
          agent: 'bench',
          input: `bench run ${i + j}`,
          model: 'claude-sonnet-4-6',
          tokenBudget: 1_000_000,
          timeoutSeconds: 3600,
          maxSteps: 50,
        }),
      ),
    );
  }
}

/**
 * node's options to profile a measured process (BENCH_AGENT_LOOP_PROFILE), into a directory of its own;
 * for `gc`, V8's line per collection, which goes to stdout: the process's stdout is then <name>.gc.log
 * (the runtime's log lines are there too).
 */
function profiling(name: string): { execArgv: string[]; stdoutFile?: string } {
  const profile = process.env.BENCH_AGENT_LOOP_PROFILE;
  // One file per thread: the main thread's has thread id 0 in its name (CPU.<date>.<time>.<pid>.0.<n>.cpuprofile).
  const dir = path.join(here, 'results', 'profiles', name);
  if (profile === 'gc') {
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    return { execArgv: ['--trace-gc'], stdoutFile: `${dir}.gc.log` };
  }
  return {
    execArgv:
      profile === 'cpu' ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : profile === 'heap' ? ['--heap-prof', `--heap-prof-dir=${dir}`] : [],
  };
}

async function runtimeOnce(url: string, pool: pg.Pool, modelUrl: string, c: AgentLoopCase, round: number): Promise<AgentLoopFigures> {
  await pool.query('TRUNCATE durable_agent.run CASCADE');
  await queueRuns(new RunRecords(pool), c.runs);
  const env = { ...process.env, DATABASE_URL: url, WORKER_CONCURRENCY: String(c.inFlight) };
  const name = `runtime-${c.inFlight}-${c.latencyMs}-${round}`;
  const figures = await measured(pool, 'agent-loop-runtime.ts', [`--model-url=${modelUrl}`, `--runs=${c.runs}`, `--name=${name}`], {
    env,
    ...profiling(name),
  });
  const { rows } = await pool.query(
    `SELECT count(*) FILTER (WHERE status = 'SUCCEEDED')::int AS ok, (SELECT count(*)::int FROM durable_agent.run_step) AS steps FROM durable_agent.run`,
  );
  if (rows[0].ok !== c.runs || rows[0].steps !== c.runs * STEPS_PER_RUN) {
    throw new Error(`agent loop ${c.inFlight}@${c.latencyMs}: ${rows[0].ok} of ${c.runs} runs succeeded with ${rows[0].steps} steps`);
  }
  return figures;
}

async function floorOnce(
  url: string,
  pool: pg.Pool,
  modelUrl: string,
  c: AgentLoopCase,
  round: number,
  transport: FloorTransport,
): Promise<AgentLoopFigures> {
  await pool.query('DROP TABLE IF EXISTS bench_floor_step');
  const name = `${transport === 'http' ? 'floor' : 'fetch-floor'}-${c.inFlight}-${c.latencyMs}-${round}`;
  const args = [
    `--url=${url}`,
    `--model-url=${modelUrl}`,
    `--in-flight=${c.inFlight}`,
    `--runs=${c.runs}`,
    `--transport=${transport}`,
    `--name=${name}`,
  ];
  const figures = await measured(pool, 'agent-loop-floor.ts', args, profiling(name));
  if (figures.steps !== c.runs * STEPS_PER_RUN) throw new Error(`agent loop floor: ${figures.steps} steps of ${c.runs * STEPS_PER_RUN}`);
  return figures;
}

/** Every case against the scratch database at `url` (migrated; `pool` on it), printed as it goes. */
export async function agentLoopBench(
  url: string,
  pool: pg.Pool,
  cases = agentLoopCases(),
  repeats = defaultRepeats(),
): Promise<AgentLoopResult[]> {
  const results: AgentLoopResult[] = [];
  // The runtime process loads the package as built; tsc is incremental, so this is quick when fresh.
  if (cases.length && spawnSync(process.execPath, [path.join(here, '..', 'scripts', 'build.mjs')], { stdio: 'inherit' }).status !== 0) {
    throw new Error('the build failed');
  }
  for (const c of cases) {
    const standin = child<{ port: number }>('agent-loop-standin.ts', [`--latency-ms=${c.latencyMs}`]);
    try {
      const modelUrl = `http://127.0.0.1:${(await standin.message).port}`;
      const floors: AgentLoopFigures[] = [];
      const fetchFloors: AgentLoopFigures[] = [];
      const runtimes: AgentLoopFigures[] = [];
      for (let r = 0; r < repeats; r++) {
        floors.push(await floorOnce(url, pool, modelUrl, c, r, 'http'));
        fetchFloors.push(await floorOnce(url, pool, modelUrl, c, r, 'fetch'));
        runtimes.push(await runtimeOnce(url, pool, modelUrl, c, r));
      }
      const floor = medianOf(floors);
      const fetchFloor = medianOf(fetchFloors);
      const runtime = medianOf(runtimes);
      const figures = (f: AgentLoopFigures) => `${f.stepsPerSecond} (${f.peakRssMb} MB)`;
      const peak = (all: AgentLoopFigures[]) => median(all.map((f) => f.peakRssMb));
      const medianPeakRssMb = { floor: peak(floors), fetchFloor: peak(fetchFloors), runtime: peak(runtimes) };
      const result: AgentLoopResult = {
        ...c,
        floor,
        fetchFloor,
        runtime,
        ratio: {
          stepsPerSecond: ratio(runtime.stepsPerSecond, floor.stepsPerSecond),
          cpuMsPerStep: ratio(runtime.cpuMsPerStep, floor.cpuMsPerStep),
          peakRss: ratio(medianPeakRssMb.runtime, medianPeakRssMb.floor),
        },
        medianPeakRssMb,
        fetchRatio: {
          stepsPerSecond: ratio(runtime.stepsPerSecond, fetchFloor.stepsPerSecond),
          peakRss: ratio(medianPeakRssMb.runtime, medianPeakRssMb.fetchFloor),
        },
        rounds: floors.map((f, i) => `${figures(f)} / ${figures(fetchFloors[i]!)} / ${figures(runtimes[i]!)}`).join(', '),
      };
      console.log(formatAgentLoop(result));
      results.push(result);
    } finally {
      standin.process.kill();
    }
  }
  return results;
}

export function formatAgentLoop(r: AgentLoopResult): string {
  const head = `agent loop, ${r.inFlight.toLocaleString('en')} in flight, L = ${r.latencyMs} ms (${r.runs.toLocaleString('en')} runs)`;
  const line = (what: string, f: AgentLoopFigures) =>
    `  ${what.padEnd(8)} ${String(f.stepsPerSecond).padStart(6)} steps/s ${f.cpuMsPerStep.toFixed(3).padStart(7)} CPU ms/step ${String(f.peakRssMb).padStart(5)} MB peak RSS (heap ${f.peakHeapMb}, external ${f.peakExternalMb}) ${f.commitsPerStep ?? ''} commits/step`;
  const q = r.ratio;
  const peaks = r.medianPeakRssMb;
  return [
    head,
    line('floor', r.floor),
    line('fetch', r.fetchFloor),
    line('runtime', r.runtime),
    `  ratio    ${q.stepsPerSecond}× steps/s (target ≥ 0.8)  ${q.cpuMsPerStep}× CPU/step  ${q.peakRss}× RSS (target ≤ 1.3; medians ${peaks.runtime} / ${peaks.floor} MB)   against fetch: ${r.fetchRatio.stepsPerSecond}× steps/s, ${r.fetchRatio.peakRss}× RSS`,
    `  rounds   floor / fetch / runtime, steps/s (peak RSS): ${r.rounds}`,
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { withScratchDatabase, mergeIntoLatest } = await import('./scratch-database.ts');
  await withScratchDatabase(async (url, pool) => mergeIntoLatest({ agentLoop: await agentLoopBench(url, pool) }));
  process.exit(0);
}
