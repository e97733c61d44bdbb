import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EventLoopWatch } from '../../src/engine/event-loop-watch.ts';
import type { HeldRun, ToolInFlight } from '../../src/engine/run-stops.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import { defineTool } from '../../src/tools/types.ts';
import { tool as zodTool } from '../../src/tools/zod-tool.ts';
import { waitFor } from '../support/wait-for.ts';

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until); // a synchronous computation
}

/** A wait that is part of the scenario (a tool's "network", the loop running freely): what the watch must tell from a block. */
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function watched() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'warn',
    destination: new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  });
  const runs: { id: string; tool: ToolInFlight | null }[] = [];
  const watch = new EventLoopWatch(logger, () => runs as unknown as HeldRun[], { thresholdMs: 300, tickMs: 50 });
  return { lines, runs, watch };
}

const tool = (name: string, run: (ms: number) => Promise<void> | void) =>
  defineTool({ name, description: name, inputSchema: { type: 'object' }, execute: async () => (await run(400), 'ok') });

/** Starts a call of `name` for `runId` through `tools`, as the engine does (its step marked in flight first). */
function call(tools: ToolExecutor, runs: { id: string; tool: ToolInFlight | null }[], runId: string, seq: number, name: string) {
  runs.push({ id: runId, tool: { seq, tool: name, idempotent: true, startedAt: performance.now() } });
  return tools.execute(
    { type: 'tool_use', id: `t-${runId}`, name, input: {} },
    { runId: runId as never, signal: new AbortController().signal },
  );
}

/** Waits until the watch has logged `n` lines (its tick after a block reports it). */
async function logged(lines: unknown[], n: number): Promise<void> {
  await waitFor(`${n} lines logged`, () => lines.length >= n, 10_000);
}

describe('EventLoopWatch', () => {
  it('names a tool that blocks the loop as it starts, exactly', async () => {
    const { lines, runs, watch } = watched();
    const tools = watch.timeTools(new ToolExecutor([tool('crunch', busy), tool('idle', () => {})], 5_000));
    runs.push({ id: 'run-1', tool: { seq: 4, tool: 'crunch', idempotent: true, startedAt: performance.now() } });
    await tools.execute(
      { type: 'tool_use', id: 't1', name: 'crunch', input: {} },
      { runId: 'run-1' as never, signal: new AbortController().signal },
    );
    await tools.execute(
      { type: 'tool_use', id: 't2', name: 'idle', input: {} },
      { runId: 'run-1' as never, signal: new AbortController().signal },
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ event: 'event_loop_blocked', suspect: { run_id: 'run-1', step_seq: 4, tool: 'crunch' } });
    expect(lines[0]!.blocked_ms).toBeGreaterThanOrEqual(400);
  });

  it('does not blame a slow tool that is only waiting when code that is not a tool blocks the loop: the runtime itself stalled', async () => {
    const { lines, runs, watch } = watched();
    watch.start();
    try {
      await watch.ready();
      const tools = watch.timeTools(new ToolExecutor([tool('fetch_page', () => sleep(3_000))], 10_000));
      const inFlight = call(tools, runs, 'run-waiting', 2, 'fetch_page');
      await sleep(120); // a few ticks on time, the tool waiting on its "network"
      busy(900); // the runtime's own work (a model reply read, thousands of steps at once)
      await logged(lines, 1);
      await inFlight;
    } finally {
      watch.stop();
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ event: 'event_loop_blocked', runs_waiting: 1 });
    expect(lines[0]!.suspect).toBeUndefined();
    expect(lines[0]!.msg).toMatch(/^event loop blocked for \d+ ms by the runtime itself, not by a tool/);
    expect((lines[0]!.running as string[])[0]).toMatch(/^busy \(.*event-loop-watch\.test\.ts:\d+\)$/);
  });

  it('names a tool whose code blocks the loop after its first await, and not a tool that started later', async () => {
    const { lines, runs, watch } = watched();
    watch.start();
    try {
      await watch.ready();
      const parse = zodTool({
        name: 'parse_pdf',
        description: 'parses',
        input: z.object({}),
        execute: async () => {
          await sleep(150);
          busy(900); // synchronous work after an await: the timing of the start cannot see it
          return 'parsed';
        },
      });
      const tools = watch.timeTools(new ToolExecutor([parse, tool('fetch_page', () => sleep(2_000))], 10_000));
      const calls = [call(tools, runs, 'run-early', 2, 'parse_pdf'), call(tools, runs, 'run-late', 6, 'fetch_page')];
      await Promise.all(calls);
    } finally {
      watch.stop();
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      event: 'event_loop_blocked',
      runs_waiting: 2,
      suspect: { run_id: 'run-early', step_seq: 2, tool: 'parse_pdf' },
    });
    expect(lines[0]!.msg).toMatch(/by tool "parse_pdf": its code was running in (the sample|all \d+ samples) of the stall/);
  });
});
