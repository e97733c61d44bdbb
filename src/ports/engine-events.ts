/**
 * What the engine reports as it works. Logs, metrics and traces listen to these events instead of
 * being called from inside the loop. Each names its run and the worker driving it (and the step, for
 * step events): listeners run synchronously, must be cheap, and must not throw (a throwing listener
 * is ignored).
 */
import type { BudgetKind, RunId, StepStatus, TerminalStatus, Waiting } from '../domain/types.ts';
import type { LlmResponse } from '../llm/types.ts';
import type { DrivenRun } from './engine-store.ts';

/**
 * Something odd about a step that did not stop the run, worth an operator's look:
 * - tool-use-under-stop-reason: the reply asks for tools but its stop reason is not `tool_use`; the
 *   tools run and the run goes on (the detail names the stop reason)
 * - unstorable-text-replaced: the reply held U+0000 or a lone surrogate, stored as U+FFFD (tool results are
 *   cleaned the same way, silently: what a tool returns is data, not the provider misbehaving)
 * - usage-out-of-range: a token count was negative, fractional or too large, and was clamped
 * - provider-value-repaired: the provider layer repaired its wire answer (see src/llm/normalise.ts)
 */
export type StepWarning =
  'tool-use-under-stop-reason' | 'unstorable-text-replaced' | 'usage-out-of-range' | 'provider-value-repaired' | 'summary-unusable';

export interface EngineEvents {
  runClaimed?(e: { run: DrivenRun; worker: string; resumedAtSeq: number }): void;
  modelStep?(e: { run: DrivenRun; worker: string; seq: number; response: LlmResponse; latencyMs: number; costUsd: number }): void;
  modelFailed?(e: { run: DrivenRun; worker: string; seq: number; error: Error; latencyMs: number }): void;
  stepWarning?(e: { run: DrivenRun; worker: string; seq: number; warning: StepWarning; detail: string }): void;
  toolStarted?(e: { run: DrivenRun; worker: string; seq: number; toolName: string; toolUseId: string; resumed: boolean }): void;
  toolStep?(e: {
    run: DrivenRun;
    worker: string;
    seq: number;
    toolName: string;
    toolUseId: string;
    status: StepStatus;
    latencyMs: number;
  }): void;
  /** `budget`: the kind of limit that stopped the run, when one did. */
  runFinished?(e: {
    run: DrivenRun;
    worker: string;
    status: TerminalStatus;
    error: string | null;
    tokensUsed: number;
    budget?: BudgetKind;
  }): void;
  /** The run went WAITING (for approvals, a decision or a timer) and this attempt is over; `since` is the database's. */
  runWaiting?(e: { run: DrivenRun; worker: string; waiting: Omit<Waiting, 'since'> }): void;
  leaseLost?(e: { runId: RunId; worker: string }): void;
  /** The attempt ended without finishing the run: a crash, a database failure, a hand-back, a requeue. */
  attemptEnded?(e: { runId: RunId; worker: string; reason: 'crash' | 'handed-back' | 'requeued' | 'database'; error?: unknown }): void;
}

type Handler<K extends keyof EngineEvents> = NonNullable<EngineEvents[K]>;

/** One listener that forwards each event to all of `listeners`, isolating their failures. */
export function combineEvents(...listeners: EngineEvents[]): Required<EngineEvents> {
  const forward =
    <K extends keyof EngineEvents>(key: K) =>
    (e: Parameters<Handler<K>>[0]) => {
      for (const l of listeners) {
        try {
          (l[key] as ((x: typeof e) => void) | undefined)?.(e);
        } catch {
          // an observer must never break the run it observes
        }
      }
    };
  return {
    runClaimed: forward('runClaimed'),
    modelStep: forward('modelStep'),
    modelFailed: forward('modelFailed'),
    stepWarning: forward('stepWarning'),
    toolStarted: forward('toolStarted'),
    toolStep: forward('toolStep'),
    runFinished: forward('runFinished'),
    runWaiting: forward('runWaiting'),
    leaseLost: forward('leaseLost'),
    attemptEnded: forward('attemptEnded'),
  };
}
