/**
 * Wake-up latencies of waiting runs, with one idle worker: a due timer (the `sleep` tool's wakeAt →
 * its result recorded) and an approval (the decision committed → the approved tool's step started).
 * Both are the worker's own doing: one timer for the nearest due run, and NOTIFY.
 */
import type pg from 'pg';
import type { RunId } from '../src/domain/types.ts';
import type { Worker } from '../src/engine/worker.ts';
import type { LlmClient, LlmRequest, LlmResponse } from '../src/llm/types.ts';
import type { RunRecords } from '../src/store/run-records.ts';
import type { RunStore } from '../src/store/run-store.ts';
import { sleepTool } from '../src/tools/sleep-tool.ts';
import type { Tool } from '../src/tools/types.ts';

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number) => sorted(xs)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

/** One call of `tool` with `input`, then the answer. */
function oneCall(tool: string, input: unknown): LlmClient {
  let n = 0;
  return {
    provider: 'bench',
    async send(req: LlmRequest): Promise<LlmResponse> {
      const first = req.messages.length === 1;
      const content = first
        ? [{ type: 'tool_use', id: `toolu_w${++n}_${Math.random().toString(36).slice(2)}`, name: tool, input }]
        : [{ type: 'text', text: 'done' }];
      const usage = { inputTokens: 10, outputTokens: 5, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
      return { id: null, model: 'bench', content, stopReason: first ? 'tool_use' : 'end_turn', usage, requestId: null, attempts: 1 };
    },
  };
}

export interface WaitingBench {
  pool: pg.Pool;
  store: RunStore;
  records: RunRecords;
  newRun: () => Promise<{ id: RunId }>;
  worker: (llm: LlmClient, tool: Tool, concurrency: number) => Worker;
}

async function until(pool: pg.Pool, ids: RunId[], statuses: string[]): Promise<void> {
  for (;;) {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM durable_agent.run WHERE id = ANY($1) AND NOT (status = ANY($2))`, [
      ids,
      statuses,
    ]);
    if (rows[0].n === 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function benchWaiting(b: WaitingBench): Promise<Record<string, number>> {
  // Timers: 30 runs that each sleep 1 s, started 100 ms apart, so each comes due with the worker idle.
  const timer = b.worker(oneCall('sleep', { seconds: 1 }), sleepTool(), 8);
  await timer.start();
  const sleepers: RunId[] = [];
  for (let i = 0; i < 30; i++) {
    sleepers.push((await b.newRun()).id);
    await new Promise((r) => setTimeout(r, 100));
  }
  await until(b.pool, sleepers, ['SUCCEEDED']);
  await timer.stop();
  const { rows: late } = await b.pool.query<{ ms: number }>(
    `SELECT (extract(epoch FROM s.finished_at - (r.waiting->>'wakeAt')::timestamptz) * 1000)::float8 AS ms
     FROM durable_agent.run r JOIN durable_agent.run_step s ON s.run_id = r.id AND s.kind = 'TOOL' WHERE r.id = ANY($1)`,
    [sleepers],
  );
  const timerMs = late.map((r) => Number(r.ms));

  // Approvals: 30 runs wait for approval; each decision is made with the worker idle.
  const approved: Tool = {
    name: 'approved',
    description: 'needs approval',
    inputSchema: { type: 'object' },
    needsApproval: true,
    execute: async () => 'ok',
  };
  const approver = b.worker(oneCall('approved', {}), approved, 8);
  await approver.start();
  const waiting: RunId[] = [];
  for (let i = 0; i < 30; i++) waiting.push((await b.newRun()).id);
  await until(b.pool, waiting, ['WAITING']);
  for (const id of waiting) {
    const run = await b.records.get(id);
    await b.records.decide(id, run!.waiting!.toolCalls[0]!.toolUseId, { decision: 'approve' });
    await until(b.pool, [id], ['SUCCEEDED']);
  }
  await approver.stop();
  const { rows: woke } = await b.pool.query<{ ms: number }>(
    `SELECT (extract(epoch FROM s.started_at - d.decided_at) * 1000)::float8 AS ms
     FROM durable_agent.tool_decision d JOIN durable_agent.run_step s ON s.run_id = d.run_id AND s.tool_use_id = d.tool_use_id AND s.kind = 'TOOL'
     WHERE d.run_id = ANY($1)`,
    [waiting],
  );
  const approvalMs = woke.map((r) => Number(r.ms));
  const r3 = (x: number) => Number(x.toFixed(3));
  return {
    timerWakeP50Ms: r3(pct(timerMs, 50)),
    timerWakeP99Ms: r3(pct(timerMs, 99)),
    approvalWakeP50Ms: r3(pct(approvalMs, 50)),
    approvalWakeP99Ms: r3(pct(approvalMs, 99)),
  };
}
