/**
 * Where each step's bar goes on the waterfall's shared time axis, which starts when the run was
 * created (so time in the queue shows as the gap before the first bar). Pure, so it is tested alone.
 */
import type { StepKind, StepStatus, TimelineStep } from './types.ts';

export interface WaterfallBar {
  seq: number;
  kind: StepKind;
  /** The step's status, or IN_FLIGHT for the call a running run is making now (not recorded yet). */
  status: StepStatus | 'IN_FLIGHT';
  /** From the axis origin. */
  startMs: number;
  durationMs: number;
  /** Still going: the bar grows with time. */
  ongoing: boolean;
  leftPct: number;
  widthPct: number;
}

export interface Tick {
  ms: number;
  pct: number;
}

export interface WaterfallLayout {
  spanMs: number;
  bars: WaterfallBar[];
  ticks: Tick[];
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const TICK_STEPS = [
  1,
  2,
  5,
  10,
  20,
  50,
  100,
  200,
  250,
  500,
  SECOND,
  2 * SECOND,
  5 * SECOND,
  10 * SECOND,
  15 * SECOND,
  30 * SECOND,
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  24 * HOUR,
];

/** The smallest round interval that splits `spanMs` into at most `maxTicks` parts. */
export function tickStep(spanMs: number, maxTicks = 6): number {
  const rough = spanMs / maxTicks;
  return TICK_STEPS.find((s) => s >= rough) ?? Math.ceil(rough / (24 * HOUR)) * 24 * HOUR;
}

export function ticks(spanMs: number, maxTicks = 6): Tick[] {
  const step = tickStep(spanMs, maxTicks);
  const out: Tick[] = [];
  for (let ms = 0; ms <= spanMs + 1e-9; ms += step) out.push({ ms, pct: (100 * ms) / spanMs });
  return out;
}

export interface LayoutInput {
  steps: readonly TimelineStep[];
  /** The run's creation time, epoch ms: the axis starts here. */
  originMs: number;
  /** The run's end, or now while it is active, epoch ms. */
  endMs: number;
  /** The run is being driven and no step is STARTED: a model call is in flight since the last step ended. */
  inFlight: boolean;
}

export function layoutWaterfall({ steps, originMs, endMs, inFlight }: LayoutInput): WaterfallLayout {
  const raw = steps.map((s) => {
    const start = Date.parse(s.startedAt) - originMs;
    const finished = s.finishedAt ? Date.parse(s.finishedAt) - originMs : null;
    const ongoing = s.status === 'STARTED';
    const end = finished ?? (ongoing ? endMs - originMs : start + (s.latencyMs ?? 0));
    return {
      seq: s.seq,
      kind: s.kind,
      status: s.status as WaterfallBar['status'],
      startMs: start,
      durationMs: Math.max(0, end - start),
      ongoing,
    };
  });
  if (inFlight) {
    const last = raw.at(-1);
    const start = last ? last.startMs + last.durationMs : 0;
    raw.push({
      seq: (last?.seq ?? 0) + 1,
      kind: 'MODEL',
      status: 'IN_FLIGHT',
      startMs: start,
      durationMs: Math.max(0, endMs - originMs - start),
      ongoing: true,
    });
  }
  const spanMs = Math.max(1, endMs - originMs, ...raw.map((b) => b.startMs + b.durationMs));
  const bars = raw.map((b) => ({
    ...b,
    leftPct: Math.min(100, Math.max(0, (100 * b.startMs) / spanMs)),
    widthPct: Math.min(100, (100 * b.durationMs) / spanMs),
  }));
  return { spanMs, bars, ticks: ticks(spanMs) };
}
