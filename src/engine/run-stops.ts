/**
 * A run this worker is driving, and what may stop it from outside its driver: a cancel request (the
 * NOTIFY, or the lease renewal's answer as the fallback), its deadline (a timer), a lost lease (the
 * lease keeper) and a hand-back at shutdown. Each aborts the run's signal, which cancels the model call
 * or tool in flight (a non-idempotent tool is let finish, see ToolExecutor); the worker then settles
 * the attempt by the reason. The first reason wins.
 */
import { performance } from 'node:perf_hooks';
import { budgetTokens, type RunId } from '../domain/types.ts';
import type { ClaimedRun } from '../ports/engine-store.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import type { Unrecorded } from './driver-types.ts';
import { Followers } from './step-stream.ts';
import type { Timed } from './deadlines.ts';

/** A cancel was requested while the run was being driven: it ends CANCELLED now, not at its next guard. */
export class CancelSignal extends Error {
  constructor() {
    super('cancelled on request');
  }
}

/** The run's deadline passed while it was being driven: it ends TIMED_OUT now. */
export class DeadlineSignal extends Error {
  constructor(readonly deadlineAt: Date) {
    super(`deadline ${deadlineAt.toISOString()} passed`);
  }
}

/** The tool call a run is executing now, as the engine's events report it. */
export interface ToolInFlight {
  seq: number;
  tool: string;
  idempotent: boolean;
  /** performance.now() when it started. */
  startedAt: number;
}

/**
 * Its own Followers (see step-stream.ts), whether an event hub follows the run and the step it streams
 * to: one object a run held, not two.
 */
export class HeldRun extends Followers implements Timed {
  private readonly controller = new AbortController();
  /** Settles when the attempt is over (driven to its end, released, or given up). */
  done: Promise<unknown> = Promise.resolve();
  tool: ToolInFlight | null = null;
  /** Tokens counted against the budget so far, followed from the model steps of this attempt. */
  tokensUsed: number;
  /** Given up at the forced-shutdown limit: whatever its driver does later is ignored. */
  cut = false;
  /** Usage of a model call its stop cut off (see DriverDeps.cutOff); added by the write that ends the attempt. */
  unrecorded: Unrecorded | null = null;
  /** Its place among the worker's deadlines (see deadlines.ts), which stop it with a DeadlineSignal. */
  due = 0;
  place = -1;

  constructor(readonly run: ClaimedRun) {
    super();
    this.tokensUsed = run.tokensUsed;
  }

  get id(): RunId {
    return this.run.id;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Aborts the run's signal with `reason`; false when it was stopped already (the first reason stands). */
  stop(reason: Error): boolean {
    if (this.controller.signal.aborted) return false;
    this.controller.abort(reason);
    return true;
  }

  /** Its deadline came: the run ends TIMED_OUT. */
  static expire(this: void, h: HeldRun): void {
    h.stop(new DeadlineSignal(h.run.deadlineAt));
  }
}

/**
 * Follows the steps of held runs from the engine's events: the tool in flight (shutdown waits for a
 * non-idempotent one; a blocked event loop is blamed on one) and the tokens used so far.
 */
export function followSteps(held: ReadonlyMap<RunId, HeldRun>, isIdempotent: (tool: string, agent: string) => boolean): EngineEvents {
  return {
    toolStarted: ({ run, seq, toolName }) => {
      const h = held.get(run.id);
      if (h) h.tool = { seq, tool: toolName, idempotent: isIdempotent(toolName, run.agent), startedAt: performance.now() };
    },
    toolStep: ({ run }) => {
      const h = held.get(run.id);
      if (h) h.tool = null;
    },
    modelStep: ({ run, response }) => {
      const h = held.get(run.id);
      if (h) h.tokensUsed += budgetTokens(response.usage);
    },
  };
}
