/**
 * What a step's write costs the database by the number of runs per statement: the real batched model
 * checkpoint (src/store/step-batch-sql.ts) sent by 8 connections at once for 5 s each, with 1, 10 and
 * 100 runs per statement (each connection its own runs, so no waits on rows). It is why the step path
 * batches (src/store/write-batches.ts): most of a statement's cost is the statement's — locks on every
 * table and index its plan touches, executor start and end, the commit — not its rows'.
 *
 * `npm run bench:statements` (DATABASE_URL, or the embedded PostgreSQL); prints a table and merges
 * `statementCost` into bench/results/latest.json.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { ModelStepItem } from '../src/store/step-batch-sql.ts';
import { schemaSql } from '../src/db/schema.ts';
import { stepBatchSql, stepItem } from '../src/store/step-batch-sql.ts';
import { mergeIntoLatest, withScratchDatabase } from './scratch-database.ts';

const CONNECTIONS = 8;
const SECONDS = 5;
const SIZES = [1, 10, 100];

interface Owned {
  id: string;
  token: string;
}

async function runningRuns(pool: pg.Pool, n: number): Promise<Owned[]> {
  const runs = Array.from({ length: n }, () => ({ id: randomUUID(), token: randomUUID() }));
  await pool.query(
    `INSERT INTO durable_agent.run (id, input, model, token_budget, max_steps, status, locked_by, lease_token, locked_until, deadline_at)
     SELECT r.id, 'bench', 'bench-model', 1000000000, 100000, 'RUNNING', 'bench', r.token, now() + interval '1 hour', now() + interval '1 hour'
     FROM unnest($1::uuid[], $2::uuid[]) AS r (id, token)`,
    [runs.map((r) => r.id), runs.map((r) => r.token)],
  );
  return runs;
}

function item(run: Owned, seq: number): ModelStepItem {
  const owner = { worker: 'bench', leaseMs: 3_600_000, token: run.token };
  const content = [
    { type: 'text' as const, text: 'Let me look that up.' },
    { type: 'tool_use' as const, id: `toolu_${seq}`, name: 'lookup', input: { key: 'k' } },
  ];
  return stepItem(
    run.id as never,
    owner,
    { seq: seq + 1, toolUseId: `toolu_${seq}`, toolName: 'lookup' },
    { key: 'k' },
    {
      events: [],
      tokens: 160,
      cost: 0.001,
      seq,
      request: { model: 'bench-model', maxTokens: 1024, systemDigest: null, toolsDigest: null },
      content,
      stop_reason: 'tool_use',
      input_tokens: 120,
      output_tokens: 40,
      cache_creation: 0,
      cache_read: 0,
      attempts: 1,
      latency_ms: 10,
    },
  );
}

const { MODEL_STEPS } = stepBatchSql(schemaSql());

/** Run-steps per second with `size` runs per statement. */
async function measure(pool: pg.Pool, size: number): Promise<{ statementsPerSecond: number; stepsPerSecond: number }> {
  const runs = await runningRuns(pool, CONNECTIONS * size);
  let statements = 0;
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, c) => {
      const mine = runs.slice(c * size, (c + 1) * size);
      for (let seq = 1; performance.now() < until; seq += 2) {
        const items = mine.map((r) => item(r, seq));
        const { rowCount } = await pool.query({ ...MODEL_STEPS(items, false), values: [JSON.stringify(items)] });
        if (rowCount !== size) throw new Error(`a statement of ${size} runs wrote ${rowCount}`);
        statements++;
      }
    }),
  );
  return { statementsPerSecond: Math.round(statements / SECONDS), stepsPerSecond: Math.round((statements * size) / SECONDS) };
}

await withScratchDatabase(async (_url, pool, description) => {
  console.log(`model checkpoints by runs per statement, ${CONNECTIONS} connections, ${SECONDS} s each, on ${description}\n`);
  const results: Record<string, { statementsPerSecond: number; stepsPerSecond: number }> = {};
  for (const size of SIZES) {
    const r = await measure(pool, size);
    results[`runsPerStatement${size}`] = r;
    const x = (r.stepsPerSecond / results.runsPerStatement1!.stepsPerSecond).toFixed(1);
    console.log(
      `${String(size).padStart(4)} runs/statement  ${String(r.statementsPerSecond).padStart(6)} statements/s  ${String(r.stepsPerSecond).padStart(7)} steps/s  ${x}×`,
    );
  }
  mergeIntoLatest({ statementCost: results });
});
