/**
 * The figures of live events for `npm run bench`:
 * - steps per second with the model streamed vs answered whole, both through the Messages API
 *   stand-in (bench/messages-standin.ts) in a separate process, through AnthropicClient; the streamed
 *   runs are followed (registered as an event hub would), so their text is written as it streams;
 * - delivery latency from a delta's commit to 1,000 readers connected to one API process;
 * - what a streamed answer's events cost in storage per 1,000 output tokens, in a followed run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type pg from 'pg';
import { EventHub } from '../src/api/event-hub.ts';
import { createServer } from '../src/api/server.ts';
import { listenForWorker } from '../src/db/notifications.ts';
import type { RunId } from '../src/domain/types.ts';
import { Worker } from '../src/engine/worker.ts';
import { createLlmClient } from '../src/llm/index.ts';
import type { Logger } from '../src/observability/logger.ts';
import { leaseKeeperThread } from '../src/leases/lease-keeper-thread.ts';
import { newEvent } from '../src/ports/new-event.ts';
import { RunEvents } from '../src/store/run-events.ts';
import { RunListing } from '../src/store/run-listing.ts';
import type { RunRecords } from '../src/store/run-records.ts';
import type { RunStore } from '../src/store/run-store.ts';
import { ToolExecutor } from '../src/tools/executor.ts';

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));

async function standIn(env: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('bench/messages-standin.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve((JSON.parse(d.toString()) as { port: number }).port));
    child.once('exit', () => reject(new Error('the Messages API stand-in exited')));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

interface Ctx {
  pool: pg.Pool;
  url: string;
  store: RunStore;
  records: RunRecords;
  logger: Logger;
}

function worker(ctx: Ctx, baseUrl: string, streaming: boolean, concurrency: number): Worker {
  const llm = createLlmClient({
    llmProvider: 'anthropic',
    anthropicApiKey: 'sk-ant-bench-000000000000000000',
    anthropicBaseUrl: baseUrl,
    demoLatencyMs: 0,
    llmStreaming: streaming,
    stepTimeoutMs: 60_000,
    maxAttempts: 1,
    retryBaseMs: 10,
    retryCapMs: 100,
  });
  const noop = { name: 'noop', description: 'returns at once', inputSchema: { type: 'object' }, execute: async () => 'ok' };
  return new Worker(
    {
      store: ctx.store,
      llm,
      agent: { system: 'bench', tools: new ToolExecutor([noop], 10_000), maxTokens: 1024 },
      costOf: () => 0,
      logger: ctx.logger,
      subscribe: (on) => listenForWorker(ctx.url, on, () => {}),
      leaseKeeper: leaseKeeperThread(ctx.url),
    },
    {
      name: `bench-${streaming ? 'stream' : 'whole'}`,
      concurrency,
      leaseMs: 60_000,
      maxRunAttempts: 5,
      pollIntervalMs: 1000,
      shutdownGraceMs: 5000,
      requeueDelayMs: 1000,
    },
  );
}

const newRun = (records: RunRecords) =>
  records.create({ input: 'bench', model: 'claude-bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps: 100 });

/** Registers the runs as an event hub following them would: their streamed text is then written as it comes. */
const follow = (ctx: Ctx, ids: RunId[]) => new RunEvents(ctx.pool).watch(ids, randomUUID(), 3_600_000);

async function untilDone(pool: pg.Pool, ids: RunId[]): Promise<void> {
  for (;;) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM durable_agent.run WHERE id = ANY($1) AND status IN ('QUEUED','RUNNING')`,
      [ids],
    );
    if (rows[0].n === 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Steps per second of 50 concurrent runs × 9 steps, median of three rounds after a warm-up. */
async function throughput(ctx: Ctx, baseUrl: string, streaming: boolean): Promise<number> {
  const rounds: number[] = [];
  for (let round = 0; round < 4; round++) {
    const ids: RunId[] = [];
    for (let i = 0; i < 50; i++) ids.push((await newRun(ctx.records)).id);
    if (streaming) await follow(ctx, ids);
    const w = worker(ctx, baseUrl, streaming, 50);
    await w.start();
    const t = performance.now();
    await untilDone(ctx.pool, ids);
    const seconds = (performance.now() - t) / 1000;
    await w.stop();
    const { rows } = await ctx.pool.query(
      `SELECT count(*)::int AS n FROM durable_agent.run_step s JOIN durable_agent.run r ON r.id = s.run_id WHERE r.id = ANY($1) AND r.status = 'SUCCEEDED'`,
      [ids],
    );
    if (rows[0].n !== 450) throw new Error(`streaming=${streaming}: runs did not all succeed with 9 steps (${rows[0].n})`);
    if (round > 0) rounds.push(Math.round(rows[0].n / seconds));
  }
  return pct(rounds, 0.5);
}

/** Latency from the commit of a text.delta to its arrival at each of `readers` readers of one API process. */
async function deliveryLatency(ctx: Ctx, readers: number, deltas: number): Promise<{ p50: number; p99: number; samples: number }> {
  const events = new RunEvents(ctx.pool);
  const hub = new EventHub(events, { databaseUrl: ctx.url });
  const app = createServer({
    store: ctx.records,
    listing: new RunListing(ctx.pool),
    defaults: { agent: 'demo', model: 'm', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 5 },
    checkDatabase: async () => {},
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    logger: false,
    runEvents: { events, hub },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const run = await newRun(ctx.records);
  const lease = (await ctx.store.claim({ worker: 'bench-writer', leaseMs: 600_000 }, 1, []))[0]!.lease;
  if (!lease) throw new Error('could not claim the latency run');
  const committed = new Map<string, number>();
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('bench/sse-readers.ts')], {
    env: { ...process.env, URL: `http://127.0.0.1:${port}/api/runs/${run.id}/events`, READERS: String(readers) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8');
  const ready = new Promise<void>((resolve) =>
    child.stdout!.on('data', (d: string) => {
      output += d;
      if (output.includes('"ready"')) resolve();
    }),
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await ctx.store.appendEvents(run.id, lease, [newEvent('text.delta', { seq: 1, attempt: 1, text: 'hello' })]);
  await ready;
  const now = () => performance.timeOrigin + performance.now();
  for (let i = 0; i < deltas; i++) {
    const text = `delta ${i}`;
    await ctx.store.appendEvents(run.id, lease, [newEvent('text.delta', { seq: 1, attempt: 1, text })]);
    committed.set(text, now());
    await new Promise((r) => setTimeout(r, 50));
  }
  await ctx.store.finish(run.id, lease, { status: 'SUCCEEDED', output: 'bench' });
  await exited;
  const { arrivals } = JSON.parse(output.trim().split('\n').at(-1)!) as { arrivals: Record<string, number[]> };
  const samples: number[] = [];
  for (const [text, at] of committed) for (const t of arrivals[text] ?? []) samples.push(Math.max(0, t - at));
  await hub.close();
  await app.close();
  return { p50: round(pct(samples, 0.5), 1), p99: round(pct(samples, 0.99), 1), samples: samples.length };
}

/** A 1,000-token answer streamed at about 100 tokens a second: its events' bytes, and how many rows. */
async function storage(ctx: Ctx): Promise<{ bytesPer1000Tokens: number; deltaRows: number; bytesAllEvents: number }> {
  const tokens = 1000;
  const s = await standIn({ TOOL_TURNS: '0', ANSWER_TOKENS: String(tokens), DELTAS: String(tokens), DELTA_MS: '10' });
  try {
    const run = await newRun(ctx.records);
    await follow(ctx, [run.id]);
    const w = worker(ctx, s.url, true, 1);
    await w.start();
    await untilDone(ctx.pool, [run.id]);
    await w.stop();
    const { rows } = await ctx.pool.query<{ bytes: number; rows: number; all_bytes: number }>(
      `SELECT sum(pg_column_size(e.*)) FILTER (WHERE type = 'text.delta')::bigint AS bytes, count(*) FILTER (WHERE type = 'text.delta')::int AS rows,
              sum(pg_column_size(e.*))::bigint AS all_bytes
       FROM durable_agent.run_event e WHERE run_id = $1`,
      [run.id],
    );
    return {
      bytesPer1000Tokens: Number(rows[0]!.bytes) * (1000 / tokens),
      deltaRows: rows[0]!.rows,
      bytesAllEvents: Number(rows[0]!.all_bytes),
    };
  } finally {
    s.child.kill();
  }
}

export async function benchEvents(ctx: Ctx): Promise<{ results: Record<string, number>; rows: [string, string, string][] }> {
  const s = await standIn({ TOOL_TURNS: '4', ANSWER_TOKENS: '50', DELTAS: '10', DELTA_MS: '0' });
  let whole: number;
  let streamed: number;
  try {
    whole = await throughput(ctx, s.url, false);
    streamed = await throughput(ctx, s.url, true);
  } finally {
    s.child.kill();
  }
  const latency = await deliveryLatency(ctx, 1000, 40);
  const stored = await storage(ctx);
  const results = {
    stepsPerSecondModelWhole: whole,
    stepsPerSecondModelStreamed: streamed,
    eventDeliveryP50Ms: latency.p50,
    eventDeliveryP99Ms: latency.p99,
    eventDeliverySamples: latency.samples,
    eventBytesPer1000OutputTokens: stored.bytesPer1000Tokens,
    textDeltaRowsPer1000OutputTokens: stored.deltaRows,
    eventBytesOf1000TokenAnswerRun: stored.bytesAllEvents,
  };
  const rows: [string, string, string][] = [
    [
      'steps/s, model whole / streamed (followed)',
      `${whole} / ${streamed}`,
      `streaming costs ${round((1 - streamed / whole) * 100, 1)}% (target ≤ 25%); client → stand-in process`,
    ],
    [
      'event delivery p50 / p99',
      `${latency.p50} / ${latency.p99} ms`,
      `commit → 1,000 SSE readers of one API process (target p50 ≤ 50 ms)`,
    ],
    [
      'event storage per 1k out tokens (followed)',
      `${stored.bytesPer1000Tokens} B`,
      `${stored.deltaRows} text.delta rows at ~100 tokens/s; all its run_event rows ${stored.bytesAllEvents} B (the events a step row carries are in the step)`,
    ],
  ];
  return { results, rows };
}
