/**
 * `npm run bench:purge`: does deleting 100,000 old runs hold up new ones? Seeds 100,000 finished runs
 * of 11 steps (their model steps all referring to one shared system prompt in content_blob, as an
 * agent's runs do), then measures a worker's two writes — claiming a run and a model checkpoint —
 * first alone, then while `runs purge` deletes every seeded run in its batches on a pool of its own.
 * Works in a scratch database that it drops after; writes bench/results/purge.json.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/config/environment.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool, resolveDatabase } from '../src/db/pool.ts';
import { RunDeletion } from '../src/store/retention.ts';
import { RunStore } from '../src/store/run-store.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { seedRuns } from './seed-runs.ts';

const RUNS = Number(process.env.BENCH_PURGE_RUNS ?? 100_000);
const STEPS = 11;
const PROMPT = 'You are the support assistant of a ticket system. Answer briefly.';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.min(s.length - 1, Math.floor(s.length * p))] ?? 0).toFixed(2));
};
const summary = (xs: number[]) => ({ n: xs.length, p50: pct(xs, 0.5), p99: pct(xs, 0.99), max: Number(Math.max(...xs).toFixed(2)) });

/** A worker's writes, back to back, until `until` resolves: claim a fresh run, then checkpoint 10 model steps on it. */
async function workerLoad(
  store: RunStore,
  records: RunRecords,
  digest: string,
  until: Promise<unknown>,
): Promise<{ claims: number[]; checkpoints: number[] }> {
  let stop = false;
  void until.then(() => (stop = true));
  const claims: number[] = [];
  const checkpoints: number[] = [];
  const owner = { worker: 'bench', leaseMs: 60_000 };
  while (!stop) {
    await records.create({ input: 'live', model: 'bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps: 100 });
    let t = performance.now();
    const [run] = await store.claim(owner, 1);
    claims.push(performance.now() - t);
    for (let seq = 1; seq <= 10; seq++) {
      t = performance.now();
      await store.checkpointModel(
        run!.id,
        run!.lease,
        {
          seq,
          request: { model: 'bench', maxTokens: 1024, systemDigest: digest, toolsDigest: null },
          content: [{ type: 'text', text: 'x'.repeat(200) }],
          stopReason: 'end_turn',
          usage: { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
          budgetTokens: 120,
          attempts: 1,
          costUsd: 0.001,
          latencyMs: 1,
        },
        seq === 10 ? { end: { status: 'SUCCEEDED', output: 'done' } } : {},
      );
      checkpoints.push(performance.now() - t);
    }
  }
  return { claims, checkpoints };
}

async function main(): Promise<void> {
  const database = await resolveDatabase(loadConfig());
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const scratch = `durable_agent_bench_purge_${process.pid}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(scratch)}`);
  const url = new URL(database.url);
  url.pathname = `/${scratch}`;
  const pool = createPool(url.toString(), 4);
  const purgePool = createPool(url.toString(), 2);
  const results: Record<string, unknown> = { database: database.description, runs: RUNS, stepsPerRun: STEPS, at: new Date().toISOString() };
  try {
    await migrate(pool);
    const store = new RunStore(pool);
    const records = new RunRecords(pool);

    let t = performance.now();
    await seedRuns(pool, { runs: RUNS, steps: STEPS, spanMs: 30 * 86_400_000 });
    const digest = await store.putBlob(PROMPT);
    await pool.query(
      `UPDATE durable_agent.run_step SET request = jsonb_set(request, '{systemDigest}', to_jsonb($1::text)) WHERE kind = 'MODEL'`,
      [digest],
    );
    await pool.query('VACUUM ANALYZE durable_agent.run_step');
    await pool.query('VACUUM ANALYZE durable_agent.run');
    process.stdout.write(
      `seeded ${RUNS.toLocaleString('en-US')} finished runs × ${STEPS} steps in ${((performance.now() - t) / 1000).toFixed(1)} s\n`,
    );
    const cutoff = new Date();

    // Alone, for as long as the purge will take at most; 20 s is enough for a stable p50/p99.
    const alone = await workerLoad(store, records, digest, new Promise((r) => setTimeout(r, 20_000)));
    results.alone = { claim: summary(alone.claims), checkpoint: summary(alone.checkpoints) };

    t = performance.now();
    let batches = 0;
    const purge = new RunDeletion(purgePool).purge(cutoff, { onBatch: () => batches++ });
    const during = await workerLoad(store, records, digest, purge);
    const deleted = await purge;
    const purgeMs = performance.now() - t;
    results.duringPurge = { claim: summary(during.claims), checkpoint: summary(during.checkpoints) };
    results.purge = {
      runsDeleted: deleted.runs,
      blobsDeleted: deleted.blobs,
      batches,
      seconds: Number((purgeMs / 1000).toFixed(1)),
      runsPerSecond: Math.round(deleted.runs / (purgeMs / 1000)),
    };
    const left = (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM durable_agent.run WHERE finished_at < $1`, [cutoff]))
      .rows[0]!.n;
    const blob = (await pool.query('SELECT 1 FROM durable_agent.content_blob WHERE digest = $1', [digest])).rowCount;
    results.check = { seededRunsLeft: left, sharedPromptKept: blob === 1 };

    const row = (name: string, a: { p50: number; p99: number; max: number; n: number }, b: typeof a) =>
      `| ${name} | ${a.p50} / ${a.p99} / ${a.max} ms (${a.n}) | ${b.p50} / ${b.p99} / ${b.max} ms (${b.n}) |`;
    const r = results as { alone: { claim: never; checkpoint: never }; duringPurge: { claim: never; checkpoint: never } };
    process.stdout.write(
      [
        '',
        '| p50 / p99 / max (count) | alone | during the purge |',
        '|---|---|---|',
        row('claim a run', r.alone.claim, r.duringPurge.claim),
        row('model checkpoint', r.alone.checkpoint, r.duringPurge.checkpoint),
        '',
        `purge: ${JSON.stringify(results.purge)}`,
        `check: ${JSON.stringify(results.check)}`,
        '',
      ].join('\n'),
    );
  } finally {
    await pool.end();
    await purgePool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(scratch)} WITH (FORCE)`);
    await admin.end();
    await database.release();
  }
  const out = path.join(path.dirname(new URL(import.meta.url).pathname), 'results', 'purge.json');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`written to ${path.relative(process.cwd(), out)}\n`);
}

await main();
