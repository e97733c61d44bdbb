/**
 * Guard: the runaway checks made before every step, so a run overshoots a limit by one step at most.
 * Pure: the caller passes the clock.
 */
import type { TerminalStatus } from '../domain.ts';

export interface GuardInput {
  cancelRequested: boolean;
  deadlineAt: Date;
  tokensUsed: number;
  tokenBudget: number;
  /** Steps recorded so far. */
  steps: number;
  maxSteps: number;
}

export interface GuardStop {
  status: TerminalStatus;
  error: string;
}

export function guard(g: GuardInput, now: Date): GuardStop | null {
  if (g.cancelRequested) return { status: 'CANCELLED', error: 'cancelled on request' };
  if (now.getTime() >= g.deadlineAt.getTime()) return { status: 'TIMED_OUT', error: `deadline ${g.deadlineAt.toISOString()} passed` };
  if (g.tokensUsed >= g.tokenBudget) {
    return { status: 'FAILED', error: `token budget exhausted (${g.tokensUsed} of ${g.tokenBudget} tokens used)` };
  }
  if (g.steps >= g.maxSteps) return { status: 'FAILED', error: `step cap reached (${g.steps} of ${g.maxSteps} steps)` };
  return null;
}
