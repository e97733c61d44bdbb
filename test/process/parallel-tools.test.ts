import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Message, StepSummary } from '../../src/domain/types.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import { killAll } from '../support/child-processes.ts';
import { storedEvents, testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

/** A tool that takes `ms` and records how many calls ran at once. */
function slowTool(
  name: string,
  ms: (input: { ms?: number }) => number,
  gauge: { now: number; max: number },
  extra: Partial<Tool> = {},
): Tool {
  return defineTool<{ ms?: number }>({
    name,
    description: 'takes a while',
    inputSchema: { type: 'object' },
    ...extra,
    async execute(input, ctx) {
      gauge.now++;
      gauge.max = Math.max(gauge.max, gauge.now);
      try {
        // Kept: how long each call takes is the scenario (the overlaps are measured on it).
        await new Promise((r) => setTimeout(r, ms(input)));
        return `${name}:${ctx.idempotencyKey}`;
      } finally {
        gauge.now--;
      }
    },
  });
}

const overlap = (a: StepSummary, b: StepSummary) => a.startedAt < b.finishedAt! && b.startedAt < a.finishedAt!;
const toolResultIds = (m: Message) => (m.content as unknown as { tool_use_id: string }[]).map((b) => b.tool_use_id);

describe('tool calls of one turn', () => {
  it('never start a call that needs approval in a batch, and write the live events of every call', async () => {
    const gauge = { now: 0, max: 0 };
    const slow = slowTool('slow', () => 400, gauge);
    const guarded = slowTool('guarded', () => 400, gauge, { needsApproval: true });
    const run = await newRun(db.records, 'one needs a person');
    const llm = new ScriptedLlm()
      .thenToolUses([
        { id: 'toolu_a', name: 'slow', input: {} },
        { id: 'toolu_b', name: 'guarded', input: {} },
        { id: 'toolu_c', name: 'slow', input: {} },
      ])
      .thenText('done');
    await testWorker(db.store, llm, [slow, guarded], { name: 'W' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('WAITING');
    expect(await db.records.timeline(run.id)).toHaveLength(1); // nothing of the turn ran
    await db.records.decide(run.id, 'toolu_b', { decision: 'approve' });
    await testWorker(db.store, llm, [slow, guarded], { name: 'W' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('SUCCEEDED');
    const tools = (await db.records.timeline(run.id)).filter((s) => s.kind === 'TOOL');
    expect(tools.map((s) => [s.toolUseId, s.status])).toEqual([
      ['toolu_a', 'DONE'],
      ['toolu_b', 'DONE'],
      ['toolu_c', 'DONE'],
    ]);
    const b = tools[1]!;
    for (const other of [tools[0]!, tools[2]!]) expect(overlap(b, other)).toBe(false);
    const rows = (await storedEvents(db.pool, run.id)).map((e) => ({ type: e.type, data: JSON.parse(e.data) as { seq: number } }));
    for (const t of tools) {
      for (const type of ['tool.started', 'tool.finished', 'step.finished']) {
        expect(
          rows.filter((r) => r.type === type && r.data.seq === t.seq),
          `${type} of seq ${t.seq}`,
        ).toHaveLength(1);
      }
    }
  });

  it('run at the same time when idempotent, and their results reach the model in tool_use order', async () => {
    const gauge = { now: 0, max: 0 };
    const slow = slowTool('slow', (i) => i.ms ?? 800, gauge);
    const run = await newRun(db.records, 'three at once');
    // Finishing order is the reverse of the turn's order.
    const llm = new ScriptedLlm()
      .thenToolUses([
        { id: 'toolu_a', name: 'slow', input: { ms: 900 } },
        { id: 'toolu_b', name: 'slow', input: { ms: 600 } },
        { id: 'toolu_c', name: 'slow', input: { ms: 300 } },
      ])
      .thenText('all three done');
    await testWorker(db.store, llm, [slow], { name: 'W' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('SUCCEEDED');
    const tools = (await db.records.timeline(run.id)).filter((s) => s.kind === 'TOOL');
    expect(tools.map((s) => s.status)).toEqual(['DONE', 'DONE', 'DONE']);
    expect(new Set(tools.map((s) => s.seq)).size).toBe(3);
    for (const a of tools) for (const b of tools) if (a !== b) expect(overlap(a, b)).toBe(true);
    expect(gauge.max).toBe(3);
    const sent = llm.seen[1]!.messages.at(-1)!;
    expect(toolResultIds(sent)).toEqual(['toolu_a', 'toolu_b', 'toolu_c']);
    expect((sent.content as unknown as { content: string }[]).map((b) => b.content)).toEqual([
      'slow:toolu_a',
      'slow:toolu_b',
      'slow:toolu_c',
    ]);
  });

  it('never run a non-idempotent call alongside another, and keep the turn order around it', async () => {
    const gauge = { now: 0, max: 0 };
    const idem = slowTool('idem', () => 300, gauge);
    const once = slowTool('once', () => 300, gauge, { idempotent: false });
    const run = await newRun(db.records, 'mixed');
    const llm = new ScriptedLlm()
      .thenToolUses([
        { id: 'toolu_1', name: 'idem', input: {} },
        { id: 'toolu_2', name: 'idem', input: {} },
        { id: 'toolu_3', name: 'once', input: {} },
        { id: 'toolu_4', name: 'idem', input: {} },
        { id: 'toolu_5', name: 'idem', input: {} },
      ])
      .thenText('done');
    await testWorker(db.store, llm, [idem, once], { name: 'W' }).runOnce();
    expect((await db.records.state(run.id)).status).toBe('SUCCEEDED');
    const byId = new Map((await db.records.timeline(run.id)).filter((s) => s.kind === 'TOOL').map((s) => [s.toolUseId!, s]));
    const [t1, t2, t3, t4, t5] = ['toolu_1', 'toolu_2', 'toolu_3', 'toolu_4', 'toolu_5'].map((id) => byId.get(id)!);
    expect(overlap(t1!, t2!)).toBe(true);
    expect(overlap(t4!, t5!)).toBe(true);
    for (const other of [t1, t2, t4, t5]) expect(overlap(t3!, other!)).toBe(false);
    expect(t3!.startedAt >= t2!.finishedAt! && t3!.startedAt >= t1!.finishedAt!).toBe(true);
    expect(t4!.startedAt >= t3!.finishedAt!).toBe(true);
    expect(toolResultIds(llm.seen[1]!.messages.at(-1)!)).toEqual(['toolu_1', 'toolu_2', 'toolu_3', 'toolu_4', 'toolu_5']);
  });

  it("are bounded by the concurrency setting and by a tool's own limit", async () => {
    const wide = { now: 0, max: 0 };
    const narrow = { now: 0, max: 0 };
    const free = slowTool('free', () => 200, wide);
    const single = slowTool('single', () => 200, narrow, { concurrency: 1 });
    await newRun(db.records, 'bounded');
    const uses = [0, 1, 2, 3, 4].flatMap((i) => [
      { id: `toolu_f${i}`, name: 'free', input: {} },
      { id: `toolu_s${i}`, name: 'single', input: {} },
    ]);
    const llm = new ScriptedLlm().thenToolUses(uses).thenText('done');
    await testWorker(db.store, llm, [free, single], { name: 'W', toolConcurrency: 3 }).runOnce();
    expect(wide.max).toBeGreaterThanOrEqual(2);
    expect(wide.max + narrow.max).toBeLessThanOrEqual(3);
    expect(narrow.max).toBe(1);
    expect(toolResultIds(llm.seen[1]!.messages.at(-1)!)).toEqual(uses.map((u) => u.id));
  });
});

describe('a worker killed mid-turn', () => {
  const children: ChildProcess[] = [];
  afterEach(async () => {
    await killAll(children);
  });

  /** The tool keys each worker process ran, from its output. */
  function startWorker(name: string, ran: string[]): ChildProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/parallel-tools-worker-process.ts')], {
      env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, LEASE_MS: '1500' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        const event = JSON.parse(line) as { event: string; key?: string };
        if (event.event === 'tool') ran.push(event.key!);
      }
    });
    return child;
  }

  it('after one of three calls finished re-runs only the other two, each with its own key', async () => {
    const run = await newRun(db.records, 'survive a kill -9 mid-turn');
    const ranByA: string[] = [];
    const a = startWorker('worker-A', ranByA);
    // One call is quick, two are slow: kill A once the quick one is DONE and the slow ones are STARTED.
    await waitFor(
      'one call done and two running',
      async () => {
        const tools = (await db.store.steps(run.id)).filter((s) => s.kind === 'TOOL');
        return tools.filter((s) => s.status === 'DONE').length === 1 && tools.filter((s) => s.status === 'STARTED').length === 2;
      },
      30_000,
    );
    a.kill('SIGKILL');
    await new Promise((r) => a.once('exit', r));
    expect(ranByA.sort()).toEqual(['toolu_fast', 'toolu_slow1', 'toolu_slow2']);

    const ranByB: string[] = [];
    startWorker('worker-B', ranByB);
    await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
    expect(ranByB.sort()).toEqual(['toolu_slow1', 'toolu_slow2']);
    const steps = await db.store.steps(run.id);
    expect(
      steps
        .filter((s) => s.kind === 'TOOL')
        .map((s) => [s.toolUseId, s.status, s.worker])
        .sort(),
    ).toEqual([
      ['toolu_fast', 'DONE', 'worker-A'],
      ['toolu_slow1', 'DONE', 'worker-B'],
      ['toolu_slow2', 'DONE', 'worker-B'],
    ]);
    // The final answer quotes the results as the model received them: in tool_use order.
    expect((await db.records.state(run.id)).output).toBe('toolu_fast,toolu_slow1,toolu_slow2');
  });
});
