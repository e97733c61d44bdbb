/**
 * The driver: the state machine for one attempt at one run. Before every step it guards, then
 * decides from the replayed conversation whether to call the model, run a tool, or finish.
 *
 * What ends an attempt without finishing the run (so another worker resumes from the last checkpoint):
 * a FatalError (a crash), a database failure that outlasted the write retries, LeaseLostError, and a
 * hand-back at shutdown. A failing tool does not: it becomes an is_error result for the model. A write
 * the database will refuse however often it is tried (PermanentDatabaseError) ends the run FAILED with
 * the cause, at once: crashing on it would only repeat it, and repeat the paid model call before it.
 */
import { budgetTokens, type DecisionRecord, type Run, type RunProgress, type TerminalStatus, type ToolUseBlock, type Usage } from '../domain/types.ts';
import { InconsistentLogError, LlmError, PermanentDatabaseError } from '../domain/errors.ts';
import type { LlmResponse } from '../llm/types.ts';
import { type FencedWrite, NO_ATTEMPTS, type RunEnd, type ToolStart, type WaitStart } from '../ports/engine-store.ts';
import { retryingWrites } from './retrying-store.ts';
import { AttemptHandedBack, AttemptRequeued, AttemptWaiting, type DriverDeps, type Unrecorded } from './driver-types.ts';
import { storableCost, storableUsage } from '../core/storable.ts';
import type { ToolOutcome } from '../tools/executor.ts';
import { crashPoint, crashPointDuring } from './crash-points.ts';
import { decide, toolUseUnderOtherStopReason } from './decide.ts';
import { type Gate, gateTool } from './gate.ts';
import { acceptReply } from './model-reply.ts';
import { guard } from '../core/guard.ts';
import { idempotentBatch, runToolBatch } from './tool-batch.ts';
import { clampToCost, estimateInputTokens, type KnownInput, ratesOf } from '../core/cost-clamp.ts';
import { replayRun } from '../core/chain-replay.ts';
import { describeAttemptError, Followers, StepStream } from './step-stream.ts';
import { type Conversation, foldStep, type PendingTool } from '../core/replay.ts';
import { agentAsStarted } from './started-with.ts';
import { withFields } from '../util/with-fields.ts';

/** Waits for `p`, or until `signal` aborts (then returns too: the caller checks the signal). */
function untilSettledOrAborted(p: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      signal.removeEventListener('abort', done);
      resolve();
    };
    signal.addEventListener('abort', done, { once: true });
    p.then(done, done);
  });
}


const pendingCall = (use: ToolUseBlock) => ({ toolUseId: use.id, toolName: use.name, input: use.input });

function describeLlmFailure(e: unknown): string {
  if (e instanceof LlmError) {
    const what = e.status === -1 ? 'network error or timeout' : `HTTP ${e.status}${e.type ? ` ${e.type}` : ''}`;
    return `model call failed (${what}): ${e.message}`;
  }
  return `model call failed: ${e instanceof Error ? e.message : String(e)}`;
}

type StepOutcome = { end: RunEnd; written: boolean } | undefined;

/** `records` by tool_use id, or nothing when there are none. */
const byToolUse = (records: readonly DecisionRecord[]) => (records.length ? new Map(records.map((r) => [r.toolUseId, r])) : undefined);

class RunDriver {
  private progress: RunProgress;
  /**
   * The tool call whose STARTED row this attempt wrote in the same statement as the previous step
   * (see `nextToStart`); it was guarded then, so it runs next without another guard.
   */
  private preStarted: string | null = null;
  /** USD the run has spent: the run's figure at the claim plus what this attempt recorded since (it holds the lease). */
  private costUsd: number;
  /** What the latest model call of this attempt was billed for: the next call's input is estimated from it. */
  private knownInput: KnownInput | null = null;
  /**
   * Decisions recorded for the run's tool calls, by tool_use id; they cannot change while it is RUNNING.
   * Most runs have none: a map is made only for a run that has some (thousands of runs are held at once).
   */
  private readonly approvals: Map<string, DecisionRecord> | undefined;
  private readonly crashDecisions: Map<string, DecisionRecord> | undefined;

  constructor(
    private readonly run: Run,
    private readonly c: Conversation,
    private readonly d: DriverDeps,
    decisions: readonly DecisionRecord[] = [],
    /** The highest attempt each model step used before this claim (from the events), so numbering goes on. */
    private readonly attemptsBefore: ReadonlyMap<number, number> = NO_ATTEMPTS,
  ) {
    this.progress = { tokensUsed: run.tokensUsed, cancelRequested: run.cancelRequested };
    this.costUsd = run.costUsd;
    if (decisions.length) {
      this.approvals = byToolUse(decisions.filter((r) => r.kind === 'approval'));
      this.crashDecisions = byToolUse(decisions.filter((r) => r.kind !== 'approval'));
    }
  }

  private gate(p: PendingTool): Gate {
    const { tools } = this.d.agent;
    return gateTool(p, {
      idempotent: tools.isIdempotent(p.use.name),
      timer: tools.timer(p.use),
      approval: this.approvals?.get(p.use.id),
      crash: this.crashDecisions?.get(p.use.id),
      waiting: this.run.waiting,
      now: this.d.now(),
    });
  }

  /** A call that must not be started ahead of its turn in the loop: it is gated (a decision, a timer). */
  private gated(use: ToolUseBlock): boolean {
    return this.approvals?.has(use.id) || this.crashDecisions?.has(use.id) || this.d.agent.tools.timer(use) !== null;
  }

  /** The live events of model step `seq`, when the store keeps events. */
  private stepStream(seq: number): StepStream | null {
    const append = this.d.store.appendEvents?.bind(this.d.store);
    return append ? new StepStream(append, this.run.id, this.d.owner, seq, this.attemptsBefore.get(seq) ?? 0, this.d.followers ?? new Followers()) : null;
  }

  /** `lastSeq`: of the log; a fork's step cap counts its own steps, not those it continues from. */
  private guardAt(progress: RunProgress, lastSeq: number) {
    const { run } = this;
    const steps = lastSeq - (run.forkedFrom?.afterSeq ?? 0);
    return guard(
      {
        tokensUsed: progress.tokensUsed, cancelRequested: progress.cancelRequested, deadlineAt: run.deadlineAt, tokenBudget: run.tokenBudget,
        costUsd: this.costUsd, costBudgetUsd: run.costBudgetUsd, steps, maxSteps: run.maxSteps,
      },
      this.d.now(),
    );
  }

  async loop(): Promise<TerminalStatus> {
    const { c, d } = this;
    for (;;) {
      if (d.shouldYield()) throw new AttemptHandedBack();
      const paused = d.untilLive?.();
      if (paused) {
        await untilSettledOrAborted(paused, d.signal);
        d.signal.throwIfAborted();
        continue; // looked at again: a stop, still paused
      }
      d.signal.throwIfAborted();
      const preStarted = this.preStarted !== null ? c.pending.get(this.preStarted) : undefined;
      this.preStarted = null;
      // Finishing is not a step: a run whose last step answered ends with that answer, whatever it cost.
      const action = preStarted ? ({ type: 'tool', pending: preStarted } as const) : decide(c);
      if (action.type === 'finish') return this.finish(action.end);
      if (!preStarted) {
        const stop = this.guardAt(this.progress, c.lastSeq);
        if (stop) return this.finish(stop);
      }
      // Ungated idempotent calls run together; a call that waits for a person or a timer never joins them.
      if (action.type === 'tool' && d.agent.tools.isIdempotent(action.pending.use.name) && !this.gated(action.pending.use)) {
        const ended = await this.toolBatch(preStarted?.use.id ?? null);
        if (ended) return ended;
        continue;
      }
      const seq = action.type === 'tool' ? (action.pending.startedSeq ?? c.lastSeq + 1) : c.lastSeq + 1;
      const gate = action.type === 'tool' && !preStarted ? this.gate(action.pending) : null;
      const step =
        action.type === 'model'
          ? () => this.modelStep(seq)
          : gate && gate.type !== 'run'
            ? () => this.gatedStep(action.pending, seq, gate)
            : async () => {
                if (gate?.consumeDecision) await this.consumeDecision(action.pending.use.id);
                return this.toolStep(action.pending, seq, preStarted !== undefined);
              };
      let outcome: StepOutcome;
      try {
        outcome = await step();
      } catch (e) {
        if (!(e instanceof PermanentDatabaseError)) throw e;
        return this.finish({ status: 'FAILED', error: e.message });
      }
      if (outcome === undefined) continue;
      return outcome.written ? this.finished(outcome.end) : this.finish(outcome.end);
    }
  }

  private async finish(end: RunEnd): Promise<TerminalStatus> {
    await this.d.store.finish(this.run.id, this.d.owner, end);
    if (end.usage) this.progress = withFields(this.progress, { tokensUsed: this.progress.tokensUsed + budgetTokens(end.usage) });
    this.costUsd += end.costUsd ?? 0;
    return this.finished(end);
  }

  /** The usage and cost of failed attempts of a call, when the provider reported any. */
  private unrecorded(usage: Usage | null | undefined): Unrecorded | null {
    if (!usage) return null;
    const clean = storableUsage(usage);
    return { usage: clean, costUsd: storableCost(this.d.costOf(this.run.model, clean)) };
  }

  private finished(end: RunEnd): TerminalStatus {
    const budget = end.budget ? { budget: end.budget } : {};
    this.d.events.runFinished({ run: this.run, worker: this.d.owner.worker, status: end.status, error: end.error ?? null, tokensUsed: this.progress.tokensUsed, ...budget });
    return end.status;
  }

  /**
   * The tool call to start in the same statement as the step being recorded, saving a round trip and a
   * commit: only for an idempotent tool (a STARTED row written a moment before a crash just means it
   * runs once on resume) and only when the guard would let it run.
   */
  private nextToStart(use: ToolUseBlock | undefined, progressAfter: RunProgress, stepsAfter: number): ToolStart | undefined {
    if (!use || !this.d.agent.tools.isIdempotent(use.name) || this.gated(use) || this.guardAt(progressAfter, stepsAfter)) return undefined;
    return { seq: stepsAfter + 1, toolUseId: use.id, toolName: use.name, input: use.input };
  }

  private foldStarted(write: FencedWrite, start: ToolStart | undefined): void {
    this.progress = write;
    if (!start || !write.nextStarted) return;
    foldStep(this.c, { seq: start.seq, kind: 'TOOL', status: 'STARTED', toolUseId: start.toolUseId, response: null, stopReason: null });
    this.preStarted = start.toolUseId;
  }

  /** Returns how the run ends (`written` when the checkpoint already recorded it), or undefined to go on. */
  private async modelStep(seq: number): Promise<StepOutcome> {
    const { run, c, d } = this;
    const { agent } = d;
    // The reply can use no more than the budget has left, so the last step overshoots the budget by
    // its input at most, not by a whole MAX_TOKENS of output.
    const tokenClamp = Math.max(1, Math.min(agent.maxTokens, run.tokenBudget - this.progress.tokensUsed));
    const clamp = this.costClamp(tokenClamp);
    if ('stop' in clamp) return { end: { status: 'FAILED', error: clamp.stop, budget: 'cost' }, written: false };
    const { maxTokens } = clamp;
    const started = performance.now();
    const stream = this.stepStream(seq);
    stream?.start();
    let reply: LlmResponse;
    try {
      reply = await d.llm.send(
        { model: run.model, maxTokens, system: agent.system, messages: c.messages, tools: agent.toolDefinitions },
        {
          signal: d.signal,
          deadlineAt: run.deadlineAt,
          logFields: { run_id: run.id, worker: d.owner.worker, step_seq: seq },
          ...(stream && {
            onText: (text: string, attempt: number) => stream.text(text, attempt),
            onAttemptFailed: (attempt: number, error: LlmError) => stream.abandon(attempt, 'retry', describeAttemptError(error)),
          }),
        },
      );
    } catch (e) {
      await stream?.fail(e instanceof LlmError ? describeAttemptError(e) : undefined);
      if (d.signal.aborted) {
        const cutOff = e instanceof LlmError ? this.unrecorded(e.usage) : null;
        if (cutOff) d.onUnrecorded?.(cutOff);
        throw d.signal.reason;
      }
      d.events.modelFailed({ run, worker: d.owner.worker, seq, error: e as Error, latencyMs: performance.now() - started });
      if (!(e instanceof LlmError)) throw e;
      const unrecorded = this.unrecorded(e.usage);
      // Out of retries on a passing failure (rate limit, overload, outage): not the run's fault, so the
      // run waits in the queue and tries again; the attempt limit still ends a run that never gets through.
      if (e.retryable) throw new AttemptRequeued(describeLlmFailure(e), e.retryAfterMs, unrecorded);
      return { end: { status: 'FAILED', error: describeLlmFailure(e), ...unrecorded }, written: false };
    }
    const latencyMs = performance.now() - started;
    // The stream's last events go in with the checkpoint, ahead of its step.finished. Taken first, so
    // nothing of this step is written later if what follows throws.
    const streamed = (await stream?.rest()) ?? [];
    crashPoint('after-model-response', run.id);
    const { response, warnings } = acceptReply(reply);
    for (const w of warnings) d.events.stepWarning({ run, worker: d.owner.worker, seq, ...w });
    const costUsd = storableCost(d.costOf(run.model, response.usage));
    const tokens = budgetTokens(response.usage);
    // Fold first: what comes next decides what the checkpoint can do in the same statement. If the
    // write fails, this attempt ends and its in-memory state is dropped with it.
    foldStep(c, { seq, kind: 'MODEL', status: 'DONE', toolUseId: null, response: response.content, stopReason: response.stopReason });
    this.costUsd += costUsd;
    const u = response.usage;
    this.knownInput = { tokens: u.inputTokens + u.cacheCreationInputTokens + u.cacheReadInputTokens + u.outputTokens, messages: c.messages.length };
    if (toolUseUnderOtherStopReason(c)) {
      d.events.stepWarning({ run, worker: d.owner.worker, seq, warning: 'tool-use-under-stop-reason', detail: `the reply asks for tools under stop_reason "${response.stopReason}"; running them` });
    }
    const next = decide(c);
    const end = next.type === 'finish' ? next.end : undefined;
    const wait = next.type === 'tool' ? await this.approvalsNeeded() : undefined;
    const startNext =
      next.type === 'tool' && !wait && next.pending.startedSeq === null
        ? this.nextToStart(next.pending.use, { tokensUsed: this.progress.tokensUsed + tokens, cancelRequested: false }, seq)
        : undefined;
    const checkpoint = {
      seq,
      request: { model: run.model, maxTokens, systemDigest: agent.systemDigest, toolsDigest: agent.toolsDigest, provider: d.llm.provider },
      content: response.content,
      stopReason: response.stopReason,
      usage: response.usage,
      budgetTokens: tokens,
      attempts: response.attempts,
      costUsd,
      latencyMs,
      streamed,
    };
    let write: FencedWrite;
    try {
      const writing = d.store.checkpointModel(run.id, d.owner, checkpoint, { startNext, end, wait });
      await crashPointDuring('mid-checkpoint', run.id, writing);
      write = await writing;
    } catch (e) {
      if (!(e instanceof PermanentDatabaseError)) throw e;
      // The reply is paid for and cannot be recorded: the run ends with the cause, counting what it cost.
      return { end: { status: 'FAILED', error: e.message, usage: response.usage, costUsd }, written: false };
    }
    crashPoint('after-checkpoint', run.id);
    this.foldStarted(write, startNext);
    d.events.modelStep({ run, worker: d.owner.worker, seq, response, latencyMs, costUsd });
    if (wait) return this.waited(wait, write.waited ?? 'WAITING');
    return end && { end, written: true };
  }

  /**
   * The reply's `max_tokens`, cut so the call's worst case fits the money budget's remainder (see
   * cost-clamp.ts), or why not even a minimal call fits. Runs without a money budget keep `maxTokens`.
   */
  private costClamp(maxTokens: number) {
    const { run, c, d } = this;
    if (run.costBudgetUsd === null) return { maxTokens };
    const input = estimateInputTokens({ system: d.agent.system, tools: d.agent.toolDefinitions, messages: c.messages }, this.knownInput);
    return clampToCost(run.costBudgetUsd - this.costUsd, input, ratesOf(d.costOf, run.model), maxTokens);
  }

  /**
   * Runs the idempotent calls at the head of the turn together (tool-batch.ts); a database write that
   * can never succeed ends the run, as it does for a single step.
   */
  private async toolBatch(preStarted: string | null): Promise<TerminalStatus | undefined> {
    const { run, c, d } = this;
    const batch = idempotentBatch(c, (use) => d.agent.tools.isIdempotent(use.name) && !this.gated(use));
    try {
      await runToolBatch(batch, { run, c, d, preStarted, progress: (p) => (this.progress = { tokensUsed: p.tokensUsed, cancelRequested: p.cancelRequested }) });
    } catch (e) {
      if (!(e instanceof PermanentDatabaseError)) throw e;
      return this.finish({ status: 'FAILED', error: e.message });
    }
    return undefined;
  }

  /**
   * The calls of the latest turn that need a person's approval, as the wait to record with the model
   * step that asked for them; undefined when none does. Nothing of the turn runs until all are decided.
   */
  private async approvalsNeeded(): Promise<WaitStart | undefined> {
    const { tools } = this.d.agent;
    const calls = [...this.c.pending.values()].map((p) => p.use);
    const needing: ToolUseBlock[] = [];
    for (const use of calls) if (await tools.needsApproval(use)) needing.push(use);
    if (needing.length === 0) return undefined;
    const timeouts = needing.map((u) => tools.approvalTimeoutMs(u.name)).filter((ms): ms is number => ms !== null);
    const expiresAt = timeouts.length ? new Date(this.d.now().getTime() + Math.min(...timeouts)) : null;
    return {
      waiting: { kind: 'approval', toolCalls: needing.map(pendingCall), wakeAt: null, expiresAt },
      decisions: needing.map((u) => ({ toolUseId: u.id, kind: 'approval', expiresAt })),
    };
  }

  /** The run went WAITING (the attempt ends), or CANCELLED when a cancel was pending. */
  private waited(wait: WaitStart, status: 'WAITING' | 'CANCELLED'): StepOutcome {
    if (status === 'CANCELLED') return { end: { status: 'CANCELLED', error: 'cancelled on request' }, written: true };
    this.d.events.runWaiting({ run: this.run, worker: this.d.owner.worker, waiting: wait.waiting });
    throw new AttemptWaiting();
  }

  private async consumeDecision(toolUseId: string): Promise<void> {
    await this.d.store.consumeDecision(this.run.id, this.d.owner, toolUseId);
    this.crashDecisions?.delete(toolUseId);
  }

  /** A call the gate holds back: its result recorded without running it, or the run made to wait. */
  private async gatedStep(p: PendingTool, seq: number, gate: Exclude<Gate, { type: 'run' }>): Promise<StepOutcome> {
    const { run, c, d } = this;
    if (gate.type === 'resolve') return this.resolveStep(p, seq, { status: gate.status, result: gate.result });
    let wait: WaitStart;
    if (gate.type === 'wait') {
      // Every call of the turn the same person must decide about is listed, not just the next one.
      const waitsAlike = (q: PendingTool) => {
        const g = this.gate(q);
        return g.type === 'wait' && g.kind === gate.kind;
      };
      const calls = [...c.pending.values()].filter((q) => q === p || waitsAlike(q));
      const expiresAt = gate.kind === 'approval' ? (this.approvals?.get(p.use.id)?.expiresAt ?? null) : null;
      wait = {
        waiting: { kind: gate.kind, toolCalls: calls.map((q) => pendingCall(q.use)), wakeAt: null, expiresAt },
        decisions: calls.map((q) => ({ toolUseId: q.use.id, kind: gate.kind, expiresAt })),
      };
    } else {
      const start = gate.type === 'sleep' ? { seq, toolUseId: p.use.id, toolName: p.use.name } : undefined;
      wait = { waiting: { kind: 'timer', toolCalls: [pendingCall(p.use)], wakeAt: gate.wakeAt, expiresAt: null }, ...(start ? { start } : {}) };
    }
    const written = await d.store.wait(run.id, d.owner, wait);
    this.progress = written;
    return this.waited(wait, written.status);
  }

  /** Records a call's result without running it (denied, timed out, completed by a person, a timer that is up). */
  private async resolveStep(p: PendingTool, seq: number, outcome: ToolOutcome): Promise<StepOutcome> {
    const { run, c, d } = this;
    const { id: toolUseId, name: toolName } = p.use;
    if (p.startedSeq === null) {
      const started = await d.store.startTool(run.id, d.owner, { seq, toolUseId, toolName });
      this.progress = started;
      seq = started.seq;
      foldStep(c, { seq, kind: 'TOOL', status: 'STARTED', toolUseId, response: null, stopReason: null });
    }
    const write = await d.store.finishTool(run.id, d.owner, { toolUseId, status: outcome.status, result: outcome.result, latencyMs: 0 });
    this.progress = write;
    foldStep(c, { seq, kind: 'TOOL', status: outcome.status, toolUseId, response: outcome.result, stopReason: null });
    d.events.toolStep({ run, worker: d.owner.worker, seq, toolName, toolUseId, status: outcome.status, latencyMs: 0 });
    return undefined;
  }

  private async toolStep(p: PendingTool, seq: number, startedHere: boolean): Promise<StepOutcome> {
    const { run, c, d } = this;
    const { id: toolUseId, name: toolName } = p.use;
    const resumed = p.startedSeq !== null && !startedHere;
    crashPoint('before-tool-start', run.id);
    if (p.startedSeq === null) {
      const started = await d.store.startTool(run.id, d.owner, { seq, toolUseId, toolName, input: p.use.input });
      this.progress = started;
      seq = started.seq;
      foldStep(c, { seq, kind: 'TOOL', status: 'STARTED', toolUseId, response: null, stopReason: null });
    }
    d.events.toolStarted({ run, worker: d.owner.worker, seq, toolName, toolUseId, resumed });
    const t0 = performance.now();
    const outcome = await d.agent.tools.execute(p.use, { runId: run.id, signal: d.signal, worker: d.owner.worker, seq });
    crashPoint('after-tool-effect', run.id);
    const latencyMs = performance.now() - t0;
    const following = [...c.pending.values()].find((q) => q.use.id !== toolUseId);
    const start = following?.startedSeq === null ? this.nextToStart(following.use, this.progress, c.lastSeq) : undefined;
    crashPoint('before-tool-finish', run.id);
    const write = await d.store.finishTool(run.id, d.owner, { toolUseId, seq, status: outcome.status, result: outcome.result, latencyMs }, start);
    foldStep(c, { seq, kind: 'TOOL', status: outcome.status, toolUseId, response: outcome.result, stopReason: null });
    this.foldStarted(write, start);
    d.events.toolStep({ run, worker: d.owner.worker, seq, toolName, toolUseId, status: outcome.status, latencyMs });
    return undefined;
  }
}

/**
 * Drives a claimed run until it ends or the attempt is given up. Reads the log once (and the earlier
 * runs of its conversation, if it continues one), then folds each new step onto the state it holds
 * while it holds the lease. A resumed run talks to the model with the prompt and tool definitions it
 * started with (started-with.ts), whatever the code that resumes it defines now.
 */
export async function drive(run: Run & { hasSteps?: boolean }, deps: DriverDeps): Promise<TerminalStatus> {
  const d: DriverDeps = withFields(deps, { store: retryingWrites(deps.store, deps.signal) });
  let conversation;
  try {
    // A fork with no steps of its own still has its source's: its log is read like any other. A run that
    // continues others (previousRunId, its own or its fork source's) replays their conversations first.
    const [steps, earlier] = await Promise.all([
      run.hasSteps === false && !run.forkedFrom ? [] : d.store.steps(run.id),
      run.previousRunId || run.forkedFrom ? d.store.conversationBefore(run.id) : [],
    ]);
    d.agent = await agentAsStarted(d.agent, steps, (digest) => d.store.blob(digest));
    conversation = replayRun(run.input, steps, earlier);
  } catch (e) {
    // No attempt can do better with the same log: end the run now rather than crash on it again and again.
    if (!(e instanceof InconsistentLogError)) throw e;
    await d.store.finish(run.id, d.owner, { status: 'FAILED', error: `the run's log is inconsistent: ${e.message}` });
    d.events.runFinished({ run, worker: d.owner.worker, status: 'FAILED', error: e.message, tokensUsed: run.tokensUsed });
    return 'FAILED';
  }
  // Decisions exist only for a run that has waited for one (or waits now).
  const decisions = run.waiting ? await d.store.decisions(run.id) : [];
  // run.started, and the text a previous owner left streaming marked abandoned, before anything else.
  const claimed = await d.store.eventsClaimed?.(run.id, d.owner, run.attempts);
  if (claimed?.followed) d.followers?.follow();
  d.events.runClaimed({ run, worker: d.owner.worker, resumedAtSeq: conversation.lastSeq });
  return new RunDriver(run, conversation, d, decisions, claimed?.attempts).loop();
}
