/**
 * A claimed run as a worker holds it for the whole attempt (ClaimedRun, in engine-store.ts), with
 * thousands held at once: a Run whose times, but for the deadline, are kept as epoch milliseconds. A
 * Date is 96 bytes and its value 16 more (V8 keeps a cache of its calendar fields) where a number is 16,
 * and a running run carries four of them the engine never reads (run_at, locked_until, created_at,
 * updated_at; a requeued or scheduled run up to six). The deadline stays a Date: the driver's guard and
 * every model call read it. An empty metadata is one frozen object for all.
 *
 * What leaves the engine as a Run (the events a library's `onEvent` sees) is made again by `publicRun`,
 * with Dates of its own, and without what only the engine keeps (the lease and its token).
 */
import type { Interned } from '../core/interned.ts';
import type { Run } from '../domain/types.ts';
import type { ClaimedRun, DrivenRun, Lease } from './engine-store.ts';

/** The metadata of every claimed run that has none: most runs have none, and each read makes an object. */
const NO_METADATA: Readonly<Record<string, unknown>> = Object.freeze({});

const ms = (d: Date | null) => (d === null ? null : d.getTime());
const at = (d: Date) => d.getTime();
const date = (t: number | null) => (t === null ? null : new Date(t));

/** `run` as held from its claim; `names` gives the one copy of each of its repeated names. */
export function claimedRun(run: Run, lease: Lease, hasSteps: boolean, names: Interned): ClaimedRun {
  return {
    id: run.id,
    agent: names.of(run.agent),
    agentVersion: names.of(run.agentVersion),
    previousRunId: run.previousRunId,
    tenant: names.of(run.tenant),
    status: names.of(run.status),
    input: run.input,
    inputContent: run.inputContent,
    model: names.of(run.model),
    modelOptions: run.modelOptions,
    tokenBudget: run.tokenBudget,
    tokensUsed: run.tokensUsed,
    costUsd: run.costUsd,
    costBudgetUsd: run.costBudgetUsd,
    maxSteps: run.maxSteps,
    deadlineAt: run.deadlineAt,
    lockedBy: names.of(run.lockedBy),
    cancelRequested: run.cancelRequested,
    attempts: run.attempts,
    metadata: isEmpty(run.metadata) ? NO_METADATA : run.metadata,
    output: run.output,
    stopReason: run.stopReason,
    error: run.error,
    lastError: run.lastError,
    providerRequeues: run.providerRequeues,
    forkedFrom: run.forkedFrom,
    waiting: run.waiting,
    scheduleId: run.scheduleId,
    hasSteps,
    lease,
    times: {
      runAt: at(run.runAt),
      lockedUntil: ms(run.lockedUntil),
      createdAt: at(run.createdAt),
      updatedAt: at(run.updatedAt),
      finishedAt: ms(run.finishedAt),
      nextAttemptAt: ms(run.nextAttemptAt),
      scheduledFor: ms(run.scheduledFor),
    },
  };
}

/** The Run a driven run is to whoever is outside the engine: a Run as it is, a claimed run made one again. */
export function publicRun(run: DrivenRun): Run {
  if (!isClaimed(run)) return run as Run;
  const t = run.times;
  return {
    id: run.id,
    agent: run.agent,
    agentVersion: run.agentVersion,
    previousRunId: run.previousRunId,
    tenant: run.tenant,
    status: run.status,
    input: run.input,
    inputContent: run.inputContent,
    model: run.model,
    modelOptions: run.modelOptions,
    tokenBudget: run.tokenBudget,
    tokensUsed: run.tokensUsed,
    costUsd: run.costUsd,
    costBudgetUsd: run.costBudgetUsd,
    maxSteps: run.maxSteps,
    deadlineAt: new Date(run.deadlineAt),
    runAt: new Date(t.runAt),
    lockedBy: run.lockedBy,
    lockedUntil: date(t.lockedUntil),
    cancelRequested: run.cancelRequested,
    attempts: run.attempts,
    metadata: run.metadata === NO_METADATA ? {} : (run.metadata as Record<string, unknown>),
    createdAt: new Date(t.createdAt),
    updatedAt: new Date(t.updatedAt),
    finishedAt: date(t.finishedAt),
    output: run.output,
    stopReason: run.stopReason,
    error: run.error,
    lastError: run.lastError,
    nextAttemptAt: date(t.nextAttemptAt),
    providerRequeues: run.providerRequeues,
    forkedFrom: run.forkedFrom,
    waiting: run.waiting,
    scheduleId: run.scheduleId,
    scheduledFor: date(t.scheduledFor),
  };
}

function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

function isClaimed(run: DrivenRun): run is ClaimedRun {
  return (run as Partial<ClaimedRun>).times !== undefined;
}
