import { describe, expect, it } from 'vitest';
import type { TimelineStep } from '../../dashboard/src/types.ts';
import { layoutWaterfall, ticks, tickStep } from '../../dashboard/src/waterfall-layout.ts';

const T0 = Date.parse('2025-06-01T10:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();

function step(
  seq: number,
  kind: 'MODEL' | 'TOOL',
  startMs: number,
  latencyMs: number | null,
  status: TimelineStep['status'] = 'DONE',
): TimelineStep {
  return {
    seq,
    kind,
    status,
    toolName: kind === 'TOOL' ? 'lookup' : null,
    toolUseId: null,
    stopReason: null,
    inputTokens: 0,
    outputTokens: 0,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
    costUsd: 0,
    attempts: 1,
    latencyMs,
    worker: 'w',
    startedAt: at(startMs),
    finishedAt: latencyMs === null ? null : at(startMs + latencyMs),
    inherited: false,
    inheritedFrom: null,
  };
}

describe('the waterfall layout', () => {
  it("places each step on one axis from the run's creation, queue time included", () => {
    const layout = layoutWaterfall({
      steps: [step(1, 'MODEL', 1000, 3000), step(2, 'TOOL', 4000, 1000)],
      originMs: T0,
      endMs: T0 + 5000,
      inFlight: false,
    });
    expect(layout.spanMs).toBe(5000);
    expect(layout.bars.map((b) => [b.seq, b.leftPct, b.widthPct, b.ongoing])).toEqual([
      [1, 20, 60, false],
      [2, 80, 20, false],
    ]);
  });

  it('grows a STARTED step to now, and shows the call in flight after the last step', () => {
    const running = layoutWaterfall({
      steps: [step(1, 'MODEL', 0, 2000), step(2, 'TOOL', 2000, null, 'STARTED')],
      originMs: T0,
      endMs: T0 + 8000,
      inFlight: false,
    });
    expect(running.bars[1]).toMatchObject({ status: 'STARTED', ongoing: true, durationMs: 6000, leftPct: 25, widthPct: 75 });

    const inFlight = layoutWaterfall({
      steps: [step(1, 'MODEL', 0, 2000), step(2, 'TOOL', 2000, 500)],
      originMs: T0,
      endMs: T0 + 10_000,
      inFlight: true,
    });
    expect(inFlight.bars.at(-1)).toMatchObject({
      seq: 3,
      kind: 'MODEL',
      status: 'IN_FLIGHT',
      ongoing: true,
      startMs: 2500,
      durationMs: 7500,
    });
  });

  it('widens the axis when a step outlasts the end it was given (clocks of two machines)', () => {
    const layout = layoutWaterfall({ steps: [step(1, 'MODEL', 0, 12_000)], originMs: T0, endMs: T0 + 10_000, inFlight: false });
    expect(layout.spanMs).toBe(12_000);
    expect(layout.bars[0]!.widthPct).toBe(100);
  });

  it('puts ticks at round intervals, at most about six', () => {
    expect(tickStep(900)).toBe(200);
    expect(tickStep(8_390)).toBe(2000);
    expect(tickStep(19_000)).toBe(5000);
    expect(tickStep(40 * 60_000)).toBe(10 * 60_000);
    expect(ticks(8_390).map((t) => t.ms)).toEqual([0, 2000, 4000, 6000, 8000]);
    for (const span of [1, 37, 999, 61_000, 3_600_000, 5 * 86_400_000]) {
      const ts = ticks(span);
      expect(ts.length).toBeGreaterThanOrEqual(2);
      expect(ts.length).toBeLessThanOrEqual(7);
      expect(ts.at(-1)!.pct).toBeLessThanOrEqual(100);
    }
  });
});
