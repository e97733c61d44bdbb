/**
 * Named crash points: the windows of the step path where a crash has a distinct consequence, marked in
 * the engine so a test can stop a worker exactly there and prove what a crash at that moment costs.
 *
 *   after-model-response  the model answered; its checkpoint is not written (the call is repeated once)
 *   mid-checkpoint        a model step's checkpoint is sent; the worker dies before its answer (it may or
 *                         may not have committed: the call is repeated at most once)
 *   after-checkpoint      a model step's checkpoint committed; the worker never learns it (nothing repeats)
 *   before-tool-start     a tool call is next; its STARTED row is not written yet
 *   after-tool-effect     the tool ran (its effect happened); its result is not recorded
 *   before-tool-finish    the tool's result is about to be recorded
 *   mid-stream            a streamed model reply is partly received (with a follower, a batch of its
 *                         text is committed; without, some of it has arrived)
 *
 * Inert unless armed: an unarmed point costs one comparison. Armed programmatically (tests), the n-th
 * hit throws CrashPointError, a FatalError: the attempt ends with nothing recorded, as a crash would.
 * Armed from configuration (DURABLE_AGENT_CRASH_AT=<name>[:<n>]), the n-th hit kills the process with
 * SIGKILL: no finally block, no shutdown, no lease released.
 */
import type { RunId } from '../domain/types.ts';
import { FatalError } from '../domain/errors.ts';

export const CRASH_POINTS = [
  'after-model-response',
  'after-checkpoint',
  'before-tool-start',
  'after-tool-effect',
  'before-tool-finish',
  'mid-stream',
  'mid-checkpoint',
  'after-compaction',
] as const;
export type CrashPointName = (typeof CRASH_POINTS)[number];

/** Thrown by an armed crash point: the worker "dies" here. */
export class CrashPointError extends FatalError {
  constructor(
    readonly point: CrashPointName,
    readonly runId: RunId,
  ) {
    super(`crash point ${point} reached (run ${runId})`);
  }
}

export interface CrashPlan {
  point: CrashPointName;
  /** Which hit crashes: 1 for the first time the point is reached. Default 1. */
  hit?: number;
  /** Only hits in this run count (default: any run). */
  runId?: RunId;
  /** `throw` a CrashPointError (default), or `kill` the process with SIGKILL. */
  action?: 'throw' | 'kill';
}

interface Armed extends Required<Omit<CrashPlan, 'runId'>> {
  runId: RunId | null;
  hits: number;
}

let armed: Armed | null = null;

/** Arms one crash point (replacing any armed before); it disarms itself when it fires. */
export function armCrashPoint(plan: CrashPlan): void {
  armed = { point: plan.point, hit: plan.hit ?? 1, runId: plan.runId ?? null, action: plan.action ?? 'throw', hits: 0 };
}

export function disarmCrashPoints(): void {
  armed = null;
}

export function crashPoint(point: CrashPointName, runId: RunId): void {
  if (armed === null) return;
  fire(armed, point, runId);
}

/**
 * A crash point in the middle of a write: when armed for `point`, lets the write go out (one turn of
 * the event loop: a pooled connection is handed over and the statement sent), then fires; the write's
 * own outcome otherwise. Unarmed, it costs one comparison and no turn, and is the write itself.
 */
export function crashPointDuring<T>(point: CrashPointName, runId: RunId, write: Promise<T>): Promise<T> {
  if (armed === null || armed.point !== point) return write;
  write.catch(() => {}); // a thrown crash leaves the write to settle unobserved
  return new Promise((resolve) => setImmediate(resolve)).then(() => {
    crashPoint(point, runId);
    return write;
  });
}

function fire(a: Armed, point: CrashPointName, runId: RunId): void {
  if (a.point !== point || (a.runId !== null && a.runId !== runId)) return;
  if (++a.hits < a.hit) return;
  armed = null;
  if (a.action === 'kill') process.kill(process.pid, 'SIGKILL');
  throw new CrashPointError(point, runId);
}

/** Parses `<name>[:<n>]`; throws with a readable message for anything else. */
export function parseCrashPlan(text: string): CrashPlan {
  const m = /^([a-z-]+)(?::([1-9]\d{0,5}))?$/.exec(text);
  const point = CRASH_POINTS.find((p) => p === m?.[1]);
  if (!m || !point) throw new Error(`expected <name>[:<n>] with a name among ${CRASH_POINTS.join(', ')}`);
  return { point, hit: m[2] ? Number(m[2]) : 1 };
}
