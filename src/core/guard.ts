/**
 * Guard: the runaway checks made before every step, so a run overshoots a limit by one step at most.
 * Pure: the caller passes the clock.
 */
import type { BudgetKind, TerminalStatus } from '../domain/types.ts';

export interface GuardInput {
  cancelRequested: boolean;
  deadlineAt: Date;
  tokensUsed: number;
  tokenBudget: number;
  /** USD spent so far, and the most the run may spend (null: no money limit). */
  costUsd?: number;
  costBudgetUsd?: number | null;
  /** Steps recorded so far. */
  steps: number;
  maxSteps: number;
}

export interface GuardStop {
  status: TerminalStatus;
  error: string;
  /** Set when a budget (not a cancel) stopped the run. */
  budget?: BudgetKind;
}

/** USD as the run's errors print it: enough digits for a budget of a fraction of a cent. */
export function usd(amount: number): string {
  return `${Number(amount.toPrecision(6))} USD`;
}

export function guard(g: GuardInput, now: Date): GuardStop | null {
  if (g.cancelRequested) return { status: 'CANCELLED', error: 'cancelled on request' };
  if (now.getTime() >= g.deadlineAt.getTime())
    return { status: 'TIMED_OUT', error: `deadline ${g.deadlineAt.toISOString()} passed`, budget: 'time' };
  if (g.tokensUsed >= g.tokenBudget) {
    return { status: 'FAILED', error: `token budget exhausted (${g.tokensUsed} of ${g.tokenBudget} tokens used)`, budget: 'tokens' };
  }
  if (g.costBudgetUsd != null && (g.costUsd ?? 0) >= g.costBudgetUsd) {
    return { status: 'FAILED', error: `cost budget exhausted (${usd(g.costUsd ?? 0)} of ${usd(g.costBudgetUsd)} spent)`, budget: 'cost' };
  }
  if (g.steps >= g.maxSteps) return { status: 'FAILED', error: `step cap reached (${g.steps} of ${g.maxSteps} steps)`, budget: 'steps' };
  return null;
}
