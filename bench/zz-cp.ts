import { RunStore } from '../src/store/run-store.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { withScratchDatabase } from './scratch-database.ts';
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
await withScratchDatabase(async (_u, pool) => {
  const store = new RunStore(pool);
  const records = new RunRecords(pool);
  await pool.query('CREATE TABLE bench_commit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text)');
  const commits: number[] = [], cps: number[] = [], cpn: number[] = [];
  const prose = 'The order was shipped on Tuesday and should arrive within three working days. '.repeat(6);
  for (let r = 0; r < 10; r++) {
    const run = await records.create({ input: 'bench', model: 'bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps: 1000 });
    const lease = (await store.claim({ worker: 'bench', leaseMs: 60_000 }, 1))[0]!.lease;
    for (let seq = 1; seq <= 400; seq += 2) {
      let t = performance.now();
      await pool.query('INSERT INTO bench_commit (body) VALUES ($1)', ['x']);
      commits.push(performance.now() - t);
      const cp = (s: number) => ({
        seq: s, request: { model: 'bench', maxTokens: 1024, systemDigest: null, toolsDigest: null },
        content: [{ type: 'text' as const, text: prose }, { type: 'tool_use' as const, id: `t${s}`, name: 'noop', input: { order: 'A-1042' } }],
        stopReason: 'tool_use', usage: { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
        budgetTokens: 120, attempts: 1, costUsd: 0.001, latencyMs: 0,
      });
      t = performance.now();
      await store.checkpointModel(run.id, lease, cp(seq));
      cps.push(performance.now() - t);
      t = performance.now();
      await store.checkpointModel(run.id, lease, cp(seq + 1), { startNext: { seq: seq + 1000, toolUseId: `t${seq + 1}`, toolName: 'noop', input: { order: 'A-1042' } } });
      cpn.push(performance.now() - t);
    }
    await store.finish(run.id, lease, { status: 'SUCCEEDED', output: 'bench' });
  }
  const c = p50(commits);
  console.log(`commit ${c.toFixed(3)}  checkpoint ${p50(cps).toFixed(3)} (${(p50(cps) / c).toFixed(2)}x)  with next ${p50(cpn).toFixed(3)} (${(p50(cpn) / c).toFixed(2)}x)`);
});
