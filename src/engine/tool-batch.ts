/**
 * The idempotent tool calls of one model turn, run at the same time.
 *
 * Each call keeps its own STARTED row (written when it gets its place, so the timeline shows when it
 * really began), its own idempotency key (its tool_use id) and its own result row, each write fenced
 * on the lease and committed on its own. A crash mid-batch therefore leaves finished calls DONE and
 * the others STARTED: the resumed run re-runs only those. Results are folded as they come; the fold
 * sends them to the model in the order of the tool_use blocks whatever order they finished in.
 *
 * At most `ToolExecutor.concurrency` calls of the batch run at once (TOOL_CONCURRENCY), and a tool
 * with a `concurrency` of its own is held to it across every run of the process. Non-idempotent calls
 * never join a batch, nor do calls with a decision or a timer (an approval, a crash decision, a
 * sleep): they run one at a time, in turn order, by the driver's single-call path, which judges each
 * first (tool-call-verdict.ts).
 *
 * Each call's STARTED write carries its step.started/tool.started events, and its result write its
 * tool.finished/step.finished events, inside the same statement (run-store.ts), as on the single path.
 *
 * An agent with a workspace runs its calls one at a time (its executor's concurrency is 1): a save after
 * a call must hold that call's changes only, so a crash re-runs each call on the workspace as it was.
 */
import type { RunProgress, ToolUseBlock } from '../domain/types.ts';
import type { DrivenRun } from '../ports/engine-store.ts';
import { Semaphore } from '../tools/semaphore.ts';
import { crashPoint } from './crash-points.ts';
import type { DriverDeps } from './driver-types.ts';
import { runCall } from './tool-call.ts';
import { promised } from '../util/promised.ts';
import { type Conversation, foldStep, type PendingTool } from '../core/replay.ts';

/**
 * The pending calls at the head of the turn, in turn order, up to the first that may not join a batch:
 * `joins` is the driver's "idempotent, with no decision and no timer" (no approval, no crash decision).
 */
export function idempotentBatch(conversation: Conversation, joins: (use: ToolUseBlock) => boolean): PendingTool[] {
  const batch: PendingTool[] = [];
  for (const p of conversation.pending.values()) {
    if (!joins(p.use)) break;
    batch.push(p);
  }
  return batch;
}

export interface BatchScope {
  run: DrivenRun;
  conversation: Conversation;
  deps: DriverDeps;
  /** The tool_use id whose STARTED row the previous checkpoint wrote (it is not a resumed call). */
  preStarted: string | null;
  /** Told the run's progress after every write. */
  progress(p: RunProgress): void;
}

/**
 * Runs `batch` and records each result. Waits for every call to settle before it returns, so no call
 * is left writing after its driver moved on; then throws the first failure, if any (a crash, a lost
 * lease, the run being stopped): the attempt ends with the finished calls recorded.
 *
 * None of this is an async function: a run spends its tool steps waiting (on the tool, on the write of
 * its result), and a suspended frame per call and per batch would be kept by every run doing so.
 */
export function runToolBatch(batch: readonly PendingTool[], s: BatchScope): Promise<void> {
  let lastSeq = s.conversation.lastSeq;
  // Seqs are taken in the order calls get their place; a number is never given twice.
  const nextSeq = () => (lastSeq = Math.max(lastSeq, s.conversation.lastSeq) + 1);
  const { signal } = s.deps;
  // Most turns ask for one call: it shares its turn with nobody, and its failure is the batch's.
  if (batch.length === 1) return signal.aborted ? Promise.reject(signal.reason as Error) : underToolLimit(batch[0]!, nextSeq, s);
  const turn = new Semaphore(s.deps.agent.tools.concurrency);
  // Each place taken is given back however the call ends, a throw included.
  const inTurn = (p: PendingTool) => turn.acquire(signal).then((leaveTurn) => underToolLimit(p, nextSeq, s).finally(leaveTurn));
  return Promise.allSettled(batch.map(inTurn)).then((settled) => {
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
}

/** runOne, within the tool's own concurrency limit when it has one (its place given back however the call ends). */
function underToolLimit(p: PendingTool, nextSeq: () => number, s: BatchScope): Promise<void> {
  const { tools } = s.deps.agent;
  if (!tools.hasLimit(p.use.name)) return promised(() => runOne(p, nextSeq, s));
  return promised(() => tools.acquire(p.use.name, s.deps.signal)).then((leaveTool) =>
    promised(() => runOne(p, nextSeq, s)).finally(leaveTool),
  );
}

function runOne(p: PendingTool, nextSeq: () => number, s: BatchScope): Promise<void> {
  const { run, conversation, deps } = s;
  const { id: toolUseId, name: toolName } = p.use;
  const resumed = p.startedSeq !== null && toolUseId !== s.preStarted;
  crashPoint('before-tool-start', run.id);
  const starting =
    p.startedSeq !== null
      ? Promise.resolve(p.startedSeq)
      : deps.store.startTool(run.id, deps.owner, { seq: nextSeq(), toolUseId, toolName, input: p.use.input }).then((started) => {
          s.progress(started);
          foldStep(conversation, { seq: started.seq, kind: 'TOOL', status: 'STARTED', toolUseId, response: null, stopReason: null });
          return started.seq;
        });
  // One link after another, not one inside the other: while the result's write is out, the links
  // before it are settled and let go, not kept waiting on it.
  let t0 = 0;
  let at = 0;
  return starting
    .then((seq) => {
      at = seq;
      deps.events.toolStarted({ run, worker: deps.owner.worker, seq, toolName, toolUseId, resumed });
      t0 = performance.now();
      return runCall(deps, p.use, { runId: run.id, signal: deps.signal, worker: deps.owner.worker, seq });
    })
    .then(({ outcome, files }) => {
      crashPoint('after-tool-effect', run.id);
      const latencyMs = performance.now() - t0;
      crashPoint('before-tool-finish', run.id);
      const finish = {
        toolUseId,
        seq: at,
        status: outcome.status,
        result: outcome.result,
        latencyMs,
        ...(files && { files }),
        ...(resumed && { rerun: true }),
      };
      return deps.store.finishTool(run.id, deps.owner, finish).then((write) => {
        deps.workspace?.saved();
        foldStep(conversation, { seq: at, kind: 'TOOL', status: outcome.status, toolUseId, response: outcome.result, stopReason: null });
        s.progress(write);
        deps.events.toolStep({ run, worker: deps.owner.worker, seq: at, toolName, toolUseId, status: outcome.status, latencyMs });
      });
    });
}
