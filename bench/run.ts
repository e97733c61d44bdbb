/**
 * `npm run bench`: the runtime's overhead against the physical floor of the PostgreSQL it would use
 * (DATABASE_URL, or the embedded one under ./.data). Works in a scratch database that it drops after.
 * Prints a table and writes bench/results/latest.json; then the agent-loop scenario (bench/agent-loop.ts,
 * sizes chosen by BENCH_AGENT_LOOP=quick|full|off|100@0,…).
 */
import { randomBytes } from 'node:crypto';
import { listenForWorker } from '../src/db/notifications.ts';
import type { RunId } from '../src/domain/types.ts';
import { Worker } from '../src/engine/worker.ts';
import { chainBench } from './chain.ts';
import type { LlmClient, LlmRequest, LlmResponse } from '../src/llm/types.ts';
import { createLogger } from '../src/observability/logger.ts';
import { leaseKeeperThread } from '../src/leases/lease-keeper-thread.ts';
import { RunStore } from '../src/store/run-store.ts';
import { RunRecords } from '../src/store/run-records.ts';
import { Sealer } from '../src/store/encryption.ts';
import type { Lease } from '../src/ports/engine-store.ts';
import { ToolExecutor } from '../src/tools/executor.ts';
import type { Tool } from '../src/tools/types.ts';
import { forkCost } from './fork-cost.ts';
import { benchEvents } from './events.ts';
import { benchWaiting } from './waiting.ts';
import { resumeLatencies } from './resume-latency.ts';
import { agentLoopBench } from './agent-loop.ts';
import { mergeIntoLatest, withScratchDatabase } from './scratch-database.ts';
import { benchWorkspace } from './workspace.ts';
import { benchSchedules } from './schedules.ts';
import { benchPooler } from './pooler.ts';

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));

/** A zero-latency model: `turns(req)` decides the tool calls of each turn; none left means answer. */
function scriptedModel(toolCalls: (assistantTurns: number) => number): LlmClient {
  let n = 0;
  return {
    provider: 'bench',
    async send(req: LlmRequest): Promise<LlmResponse> {
      const turns = req.messages.filter((m) => m.role === 'assistant').length;
      const calls = toolCalls(turns);
      const content = calls
        ? Array.from({ length: calls }, () => ({ type: 'tool_use', id: `toolu_${++n}`, name: 'noop', input: {} }))
        : [{ type: 'text', text: 'done' }];
      const usage = { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
      return { id: null, model: 'bench', content, stopReason: calls ? 'tool_use' : 'end_turn', usage, requestId: null, attempts: 1 };
    },
  };
}

const noop = (result: string): Tool => ({
  name: 'noop',
  description: 'returns at once',
  inputSchema: { type: 'object' },
  execute: async () => result,
});

async function main() {
  await withScratchDatabase(async (urlText, pool, description, batches) => {
    const url = new URL(urlText);
    const logger = createLogger({ level: 'silent' });
    const store = new RunStore(pool, { batches });
    const records = new RunRecords(pool);

    // The same writes with ENCRYPTION_KEY set: every payload sealed with AES-256-GCM as it is written.
    const sealer = new Sealer([{ id: 'bench', key: randomBytes(32) }]);
    const sealedStore = new RunStore(pool, { sealer, batches });
    const sealedRecords = new RunRecords(pool, { sealer });

    const newRun = (maxSteps = 1000) =>
      records.create({ input: 'bench', model: 'bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps });
    const owner = { worker: 'bench', leaseMs: 60_000 };
    const results: Record<string, number | string> = { database: description, at: new Date().toISOString() };

    // The floor, a single-row INSERT committed on its own (one round trip, one WAL flush) of a row the
    // size of the model step's (its content), measured in turn with a fenced model checkpoint and a
    // tool step as the driver writes them, so that all three see the same disk and the same load
    // (commit latency here drifts from minute to minute).
    await pool.query('CREATE TABLE bench_commit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text)');
    const commits: number[] = [];
    const checkpoints: number[] = [];
    const toolSteps: number[] = [];
    const sealedCheckpoints: number[] = [];
    const sealedToolSteps: number[] = [];
    const tools = new ToolExecutor([noop('ok')], 10_000);
    // A model turn with some text and a tool call, a tool result of a kilobyte: what sealing works on.
    const prose = 'The order was shipped on Tuesday and should arrive within three working days. '.repeat(6);
    const result = JSON.stringify({
      order: 'A-1042',
      items: Array.from({ length: 12 }, (_, i) => ({ sku: `SKU-${i}`, qty: i + 1, note: 'in stock' })),
    });
    const content = (seq: number) => [
      { type: 'text' as const, text: prose },
      { type: 'tool_use' as const, id: `t${seq}`, name: 'noop', input: { order: 'A-1042' } },
    ];
    const floorRow = JSON.stringify(content(1));
    const steps = async (s: RunStore, run: RunId, lease: Lease, seq: number, into: { checkpoints: number[]; tools: number[] }) => {
      const t = performance.now();
      await s.checkpointModel(run, lease, {
        seq,
        request: { model: 'bench', maxTokens: 1024, systemDigest: null, toolsDigest: null },
        content: content(seq),
        stopReason: 'tool_use',
        usage: { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
        budgetTokens: 120,
        attempts: 1,
        costUsd: 0.001,
        latencyMs: 0,
      });
      into.checkpoints.push(performance.now() - t);
      const t2 = performance.now();
      await s.startTool(run, lease, { seq: seq + 1, toolUseId: `t${seq}`, toolName: 'noop', input: { order: 'A-1042' } });
      const out = await tools.execute(
        { type: 'tool_use', id: `t${seq}`, name: 'noop', input: {} },
        { runId: run, signal: new AbortController().signal },
      );
      await s.finishTool(run, lease, {
        toolUseId: `t${seq}`,
        status: out.status,
        result: out.status === 'DONE' ? result : out.result,
        latencyMs: 0,
      });
      into.tools.push(performance.now() - t2);
    };
    for (let r = 0; r < 10; r++) {
      const run = await newRun();
      const lease = (await store.claim(owner, 1))[0]!.lease;
      const sealedRun = await sealedRecords.create({
        input: 'bench',
        model: 'bench',
        tokenBudget: 10_000_000,
        timeoutSeconds: 3600,
        maxSteps: 1000,
      });
      const sealedLease = (await sealedStore.claim(owner, 1))[0]!.lease;
      for (let seq = 1; seq <= 400; seq += 2) {
        const t0 = performance.now();
        await pool.query('INSERT INTO bench_commit (body) VALUES ($1)', [floorRow]);
        commits.push(performance.now() - t0);
        await steps(store, run.id, lease, seq, { checkpoints, tools: toolSteps });
        await steps(sealedStore, sealedRun.id, sealedLease, seq, { checkpoints: sealedCheckpoints, tools: sealedToolSteps });
      }
      await store.finish(run.id, lease, { status: 'SUCCEEDED', output: 'bench' });
      await sealedStore.finish(sealedRun.id, sealedLease, { status: 'SUCCEEDED', output: 'bench' });
    }
    results.commitP50Ms = round(p50(commits));
    results.modelCheckpointP50Ms = round(p50(checkpoints));
    results.toolStepP50Ms = round(p50(toolSteps));
    results.modelCheckpointEncryptedP50Ms = round(p50(sealedCheckpoints));
    results.toolStepEncryptedP50Ms = round(p50(sealedToolSteps));

    const worker = (llm: LlmClient, tool: Tool, concurrency: number, events = {}) =>
      new Worker(
        {
          store,
          llm,
          agent: { system: 'bench', tools: new ToolExecutor([tool], 10_000), maxTokens: 1024 },
          costOf: () => 0,
          logger,
          events: [events],
          subscribe: (on) => listenForWorker(url.toString(), on, () => {}),
          leaseKeeper: leaseKeeperThread(url.toString()),
        },
        {
          name: 'bench-worker',
          concurrency,
          leaseMs: 60_000,
          maxRunAttempts: 5,
          pollIntervalMs: 1000,
          shutdownGraceMs: 5000,
          requeueDelayMs: 1000,
        },
      );
    const untilDone = async (ids: RunId[]) => {
      for (;;) {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM durable_agent.run WHERE id = ANY($1) AND status IN ('QUEUED','RUNNING')`,
          [ids],
        );
        if (rows[0].n === 0) return;
        await new Promise((r) => setTimeout(r, 5));
      }
    };

    // Throughput: 100 concurrent runs of 10 steps each (tool turns of 1, 1, 1, 2 calls, then the answer).
    // Two warm-up rounds (JIT, connections, statements prepared on each), then the median of three.
    {
      const rounds: number[] = [];
      for (let round = 0; round < 5; round++) {
        const ids: RunId[] = [];
        for (let i = 0; i < 100; i++) ids.push((await newRun()).id);
        let finished = 0;
        let allDone!: () => void;
        const done = new Promise<void>((r) => (allDone = r));
        const w = worker(
          scriptedModel((turns) => [1, 1, 1, 2][turns] ?? 0),
          noop('ok'),
          100,
          {
            runFinished: () => ++finished === 100 && allDone(),
          },
        );
        // Timed from the first claim: starting a worker (its lease keeper thread, its connections) is
        // not part of the steps. start() returns as its claim loop begins.
        await w.start();
        const t = performance.now();
        await done;
        const seconds = (performance.now() - t) / 1000;
        await w.stop();
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM durable_agent.run_step s JOIN durable_agent.run r ON r.id = s.run_id WHERE r.id = ANY($1) AND r.status = 'SUCCEEDED'`,
          [ids],
        );
        if (rows[0].n !== 1000) throw new Error(`throughput runs did not all succeed with 10 steps (${rows[0].n} steps)`);
        if (round > 1) rounds.push(Math.round(rows[0].n / seconds));
      }
      results.stepsPerSecond = p50(rounds);
      results.stepsPerSecondRounds = rounds.join(', ');
    }

    // Latency from a committed POST to the first checkpointed step, with an idle worker woken by NOTIFY.
    {
      const w = worker(
        scriptedModel(() => 0),
        noop('ok'),
        4,
      );
      await w.start();
      await new Promise((r) => setTimeout(r, 200));
      const samples: number[] = [];
      for (let i = 0; i < 50; i++) {
        const run = await newRun();
        await untilDone([run.id]);
        const { rows } = await pool.query<{ ms: number }>(
          `SELECT extract(epoch FROM (s.finished_at - r.created_at)) * 1000 AS ms FROM durable_agent.run r JOIN durable_agent.run_step s ON s.run_id = r.id AND s.seq = 1 WHERE r.id = $1`,
          [run.id],
        );
        samples.push(Number(rows[0]!.ms));
      }
      await w.stop();
      results.queuedToFirstStepP50Ms = round(p50(samples));
    }

    // A 200-step run with 2 KB tool results: cost per step early and late, and storage growth.
    {
      const result = randomBytes(1536).toString('base64'); // 2,048 characters
      const at = new Map<number, number>();
      const mark = (e: { seq: number }) => at.set(e.seq, performance.now());
      const run = await newRun(1000);
      const w = worker(
        scriptedModel((turns) => (turns < 105 ? 1 : 0)),
        noop(result),
        1,
        { modelStep: mark, toolStep: mark },
      );
      await w.start();
      await untilDone([run.id]);
      await w.stop();
      // The median time between consecutive steps over 20 steps around step 10 and around step 200.
      const perStep = (from: number) => p50(Array.from({ length: 20 }, (_, i) => at.get(from + i + 1)! - at.get(from + i)!));
      results.perStepMsAt10 = round(perStep(1));
      results.perStepMsAt200 = round(perStep(190));
      const bytes = async (upTo: number) =>
        Number(
          (
            await pool.query(`SELECT sum(pg_column_size(s.*))::bigint AS b FROM durable_agent.run_step s WHERE run_id = $1 AND seq <= $2`, [
              run.id,
              upTo,
            ])
          ).rows[0].b,
        );
      results.storageBytesAt10 = await bytes(10);
      results.storageBytesAt200 = await bytes(200);
    }

    // The timeline of a run whose one tool step returned 10 MB (stored whole, as a tool result written
    // straight to the store is): the timeline read never selects the bodies, the log read does.
    {
      const run = await newRun();
      const lease = (await store.claim(owner, 1))[0]!.lease;
      await store.startTool(run.id, lease, { seq: 1, toolUseId: 'big', toolName: 'noop' });
      await store.finishTool(run.id, lease, { toolUseId: 'big', status: 'DONE', result: 'x'.repeat(10_000_000), latencyMs: 0 });
      const time = async (read: () => Promise<unknown>) => {
        const samples: number[] = [];
        for (let i = 0; i < 10; i++) {
          const t = performance.now();
          await read();
          samples.push(performance.now() - t);
        }
        return round(p50(samples));
      };
      results.timelineWith10MbResultP50Ms = await time(() => records.timeline(run.id));
      results.fullLogWith10MbResultP50Ms = await time(() => store.steps(run.id));
      await store.finish(run.id, lease, { status: 'SUCCEEDED', output: 'bench' });
    }

    // A fork of a 10-step and of a 1,000-step source: its cost must not grow with the source.
    Object.assign(results, await forkCost(pool, store, records));
    Object.assign(
      results,
      await chainBench({ records, worker: (llm, tool, concurrency, events) => worker(llm, tool, concurrency, events), untilDone }),
    );
    // Live events: streaming's cost, delivery to many readers, storage (bench/events.ts).
    const events = await benchEvents({ pool, url: url.toString(), store, records, logger });
    Object.assign(results, events.results);
    // Waiting runs woken by a due timer and by an approval, with the worker idle.
    Object.assign(
      results,
      await benchWaiting({ pool, store, records, newRun: () => newRun(), worker: (llm, tool, n) => worker(llm, tool, n) }),
    );
    // Workspaces: a save after a one-file change, a rebuild of 10,000 files, a command's start in the sandbox.
    const workspace = await benchWorkspace(pool, records);
    Object.assign(results, workspace.results);
    // Schedules: a minute of 10,000 of them, and ordinary claims meanwhile.
    const schedules = await benchSchedules(pool);
    Object.assign(results, schedules.results);
    // The throughput scenario again, through PgBouncer in transaction mode and directly, in turn.
    const pooler = await benchPooler(url.toString(), pool);
    Object.assign(results, pooler.results);
    // A worker killed mid-step under the default 30 s lease: how soon another live worker resumes its run.
    {
      const ms = (await resumeLatencies(url.toString(), pool, 5)).sort((a, b) => a - b);
      results.resumeAfterKillP50Ms = p50(ms);
      results.resumeAfterKillMaxMs = ms[ms.length - 1]!;
    }

    const num = (k: string) => results[k] as number;
    const rows: [string, string, string][] = [
      ['bare INSERT commit p50 (floor)', `${num('commitP50Ms')} ms`, "a row the size of the model step's"],
      [
        'model checkpoint p50',
        `${num('modelCheckpointP50Ms')} ms`,
        `${round(num('modelCheckpointP50Ms') / num('commitP50Ms'), 2)}× floor (target ≤ 1.5×)`,
      ],
      ['tool step overhead p50', `${num('toolStepP50Ms')} ms`, 'STARTED + execute + DONE, zero-latency tool'],
      [
        '  with ENCRYPTION_KEY: model',
        `${num('modelCheckpointEncryptedP50Ms')} ms`,
        `${round(num('modelCheckpointEncryptedP50Ms') / num('modelCheckpointP50Ms'), 2)}× the plain checkpoint`,
      ],
      [
        '  with ENCRYPTION_KEY: tool',
        `${num('toolStepEncryptedP50Ms')} ms`,
        `${round(num('toolStepEncryptedP50Ms') / num('toolStepP50Ms'), 2)}× the plain tool step`,
      ],
      ['steps per second', `${num('stepsPerSecond')}`, '100 runs × 10 steps, one worker (target ≥ 2,100)'],
      ['queued → first step p50', `${num('queuedToFirstStepP50Ms')} ms`, 'NOTIFY wake-up'],
      [
        'per step at 10 / at 200',
        `${num('perStepMsAt10')} / ${num('perStepMsAt200')} ms`,
        `${round(num('perStepMsAt200') / num('perStepMsAt10'), 2)}× (target ≤ 1.2×)`,
      ],
      [
        'timeline, 10 MB result in the log',
        `${num('timelineWith10MbResultP50Ms')} ms`,
        `the full log read: ${num('fullLogWith10MbResultP50Ms')} ms`,
      ],
      [
        'fork of 10 / 1,000 steps p50',
        `${num('forkP50MsAt10')} / ${num('forkP50MsAt1000')} ms`,
        `${round(num('forkP50MsAt1000') / num('forkP50MsAt10'), 2)}× (target ≈ 1×; nothing copied)`,
      ],
      [
        'fork stores, 10 / 1,000 steps',
        `${num('forkBytesAt10')} / ${num('forkBytesAt1000')} B`,
        `one run row each; step rows added by 62 forks: ${num('forkStepRowsAdded')}`,
      ],
      [
        "fork's log read, 10 / 1,000",
        `${num('forkLogReadP50MsAt10')} / ${num('forkLogReadP50MsAt1000')} ms`,
        'the inherited conversation, read on its first claim',
      ],
      [
        'per step: a run / 100th of a chain',
        `${num('chainPerStepMsSingle')} / ${num('chainPerStepMsAt100th')} ms`,
        `${round(num('chainPerStepMsAt100th') / num('chainPerStepMsSingle'), 2)}×; the chain is read once per claim: ${num('chainReadAtClaimP50Ms')} ms`,
      ],
      [
        'due timer → woken p50 / p99',
        `${num('timerWakeP50Ms')} / ${num('timerWakeP99Ms')} ms`,
        'wakeAt → sleep result recorded, idle worker (target ≤ 50 ms)',
      ],
      [
        'approval → step started p50 / p99',
        `${num('approvalWakeP50Ms')} / ${num('approvalWakeP99Ms')} ms`,
        'decision committed → tool step started (target ≤ 50 ms)',
      ],
      [
        'resume after SIGKILL p50 / max',
        `${num('resumeAfterKillP50Ms')} / ${num('resumeAfterKillMaxMs')} ms`,
        'default 30 s lease; a live worker takes the run over',
      ],
      [
        'storage after 10 / 200 steps',
        `${num('storageBytesAt10')} / ${num('storageBytesAt200')} B`,
        `${round(num('storageBytesAt200') / num('storageBytesAt10'), 1)}× (target ≤ 25×)`,
      ],
      ...events.rows,
      ...workspace.rows,
      ...schedules.rows,
      ...pooler.rows,
    ];
    console.log(`durable-agent bench on ${description}\n`);
    for (const [k, v, note] of rows) console.log(`${k.padEnd(32)} ${v.padStart(16)}   ${note}`);
    console.log('');
    const agentLoop = await agentLoopBench(url.toString(), pool);
    mergeIntoLatest({ ...results, ...(agentLoop.length ? { agentLoop } : {}) });
  });
}

await main();
process.exit(0);
