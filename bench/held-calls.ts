/**
 * `tsx --expose-gc bench/held-calls.ts [N] [snapshot prefix]`: the live heap each run keeps while its
 * model call is in flight, to the byte, in a minute: N runs (default 2,000) driven by the runtime as a
 * library (dist/, as the agent-loop bench loads it) against the bench's stand-in holding every call
 * (bench/agent-loop-standin.ts --hold), measured after two full collections with all N calls held, at each
 * run's first call and again at its third (two answers and tool steps later), less the idle runtime's
 * heap. Where the agent-loop bench's peak moves by 10% from round to round, this moves by a few bytes,
 * so it tells what a change to what a run keeps is worth. With a prefix, heap snapshots of both moments
 * go to <prefix>-1.heapsnapshot and <prefix>-3.heapsnapshot (bench/snapshot-summary.ts reads them).
 *
 * Uses DATABASE_URL, whose durable_agent.run it empties first: a scratch database.
 */
import { fork } from 'node:child_process';
import v8 from 'node:v8';
import pg from 'pg';
import { z } from 'zod';
import { RunRecords } from '../src/store/run-records.ts';
import { queueRuns } from './agent-loop.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc: tsx --expose-gc bench/held-calls.ts');
const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL names the scratch database to use');
process.setSourceMapsEnabled(false); // as bench/agent-loop-runtime.ts: tsx's maps are no user's
const n = Number(process.argv[2] ?? 2_000);
const snapshots = process.argv[3];

const stand = fork(new URL('./agent-loop-standin.ts', import.meta.url).pathname, ['--hold'], { execArgv: ['--import', 'tsx'] });
let port = 0;
let held = 0;
stand.on('message', (m: { port?: number; held?: number }) => {
  if (m.port) port = m.port;
  if (m.held !== undefined) held = m.held;
});
const until = async (done: () => boolean) => {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
};
await until(() => port !== 0);

const pool = new pg.Pool({ connectionString: url });
await pool.query('TRUNCATE durable_agent.run CASCADE').catch(() => {}); // no schema yet: the runtime makes it
process.env.WORKER_CONCURRENCY = String(n);
const dist = new URL('../dist/index.js', import.meta.url).href;
const { anthropic, createRuntime, defineAgent, tool }: typeof import('../src/index.ts') = await import(dist);
const lookup = tool({
  name: 'lookup',
  description: 'Looks a key up.',
  input: z.object({ key: z.string() }),
  execute: async ({ key }) => `value of ${key}`,
});
const runtime = await createRuntime({
  agents: [
    defineAgent({
      name: 'bench',
      system: 'You are a bench.',
      tools: [lookup],
      llm: anthropic({ apiKey: 'sk-bench', baseUrl: `http://127.0.0.1:${port}` }),
    }),
  ],
  api: false,
});

const live = async (snapshot?: string) => {
  await new Promise((resolve) => setTimeout(resolve, 300));
  gc();
  gc();
  if (snapshot) v8.writeHeapSnapshot(snapshot);
  return process.memoryUsage().heapUsed;
};
const idle = await live();
await queueRuns(new RunRecords(pool), n);
await until(() => held >= n);
const first = await live(snapshots && `${snapshots}-1.heapsnapshot`);
for (let call = 2; call <= 3; call++) {
  held = 0;
  stand.send('release');
  await until(() => held >= n);
}
const third = await live(snapshots && `${snapshots}-3.heapsnapshot`);
const perRun = (bytes: number) => Math.round((bytes - idle) / n).toLocaleString('en-US');
console.log(
  `${n.toLocaleString('en-US')} runs held in a model call: ${perRun(first)} B a run at its first call, ${perRun(third)} B at its third (idle runtime: ${(idle / 2 ** 20).toFixed(1)} MB live)`,
);
stand.kill();
await runtime.close();
await pool.end();
