/**
 * The verdict on a pending tool call: run it now, record its result without running it, or make the
 * run wait (for a person or a timer); judged from the log and the decisions recorded for the run. Pure.
 *
 * - A call whose tool needs approval runs once a person approved it; denied (or not decided before
 *   its approval timed out) it is never run and the model gets an is_error result with the reason.
 *   Its approval row is written with the model step that asked for the call, so "needs approval" is
 *   read from the rows, not asked of the tool again.
 * - A call found STARTED whose tool is not idempotent may or may not have happened: a person decides
 *   (approve: run it again; deny: the model is told it may or may not have happened; complete: it did,
 *   with this result).
 * - A call of the built-in `sleep` tool waits for its time, holding nothing.
 */
import type { DecisionRecord, Waiting } from '../domain/types.ts';
import type { PendingTool } from '../core/replay.ts';

export type ToolCallVerdict =
  /** Execute it (again, with the same idempotency key, when it was started). */
  | { type: 'run'; consumeDecision: boolean }
  /** Record this result without executing anything. */
  | { type: 'resolve'; status: 'DONE' | 'ERROR'; result: string }
  /** The run must wait for a person. */
  | { type: 'wait'; kind: 'approval' | 'decision' }
  /** Start a timer: the run waits until `wakeAt`. */
  | { type: 'sleep'; wakeAt: Date }
  /** A timer that has not come yet (the run was claimed early): wait again until it does. */
  | { type: 'sleep-again'; wakeAt: Date };

/** What the verdict is judged from. */
export interface ToolCallFacts {
  idempotent: boolean;
  /** The call's seconds when its tool is the built-in timer; an error text for an input it cannot take. */
  timer: number | string | null;
  approval: DecisionRecord | undefined;
  crash: DecisionRecord | undefined;
  /** What the run waited for last (its timer's wake-up time). */
  waiting: Waiting | null;
  now: Date;
}

export const APPROVAL_TIMED_OUT = 'approval timed out';

/** Results the model sees for calls that were not run. */
export const deniedResult = (reason: string) => `error: not run: the user denied this call (reason: ${reason})`;
export const crashDeniedResult = (reason: string) =>
  `error: this call was interrupted by a crash and was not run again; it may or may not have happened (reason: ${reason})`;
export const sleptResult = (seconds: number) => `slept ${seconds} second${seconds === 1 ? '' : 's'}`;

export function judgeToolCall(p: PendingTool, facts: ToolCallFacts): ToolCallVerdict {
  if (facts.timer !== null) return judgeTimerCall(p, facts, facts.timer);
  // First: a call that was not approved is never run, even when a crash left its denial half-written
  // (the STARTED row of its is_error result recorded, the result not).
  const a = facts.approval;
  if (a && a.decision !== 'approve') {
    switch (a.decision) {
      case 'deny':
        return { type: 'resolve', status: 'ERROR', result: deniedResult(a.reason ?? 'no reason given') };
      case 'complete': // never accepted for an approval; treated as the safer "no"
        return { type: 'resolve', status: 'ERROR', result: deniedResult('not approved') };
      case null:
        if (a.expiresAt && a.expiresAt.getTime() <= facts.now.getTime())
          return { type: 'resolve', status: 'ERROR', result: deniedResult(APPROVAL_TIMED_OUT) };
        return { type: 'wait', kind: 'approval' };
    }
  }
  if (p.startedSeq === null || facts.idempotent) return { type: 'run', consumeDecision: false };
  const d = facts.crash;
  switch (d?.decision ?? null) {
    case null:
      return { type: 'wait', kind: 'decision' };
    case 'approve':
      // Used up as it is acted on: should this run of the call be cut short too, a person decides again.
      return { type: 'run', consumeDecision: true };
    case 'deny':
      return { type: 'resolve', status: 'ERROR', result: crashDeniedResult(d!.reason ?? 'no reason given') };
    case 'complete':
      return { type: 'resolve', status: 'DONE', result: d!.result ?? '' };
  }
}

function judgeTimerCall(p: PendingTool, facts: ToolCallFacts, timer: number | string): ToolCallVerdict {
  if (typeof timer === 'string') return { type: 'resolve', status: 'ERROR', result: `error: ${timer}` };
  if (p.startedSeq === null) return { type: 'sleep', wakeAt: new Date(facts.now.getTime() + timer * 1000) };
  const w = facts.waiting;
  const wakeAt = w?.kind === 'timer' && w.toolCalls.some((c) => c.toolUseId === p.use.id) ? w.wakeAt : null;
  if (wakeAt && wakeAt.getTime() > facts.now.getTime()) return { type: 'sleep-again', wakeAt };
  return { type: 'resolve', status: 'DONE', result: sleptResult(timer) };
}
