/** Domain types → the API's JSON, in one place: camelCase keys, dates as ISO strings, no internals (leases). */
import type { Run, StepSummary, Waiting } from '../domain/types.ts';
import type { ListedRun } from '../store/run-listing.ts';
import type { RunJson, RunListItemJson, TimelineItem, WaitingJson } from './schemas.ts';

const iso = (d: Date) => d.toISOString();
const isoOrNull = (d: Date | null) => (d ? d.toISOString() : null);

export function runJson(r: Run): RunJson {
  return {
    id: r.id,
    agent: r.agent,
    agentVersion: r.agentVersion,
    previousRunId: r.previousRunId,
    tenant: r.tenant,
    status: r.status,
    input: r.input,
    inputContent: r.inputContent,
    model: r.model,
    modelOptions: r.modelOptions as Record<string, unknown> | null,
    tokenBudget: r.tokenBudget,
    tokensUsed: r.tokensUsed,
    costUsd: r.costUsd,
    costBudgetUsd: r.costBudgetUsd,
    maxSteps: r.maxSteps,
    deadlineAt: iso(r.deadlineAt),
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
    finishedAt: isoOrNull(r.finishedAt),
    output: r.output,
    error: r.error,
    stopReason: r.stopReason,
    attempts: r.attempts,
    providerRequeues: r.providerRequeues,
    cancelRequested: r.cancelRequested,
    metadata: r.metadata,
    lastError: r.lastError && { message: r.lastError.message, at: iso(r.lastError.at), attempt: r.lastError.attempt },
    nextAttemptAt: isoOrNull(r.nextAttemptAt),
    forkedFrom: r.forkedFrom && { runId: r.forkedFrom.runId, afterSeq: r.forkedFrom.afterSeq },
    // The last wait is kept on the row after the run wakes; it is shown only while the run waits.
    waiting: r.status === 'WAITING' && r.waiting ? waitingJson(r.waiting) : null,
    scheduleId: r.scheduleId,
    scheduledFor: isoOrNull(r.scheduledFor),
  };
}

export function waitingJson(w: Waiting): WaitingJson {
  return {
    kind: w.kind,
    since: iso(w.since),
    toolCalls: w.toolCalls.map((c) => ({ toolUseId: c.toolUseId, toolName: c.toolName, input: c.input })),
    ...(w.kind === 'timer' ? { wakeAt: isoOrNull(w.wakeAt) } : {}),
    ...(w.expiresAt ? { expiresAt: iso(w.expiresAt) } : {}),
  };
}

/** A run in a list: the run, its step count, and how long it took once it has finished. */
export function runListItem(r: ListedRun): RunListItemJson {
  const { inputContent: _blocks, ...run } = runJson(r);
  return {
    ...run,
    stepCount: r.stepCount,
    durationMs: r.finishedAt ? Math.max(0, r.finishedAt.getTime() - r.createdAt.getTime()) : null,
  };
}

/**
 * A step without its bodies: the timeline stays small however long the conversation grows. `ownerId`:
 * the run whose timeline it is; a step recorded in another run (a fork's source) is marked inherited.
 */
export function timelineItem(s: StepSummary, ownerId: string = s.runId): TimelineItem {
  const inherited = s.runId !== ownerId;
  return {
    seq: s.seq,
    kind: s.kind,
    status: s.status,
    toolName: s.toolName,
    toolUseId: s.toolUseId,
    stopReason: s.stopReason,
    inputTokens: s.inputTokens,
    outputTokens: s.outputTokens,
    cacheCreationInputTokens: s.cacheCreationInputTokens,
    cacheReadInputTokens: s.cacheReadInputTokens,
    costUsd: s.costUsd,
    attempts: s.attempts,
    latencyMs: s.latencyMs,
    worker: s.worker,
    startedAt: iso(s.startedAt),
    finishedAt: isoOrNull(s.finishedAt),
    inherited,
    inheritedFrom: inherited ? s.runId : null,
  };
}
