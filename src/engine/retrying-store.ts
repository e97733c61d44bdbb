/**
 * The engine's writes, decided by what the database error means (db-errors.ts):
 *
 * - transient (the connection, not the statement): the same write is tried again, with full-jitter
 *   backoff, a bounded number of times. The lease fence still holds on every try: if the lease lapsed
 *   and another worker claimed the run meanwhile, the retry writes nothing and raises LeaseLostError.
 * - a retry that finds its own write already there — the first try committed and only its reply was
 *   lost: a duplicate key on the step row, a run already ended, a tool step already finished — is done;
 *   `recordedWrite` checks the row is there and that the run still carries this claim's token (so the
 *   write was this driver's), and returns what the write would have returned.
 * - permanent (the statement: a value the database cannot hold, a broken constraint): raised at once as
 *   PermanentDatabaseError, which ends the run FAILED with the cause instead of an attempt ending.
 *
 * The trade-off: a retried write holds the run's slot for up to a few seconds while the database is
 * unreachable, where ending the attempt would free it — but ending it throws away a model reply that is
 * already paid for, and the next attempt pays for it again. Past the bound the outage is not a blip,
 * and the attempt ends as before (the run resumes from its last checkpoint).
 */
import { isTerminal } from '../domain/types.ts';
import { LeaseLostError, PermanentDatabaseError, StepNotStartedError } from '../domain/errors.ts';
import { timerSleeper } from '../util/sleep.ts';
import { classifyDatabaseError, describeDatabaseError, isUniqueViolation, sqlState } from '../core/database-errors.ts';
import type { EngineStore, FencedWrite, RecordedWrite } from '../ports/engine-store.ts';

export interface RetryPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  /** @unit milliseconds: the cap of the first wait; each further wait's cap doubles, up to `capMs`. */
  baseMs: number;
  /** @unit milliseconds */
  capMs: number;
}

/** About 6 s of waiting at most (full jitter averages half of that): longer than a failover's blip. */
export const WRITE_RETRY: RetryPolicy = { attempts: 7, baseMs: 100, capMs: 2_000 };

export interface RetryOptions<T> {
  /** What the operation does, for the error a permanent failure becomes ("record model step 3"). */
  what: string;
  policy?: RetryPolicy;
  /** Stops retrying (and waiting) at once. */
  signal?: AbortSignal;
  /** On a retry whose error may mean "the first try committed": what that try would have returned, or null. */
  landed?: () => Promise<{ value: T } | null>;
}

const mayHaveLanded = (e: unknown) => isUniqueViolation(e) || e instanceof LeaseLostError || e instanceof StepNotStartedError;

/** Runs `op`, retrying it on transient database errors; a permanent one becomes PermanentDatabaseError. */
export function retryTransient<T>(op: () => Promise<T>, o: RetryOptions<T>): Promise<T> {
  // The first try is a plain promise, not an async function's suspended frame: at any moment thousands
  // of runs wait on a write, and almost every write succeeds the first time.
  let first: Promise<T>;
  try {
    first = Promise.resolve(op());
  } catch (e) {
    first = Promise.reject(e);
  }
  return first.catch((e: unknown) => retryAfter(e, op, o));
}

/** What follows a failed first try of `op`: the retries, or the error the failure becomes. */
async function retryAfter<T>(firstError: unknown, op: () => Promise<T>, o: RetryOptions<T>): Promise<T> {
  const policy = o.policy ?? WRITE_RETRY;
  let error = firstError;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1 && o.landed && mayHaveLanded(error)) {
      try {
        const found = await o.landed();
        if (found) return found.value;
      } catch (e) {
        error = e;
      }
    }
    const kind = classifyDatabaseError(error);
    if (kind === 'permanent') {
      throw new PermanentDatabaseError(`could not ${o.what}: ${describeDatabaseError(error)}`, sqlState(error), { cause: error });
    }
    if (kind !== 'transient' || attempt >= policy.attempts) throw error;
    o.signal?.throwIfAborted();
    await timerSleeper.sleep(Math.random() * Math.min(policy.capMs, policy.baseMs * 2 ** (attempt - 1)), o.signal);
    try {
      return await op();
    } catch (e) {
      error = e;
    }
  }
}

const waitedStatus = (r: RecordedWrite) => (r.status === 'WAITING' || r.status === 'CANCELLED' ? r.status : null);
const asWrite = (r: RecordedWrite): FencedWrite => ({
  tokensUsed: r.tokensUsed,
  cancelRequested: r.cancelRequested,
  nextStarted: r.nextStarted,
});

/**
 * The store, with the engine's reads and writes retried as above, giving up when `signal` aborts.
 * Everything else (claims, lease renewals, releases: the worker's) is the store's own, unchanged.
 *
 * One per driven run, so it is small: the retrying methods are made once per store and shared; a run's
 * copy holds only its signal.
 */
export function retryingWrites(store: EngineStore, signal?: AbortSignal): EngineStore {
  let methods = shared.get(store);
  if (!methods) shared.set(store, (methods = retryingMethods(store)));
  const s = Object.create(methods) as EngineStore & Signalled;
  s.signal = signal;
  return s;
}

interface Signalled {
  signal: AbortSignal | undefined;
}

const shared = new WeakMap<EngineStore, EngineStore>();

/** The retrying methods over `store`; each reads the signal of the run's copy it is called on (`this`). */
function retryingMethods(store: EngineStore): EngineStore {
  const s: EngineStore = Object.create(store);
  const retry = <T>(run: Signalled, what: string, op: () => Promise<T>, landed?: () => Promise<{ value: T } | null>) =>
    retryTransient(op, { what, signal: run.signal, landed });
  type Method<K extends keyof EngineStore> = (
    this: Signalled,
    ...args: Parameters<NonNullable<EngineStore[K]>>
  ) => ReturnType<NonNullable<EngineStore[K]>>;
  const method = <K extends keyof EngineStore>(name: K, f: Method<K>) => {
    (s as unknown as Record<K, Method<K>>)[name] = f;
  };

  method('steps', function (runId) {
    return retry(this, 'read the log', () => store.steps(runId));
  });
  method('conversationBefore', function (runId) {
    return retry(this, 'read the earlier runs of the conversation', () => store.conversationBefore(runId));
  });
  method('blob', function (digest) {
    return retry(this, 'read a stored text', () => store.blob(digest));
  });
  method('putBlob', function (body) {
    return retry(this, 'store a shared text', () => store.putBlob(body));
  });
  method('checkpointModel', function (runId, owner, cp, then) {
    return retry(
      this,
      `record model step ${cp.seq}`,
      () => store.checkpointModel(runId, owner, cp, then),
      async () => {
        const r = await store.recordedWrite(runId, owner, { modelSeq: cp.seq, startNext: then?.startNext });
        // A checkpoint that started a wait gave the lease up with it: its step is there and the run waits.
        if (then?.wait && !then.end) return r?.modelStep && waitedStatus(r) ? { value: { ...asWrite(r), waited: waitedStatus(r)! } } : null;
        return r?.ours && r.modelStep ? { value: asWrite(r) } : null;
      },
    );
  });
  method('wait', function (runId, owner, start) {
    return retry(
      this,
      'start waiting',
      () => store.wait(runId, owner, start),
      async () => {
        const r = await store.recordedWrite(runId, owner, {});
        const status = r && waitedStatus(r);
        return r && status ? { value: { tokensUsed: r.tokensUsed, cancelRequested: r.cancelRequested, status } } : null;
      },
    );
  });
  method('decisions', function (runId) {
    return retry(this, 'read the decisions', () => store.decisions(runId));
  });
  method('consumeDecision', function (runId, owner, toolUseId) {
    return retry(this, `use up the decision about ${toolUseId}`, () => store.consumeDecision(runId, owner, toolUseId));
  });
  // Idempotent by itself: a second STARTED row for the same tool_use id is never written.
  method('startTool', function (runId, owner, start) {
    return retry(this, `record the start of tool step ${start.seq}`, () => store.startTool(runId, owner, start));
  });
  method('finishTool', function (runId, owner, finish, startNext) {
    return retry(
      this,
      `record the result of tool call ${finish.toolUseId}`,
      () => store.finishTool(runId, owner, finish, startNext),
      async () => {
        const r = await store.recordedWrite(runId, owner, { finishedToolUseId: finish.toolUseId, startNext });
        return r?.ours && r.toolFinished ? { value: asWrite(r) } : null;
      },
    );
  });
  // A retry after a lost reply may write run.started twice, which readers take as it is; nothing else repeats.
  if (store.eventsClaimed) {
    method('eventsClaimed', function (runId, owner, attempt) {
      return retry(this, 'record the claim', () => store.eventsClaimed!(runId, owner, attempt));
    });
  }
  method('finish', function (runId, owner, end) {
    return retry(
      this,
      `end the run ${end.status}`,
      () => store.finish(runId, owner, end),
      async () => {
        const r = await store.recordedWrite(runId, owner, {});
        return r?.ours && isTerminal(r.status) ? { value: undefined } : null;
      },
    );
  });
  return s;
}
