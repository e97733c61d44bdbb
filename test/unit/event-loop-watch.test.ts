import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { EventLoopWatch } from '../../src/engine/event-loop-watch.ts';
import type { HeldRun, ToolInFlight } from '../../src/engine/run-stops.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import { defineTool } from '../../src/tools/types.ts';

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until); // a synchronous computation
}

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
  defineTool({ name, description: name, inputSchema: { type: 'object' }, execute: async () => ((await run(400)), 'ok') });

describe('EventLoopWatch', () => {
  it('names a tool that blocks the loop as it starts, exactly', async () => {
    const { lines, runs, watch } = watched();
    const tools = watch.timeTools(new ToolExecutor([tool('crunch', busy), tool('idle', () => {})], 5_000));
    runs.push({ id: 'run-1', tool: { seq: 4, tool: 'crunch', idempotent: true, startedAt: performance.now() } });
    await tools.execute({ type: 'tool_use', id: 't1', name: 'crunch', input: {} }, { runId: 'run-1' as never, signal: new AbortController().signal });
    await tools.execute({ type: 'tool_use', id: 't2', name: 'idle', input: {} }, { runId: 'run-1' as never, signal: new AbortController().signal });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ event: 'event_loop_blocked', suspect: { run_id: 'run-1', step_seq: 4, tool: 'crunch' } });
    expect(lines[0]!.blocked_ms).toBeGreaterThanOrEqual(400);
  });

  it('blames a block later in a tool on the tool in flight that started last before it', async () => {
    const { lines, runs, watch } = watched();
    watch.start();
    try {
      runs.push({ id: 'run-early', tool: { seq: 2, tool: 'fetch_page', idempotent: true, startedAt: performance.now() } });
      await new Promise((r) => setTimeout(r, 120)); // a few ticks on time
      runs.push({ id: 'run-late', tool: { seq: 6, tool: 'parse_pdf', idempotent: true, startedAt: performance.now() } });
      busy(400); // as parse_pdf would after its first await
      await new Promise((r) => setTimeout(r, 120)); // the watch's next tick reports it
    } finally {
      watch.stop();
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ event: 'event_loop_blocked', runs_waiting: 2, suspect: { run_id: 'run-late', step_seq: 6, tool: 'parse_pdf' } });
  });
});
