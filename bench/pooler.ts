/**
 * Steps per second behind a real PgBouncer in transaction mode against the same database directly:
 * the throughput scenario of bench/run.ts (100 runs × 10 steps, one worker), its rounds alternating
 * between the two. Through the pooler nothing is prepared by name (every statement is parsed each
 * time) and each transaction takes one more hop; LISTEN goes to the direct URL in both, as with
 * DATABASE_DIRECT_URL. Skipped, with a word, where `pgbouncer` is not installed.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { listenForWorker } from '../src/db/notifications.ts';
import { createPool, poolSizeFor } from '../src/db/pool.ts';
import type { RunId } from '../src/domain/types.ts';
import { Worker } from '../src/engine/worker.ts';
import { leaseKeeperThread } from '../src/leases/lease-keeper-thread.ts';
import type { LlmClient, LlmRequest, LlmResponse } from '../src/llm/types.ts';
import { createLogger } from '../src/observability/logger.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { RunStore } from '../src/store/run-store.ts';
import { ToolExecutor } from '../src/tools/executor.ts';
import { startPgBouncer } from '../test/support/pgbouncer.ts';

const RUNS = 100;
const ROUNDS = 4; // per side, the first of each a warm-up
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Tool turns of 1, 1, 1 and 2 calls, then the answer: 10 steps. */
const model: LlmClient = {
  provider: 'bench',
  async send(req: LlmRequest): Promise<LlmResponse> {
    const calls = [1, 1, 1, 2][req.messages.filter((m) => m.role === 'assistant').length] ?? 0;
    const content = calls
      ? Array.from({ length: calls }, () => ({ type: 'tool_use', id: `toolu_${randomUUID()}`, name: 'noop', input: {} }))
      : [{ type: 'text', text: 'done' }];
    const usage = { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
    return { id: null, model: 'bench', content, stopReason: calls ? 'tool_use' : 'end_turn', usage, requestId: null, attempts: 1 };
  },
};

/** One side: its pool kept over the rounds, so both sides' server connections are warm (PgBouncer keeps its own). */
interface Side {
  url: string;
  prepared: boolean;
  pool: pg.Pool;
}

async function round({ url, prepared, pool }: Side, directUrl: string, check: pg.Pool): Promise<number> {
  const records = new RunRecords(pool);
  const ids: RunId[] = [];
  for (let i = 0; i < RUNS; i++)
    ids.push((await records.create({ input: 'bench', model: 'bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps: 100 })).id);
  let finished = 0;
  let allDone!: () => void;
  const done = new Promise<void>((r) => (allDone = r));
  const worker = new Worker(
    {
      store: new RunStore(pool),
      llm: model,
      agent: {
        system: 'bench',
        tools: new ToolExecutor(
          [{ name: 'noop', description: 'returns at once', inputSchema: { type: 'object' }, execute: async () => 'ok' }],
          10_000,
        ),
        maxTokens: 1024,
      },
      costOf: () => 0,
      logger: createLogger({ level: 'silent' }),
      events: [{ runFinished: () => ++finished === RUNS && allDone() }],
      subscribe: (on) => listenForWorker(directUrl, on, () => {}),
      leaseKeeper: leaseKeeperThread(url, { prepared }),
    },
    {
      name: 'bench-worker',
      concurrency: RUNS,
      leaseMs: 60_000,
      maxRunAttempts: 5,
      pollIntervalMs: 1000,
      shutdownGraceMs: 5000,
      requeueDelayMs: 1000,
    },
  );
  await worker.start();
  const t = performance.now();
  await done;
  const seconds = (performance.now() - t) / 1000;
  await worker.stop();
  const { rows } = await check.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM durable_agent.run_step s JOIN durable_agent.run r ON r.id = s.run_id WHERE r.id = ANY($1) AND r.status = 'SUCCEEDED'`,
    [ids],
  );
  if (rows[0]!.n !== RUNS * 10) throw new Error(`the pooler bench's runs did not all succeed with 10 steps (${rows[0]!.n} steps)`);
  return Math.round(rows[0]!.n / seconds);
}

export async function benchPooler(
  url: string,
  check: pg.Pool,
): Promise<{ results: Record<string, number | string>; rows: [string, string, string][] }> {
  let bouncer;
  try {
    bouncer = await startPgBouncer(url, { mode: 'transaction', poolSize: 20 });
  } catch (e) {
    const why = (e as Error).message.split('.')[0]!;
    return { results: { poolerStepsPerSecond: 'skipped' }, rows: [['steps per second, via PgBouncer', 'skipped', why]] };
  }
  const directSide: Side = { url, prepared: true, pool: createPool(url, poolSizeFor(RUNS)) };
  const pooledSide: Side = { url: bouncer.url, prepared: false, pool: createPool(bouncer.url, poolSizeFor(RUNS), { prepared: false }) };
  try {
    const direct: number[] = [];
    const pooled: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // In turn, each side first every other time, so neither always follows the other.
      let d: number;
      let p: number;
      if (i % 2 === 0) {
        d = await round(directSide, url, check);
        p = await round(pooledSide, url, check);
      } else {
        p = await round(pooledSide, url, check);
        d = await round(directSide, url, check);
      }
      if (i > 0) {
        direct.push(d);
        pooled.push(p);
      }
    }
    const results = {
      poolerDirectStepsPerSecond: p50(direct),
      poolerStepsPerSecond: p50(pooled),
      poolerStepsPerSecondRounds: `${pooled.join(', ')} (direct ${direct.join(', ')})`,
    };
    return {
      results,
      rows: [
        [
          'steps per second, via PgBouncer',
          `${results.poolerStepsPerSecond} / ${results.poolerDirectStepsPerSecond} direct`,
          `${(results.poolerStepsPerSecond / results.poolerDirectStepsPerSecond).toFixed(2)}×; transaction mode, nothing prepared by name`,
        ],
      ],
    };
  } finally {
    await Promise.all([directSide.pool.end(), pooledSide.pool.end()]);
    await bouncer.stop();
  }
}

// `npm run bench:pooler`: these figures alone, in a scratch database.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { withScratchDatabase } = await import('./scratch-database.ts');
  await withScratchDatabase(async (url, pool, description) => {
    const { rows, results } = await benchPooler(url, pool);
    console.log(`pooler bench on ${description}\n`);
    for (const [k, v, note] of rows) console.log(`${k.padEnd(34)} ${v.padStart(18)}   ${note}`);
    console.log(`rounds: ${results.poolerStepsPerSecondRounds}`);
  });
  process.exit(0);
}
