/**
 * What forking costs, for sources of different lengths: the time of the fork request (the turn check
 * and the insert) and what it stores. A fork refers to its source's steps, so neither should grow with
 * the source's length; reading the fork's log does (it is the conversation), and is shown for scale.
 */
import type pg from 'pg';
import { forkRun } from '../src/runs/fork-run.ts';
import type { RunId } from '../src/domain/types.ts';
import type { RunRecords } from '../src/store/run-records.ts';
import type { RunStore } from '../src/store/run-store.ts';

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));
const defaults = { agent: 'bench', model: 'bench', tokenBudget: 1_000_000, timeoutSeconds: 3600, maxSteps: 1000 };

/** A finished run of `steps` steps (turns of one tool call each), written straight into the tables. */
async function sourceOf(pool: pg.Pool, records: RunRecords, steps: number): Promise<RunId> {
  const run = await records.create({
    agent: 'bench',
    input: 'bench',
    model: 'bench',
    tokenBudget: 10_000_000,
    timeoutSeconds: 3600,
    maxSteps: 1000,
  });
  await pool.query(
    `INSERT INTO durable_agent.run_step (run_id, seq, kind, status, tool_name, tool_use_id, request, response, stop_reason)
     SELECT $1, g,
            CASE WHEN g % 2 = 1 THEN 'MODEL' ELSE 'TOOL' END, 'DONE',
            CASE WHEN g % 2 = 0 THEN 'noop' END,
            CASE WHEN g % 2 = 0 THEN 'toolu_' || (g - 1) END,
            CASE WHEN g % 2 = 1 THEN '{"model":"bench","maxTokens":1024,"systemDigest":null,"toolsDigest":null}'::jsonb END,
            CASE WHEN g % 2 = 1 THEN '[{"type":"tool_use","id":"toolu_' || g || '","name":"noop","input":{}}]' ELSE repeat('r', 2048) END,
            CASE WHEN g % 2 = 1 THEN 'tool_use' END
     FROM generate_series(1, $2::int) g`,
    [run.id, steps],
  );
  await pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED', finished_at = now() WHERE id = $1`, [run.id]);
  return run.id;
}

export async function forkCost(pool: pg.Pool, store: RunStore, records: RunRecords): Promise<Record<string, number>> {
  const lengths = [10, 1000];
  const sources = await Promise.all(lengths.map(async (n) => (await records.get(await sourceOf(pool, records, n)))!));
  await pool.query('ANALYZE durable_agent.run_step');
  const stepRows = async () => Number((await pool.query('SELECT count(*) AS n FROM durable_agent.run_step')).rows[0].n);
  const rowsBefore = await stepRows();
  const times = lengths.map((): number[] => []);
  const bytes = lengths.map((): number[] => []);
  const forks: RunId[] = [];
  // Taken in turn, first one then the other first, so both lengths see the same load (commit latency
  // drifts from minute to minute).
  for (let i = 0; i < 31; i++) {
    for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) {
      const source = sources[k]!;
      const t = performance.now();
      const fork = await forkRun(records, source, { afterSeq: lengths[k]! }, defaults, 'options');
      times[k]!.push(performance.now() - t);
      bytes[k]!.push(
        Number((await pool.query('SELECT pg_column_size(r.*) AS b FROM durable_agent.run r WHERE id = $1', [fork.id])).rows[0].b),
      );
      forks[k] = fork.id;
    }
  }
  const results: Record<string, number> = { forkStepRowsAdded: (await stepRows()) - rowsBefore };
  for (const [k, length] of lengths.entries()) {
    results[`forkP50MsAt${length}`] = round(p50(times[k]!));
    results[`forkBytesAt${length}`] = p50(bytes[k]!);
    const reads: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      await store.steps(forks[k]!);
      reads.push(performance.now() - t);
    }
    results[`forkLogReadP50MsAt${length}`] = round(p50(reads));
  }
  return results;
}
