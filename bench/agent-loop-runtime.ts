/**
 * The runtime side of the agent-loop bench: durable-agent as a library (`createRuntime`, a worker, no
 * API), with the configuration of the environment (WORKER_CONCURRENCY is the number in flight) and a
 * tool that answers at once, driving runs queued beforehand against the stand-in over HTTP with the
 * Anthropic provider, until `runs` have finished. It loads the package as built (dist/).
 *
 * A child of bench/agent-loop.ts: argv `--model-url=http://… --runs=R`, DATABASE_URL in the
 * environment; reports an AgentLoopFigures over IPC. Its log lines go to stdout (ignored by the parent,
 * or in the .gc.log with BENCH_AGENT_LOOP_PROFILE=gc).
 *
 * BENCH_AGENT_LOOP_SNAPSHOT=1 takes a heap snapshot halfway, =N,M… after N steps, after M…, as the
 * floor's side does (see stepCounter). BENCH_AGENT_LOOP_TRACE=1 prints a line a
 * second (steps, event loop, memory, sockets) and, at the end, the resident memory by mapping.
 */
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import type { AgentRuntime } from '../src/index.ts';
import { type AgentLoopFigures, allocationProfile, arg, measure, residentByMapping, stepCounter } from './agent-loop-measure.ts';

// The package as it ships (dist/, which the bench builds first): not the sources compiled on the fly,
// and run as `node` runs it. tsx, which loads this file, turns on source maps for the whole process, so
// every module of the package would have its map (sources inlined) parsed and kept: 2 MB more live heap
// and 5 MB more RSS at start, which neither a user's `node` process nor the floor (a few lines) carries.
process.setSourceMapsEnabled(false);
const dist = new URL('../dist/index.js', import.meta.url).href;
const { anthropic, createRuntime, defineAgent, tool }: typeof import('../src/index.ts') = await import(dist);

const modelUrl = arg('model-url');
const runs = Number(arg('runs'));
const name = arg('name');

const lookup = tool({
  name: 'lookup',
  description: 'Looks a key up.',
  input: z.object({ key: z.string() }),
  execute: async ({ key }) => `value of ${key}`,
});

const counter = stepCounter(name, runs);
let finished = 0;
let allFinished!: () => void;
const done = new Promise<void>((resolve) => (allFinished = resolve));

const allocations = await allocationProfile(name);

let rt: AgentRuntime | undefined;
/** Bytes in MB, rounded (not `>> 20`: 2 GB and more would overflow it). */
const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
// BENCH_AGENT_LOOP_TRACE=1: every second, the steps done, how busy the event loop was, memory, and the
// sockets, connects and timers open (to tell a round that waits on the database from one that computes).
if (process.env.BENCH_AGENT_LOOP_TRACE) {
  let elu = performance.eventLoopUtilization();
  let last = 0;
  setInterval(() => {
    const now = performance.eventLoopUtilization();
    const d = performance.eventLoopUtilization(now, elu);
    elu = now;
    const kinds: Record<string, number> = {};
    for (const k of process.getActiveResourcesInfo()) kinds[k] = (kinds[k] ?? 0) + 1;
    const m = process.memoryUsage();
    process.stderr.write(
      `trace runtime: steps/s ${counter.steps - last}, event loop ${d.utilization.toFixed(2)} busy, heap used ${mb(m.heapUsed)} MB, rss ${mb(m.rss)} MB, sockets ${kinds.TCPSocketWrap ?? 0}, connecting ${kinds.TCPConnectWrap ?? 0}, timers ${kinds.Timeout ?? 0}\n`,
    );
    last = counter.steps;
  }, 1000).unref();
}
const figures: AgentLoopFigures = await measure(async (started) => {
  rt = await createRuntime({
    agents: [
      defineAgent({
        name: 'bench',
        system: 'You are a bench.',
        tools: [lookup],
        llm: anthropic({ apiKey: 'sk-bench', baseUrl: modelUrl }),
      }),
    ],
    api: false,
    onEvent: (e) => {
      if (e.type === 'runClaimed') started();
      else if (e.type === 'modelStep' || e.type === 'toolStep') {
        counter.step();
      } else if (e.type === 'runFinished' && ++finished === runs) allFinished();
    },
  });
  await done;
  return counter.steps;
});
if (process.env.BENCH_AGENT_LOOP_TRACE) residentByMapping(name);
await rt!.close();
await allocations?.();
process.send!(figures, () => process.exit(0));
