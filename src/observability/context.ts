/**
 * The run context of the code running now: which run, which step, which worker. Set by the engine
 * with AsyncLocalStorage, so every log line written inside a step (even by a tool) carries it without
 * threading parameters by hand.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface RunContext {
  run_id: string;
  worker: string;
  step_seq?: number;
  request_id?: string;
}

const storage = new AsyncLocalStorage<RunContext>();

export function currentContext(): RunContext | undefined {
  return storage.getStore();
}

export function withContext<T>(ctx: RunContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

