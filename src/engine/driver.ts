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
import {
  budgetTokens,
  type DecisionRecord,
  type ModelRequestParams,
  type RunProgress,
  isToolUse,
  type TerminalStatus,
  textOf,
  type ToolUseBlock,
  type Usage,
} from '../domain/types.ts';
import {
  CONTEXT_WINDOW_EXCEEDED,
  InconsistentLogError,
  LlmError,
  PermanentDatabaseError,
  WorkspaceMismatchError,
} from '../domain/errors.ts';
import type { CallOptions, LlmRequest, LlmResponse, ModelOptions } from '../llm/types.ts';
import { callOptions } from '../llm/model-options.ts';
import {
  BYTES_PER_TOKEN,
  compactionCut,
  compactionFor,
  MAX_UNUSABLE_SUMMARIES,
  SUMMARY_MAX_TOKENS,
  SUMMARY_MIN_TOKENS,
  summaryRequest,
  worthCompacting,
} from '../core/compaction.ts';
import { type DrivenRun, type FencedWrite, NO_ATTEMPTS, type RunEnd, type ToolStart, type WaitStart } from '../ports/engine-store.ts';
import { AttemptHandedBack, AttemptRequeued, AttemptWaiting, type DriverDeps, type Unrecorded } from './driver-types.ts';
import { storableCost, storableUsage } from '../core/storable.ts';
import type { ToolOutcome } from '../tools/executor.ts';
import { crashPoint, crashPointDuring } from './crash-points.ts';
import { decide, type NextAction, toolUseUnderOtherStopReason } from './decide.ts';
import { judgeToolCall, type ToolCallVerdict } from './tool-call-verdict.ts';
import { acceptReply } from './model-reply.ts';
import { guard } from '../core/guard.ts';
import { idempotentBatch, runToolBatch } from './tool-batch.ts';
import { clampToCost, estimateInputTokens, ratesOf } from '../core/cost-clamp.ts';
import { replayRun } from '../core/chain-replay.ts';
import { describeAttemptError, type EventAppender, Followers, StepStream } from './step-stream.ts';
import { type Conversation, foldStep, type PendingTool } from '../core/replay.ts';
import { agentAsStarted } from './started-with.ts';
import { withFields } from '../util/with-fields.ts';
import { runCall } from './tool-call.ts';
import { promised } from '../util/promised.ts';

/** A store that keeps the runs' events (`appendEvents` is optional in EngineStore). */
const hasEvents = <S extends object>(store: S): store is S & EventAppender =>
  typeof (store as Partial<EventAppender>).appendEvents === 'function';

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
    const tooLong = e.type === CONTEXT_WINDOW_EXCEEDED || e.type === 'context_length_exceeded';
    return `model call failed (${what}): ${tooLong ? "the conversation no longer fits the model's context window: " : ''}${e.message}`;
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
  /**
   * Decisions recorded for the run's tool calls, by tool_use id; they cannot change while it is RUNNING.
   * Most runs have none: a map is made only for a run that has some (thousands of runs are held at once).
   */
  private readonly approvals: Map<string, DecisionRecord> | undefined;
  private readonly crashDecisions: Map<string, DecisionRecord> | undefined;

  constructor(
    private readonly run: DrivenRun,
    private readonly conversation: Conversation,
    private readonly deps: DriverDeps,
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

  /** What to do with pending call `p` now: run it, record a result without running it, or wait. */
  private verdictOn(p: PendingTool): ToolCallVerdict {
    const { tools } = this.deps.agent;
    return judgeToolCall(p, {
      idempotent: tools.isIdempotent(p.use.name),
      timer: tools.timer(p.use),
      approval: this.approvals?.get(p.use.id),
      crash: this.crashDecisions?.get(p.use.id),
      waiting: this.run.waiting,
      now: this.deps.now(),
    });
  }

  /** A call that must not be started ahead of its turn in the loop: one with a decision or a timer. */
  private hasDecisionOrTimer(use: ToolUseBlock): boolean {
    return this.approvals?.has(use.id) || this.crashDecisions?.has(use.id) || this.deps.agent.tools.timer(use) !== null;
  }

  /** The live events of model step `seq`, when the store keeps events. */
  private stepStream(seq: number): StepStream | null {
    const { store } = this.deps;
    return hasEvents(store)
      ? new StepStream(store, this.run.id, this.deps.owner, seq, this.attemptsBefore.get(seq) ?? 0, this.deps.followers ?? new Followers())
      : null;
  }

  /** `lastSeq`: of the log; a fork's step cap counts its own steps, not those it continues from. */
  private guardAt(progress: RunProgress, lastSeq: number) {
    const { run } = this;
    const steps = lastSeq - (run.forkedFrom?.afterSeq ?? 0);
    return guard(
      {
        tokensUsed: progress.tokensUsed,
        cancelRequested: progress.cancelRequested,
        deadlineAt: run.deadlineAt,
        tokenBudget: run.tokenBudget,
        costUsd: this.costUsd,
        costBudgetUsd: run.costBudgetUsd,
        steps,
        maxSteps: run.maxSteps,
      },
      this.deps.now(),
    );
  }

  async loop(): Promise<TerminalStatus> {
    const { conversation, deps } = this;
    for (;;) {
      if (deps.shouldYield()) throw new AttemptHandedBack();
      const paused = deps.untilLive?.();
      if (paused) {
        await untilSettledOrAborted(paused, deps.signal);
        deps.signal.throwIfAborted();
        continue; // looked at again: a stop, still paused
      }
      deps.signal.throwIfAborted();
      const preStarted = this.preStarted !== null ? conversation.pending.get(this.preStarted) : undefined;
      this.preStarted = null;
      // Finishing is not a step: a run whose last step answered ends with that answer, whatever it cost.
      const action = preStarted ? ({ type: 'tool', pending: preStarted } as const) : decide(conversation);
      if (action.type === 'finish') return this.finish(action.end);
      if (!preStarted) {
        const stop = this.guardAt(this.progress, conversation.lastSeq);
        if (stop) return this.finish(stop);
      }
      // Idempotent calls with no decision and no timer run together; a call that waits for a person or a timer never joins them.
      if (
        action.type === 'tool' &&
        deps.agent.tools.isIdempotent(action.pending.use.name) &&
        !this.hasDecisionOrTimer(action.pending.use)
      ) {
        const ended = await this.toolBatch(preStarted?.use.id ?? null);
        if (ended) return ended;
        continue;
      }
      let outcome: StepOutcome;
      try {
        outcome = await this.step(action, preStarted !== undefined);
      } catch (e) {
        if (!(e instanceof PermanentDatabaseError)) throw e;
        return this.finish({ status: 'FAILED', error: e.message });
      }
      if (outcome === undefined) continue;
      return outcome.written ? this.finished(outcome.end) : this.finish(outcome.end);
    }
  }

  /**
   * The step `action` takes (a model call, a compaction, a tool call, or a result recorded without
   * running it); `preStarted` when its tool call's STARTED row was written with the previous step.
   * A method, not an async one, rather than a closure made for each step: the loop waits on what it
   * returns, with thousands of runs in flight.
   */
  private step(action: Exclude<NextAction, { type: 'finish' }>, preStarted: boolean): Promise<StepOutcome> {
    const { conversation } = this;
    if (action.type === 'model') {
      const seq = conversation.lastSeq + 1;
      const cut = this.compactionCut();
      return cut === null ? this.modelStep(seq) : this.compactionStep(seq, cut);
    }
    const { pending } = action;
    const seq = pending.startedSeq ?? conversation.lastSeq + 1;
    const verdict = preStarted ? null : this.verdictOn(pending);
    if (verdict && verdict.type !== 'run') return this.stepWithoutRunning(pending, seq, verdict);
    if (!verdict?.consumeDecision) return this.toolStep(pending, seq, preStarted);
    return this.consumeDecision(pending.use.id).then(() => this.toolStep(pending, seq, preStarted));
  }

  private async finish(end: RunEnd): Promise<TerminalStatus> {
    await this.deps.store.finish(this.run.id, this.deps.owner, end);
    if (end.usage) this.progress = withFields(this.progress, { tokensUsed: this.progress.tokensUsed + budgetTokens(end.usage) });
    this.costUsd += end.costUsd ?? 0;
    return this.finished(end);
  }

  /** The usage and cost of failed attempts of a call, when the provider reported any. */
  private unrecorded(usage: Usage | null | undefined): Unrecorded | null {
    if (!usage) return null;
    const clean = storableUsage(usage);
    return { usage: clean, costUsd: storableCost(this.deps.costOf(this.run.model, clean)) };
  }

  private finished(end: RunEnd): TerminalStatus {
    const budget = end.budget ? { budget: end.budget } : {};
    this.deps.events.runFinished({
      run: this.run,
      worker: this.deps.owner.worker,
      status: end.status,
      error: end.error ?? null,
      tokensUsed: this.progress.tokensUsed,
      ...budget,
    });
    return end.status;
  }

  /**
   * The tool call to start in the same statement as the step being recorded, saving a round trip and a
   * commit: only for an idempotent tool (a STARTED row written a moment before a crash just means it
   * runs once on resume) and only when the guard would let it run.
   */
  private nextToStart(use: ToolUseBlock | undefined, progressAfter: RunProgress, stepsAfter: number): ToolStart | undefined {
    if (!use || !this.deps.agent.tools.isIdempotent(use.name) || this.hasDecisionOrTimer(use) || this.guardAt(progressAfter, stepsAfter))
      return undefined;
    return { seq: stepsAfter + 1, toolUseId: use.id, toolName: use.name, input: use.input };
  }

  private foldStarted(write: FencedWrite, start: ToolStart | undefined): void {
    this.progress = write;
    if (!start || !write.nextStarted) return;
    foldStep(this.conversation, {
      seq: start.seq,
      kind: 'TOOL',
      status: 'STARTED',
      toolUseId: start.toolUseId,
      response: null,
      stopReason: null,
    });
    this.preStarted = start.toolUseId;
  }

  /** A model step's request as its step records it: the parameters, the digests of prompt and tools, the options sent. */
  private recordedRequest(maxTokens: number, options: CallOptions | undefined): ModelRequestParams {
    const { agent, llm } = this.deps;
    return {
      model: this.run.model,
      maxTokens,
      systemDigest: agent.systemDigest,
      toolsDigest: agent.toolsDigest,
      provider: llm.provider,
      ...(options && Object.keys(options).length > 0 && { options }),
    };
  }

  /** What the estimates of the next call's input read of it: the agent's prompt and tools, the conversation. */
  private nextRequest() {
    const { agent } = this.deps;
    return { system: agent.system, tools: agent.toolDefinitions, messages: this.conversation.messages };
  }

  /** The run's model options: as fixed when it was created (its agent's, its own over them), else its agent's. */
  private modelOptions(): ModelOptions | null {
    return this.run.modelOptions ?? this.deps.agent.modelOptions ?? null;
  }

  /**
   * The `max_tokens` of a call that wants `wanted`: no more than the token budget has left, so the last
   * step overshoots the budget by its input at most, not by a whole MAX_TOKENS of output; then cut to
   * fit the money budget (`stop` when not even a minimal call fits it).
   */
  private callMaxTokens(wanted: number): { maxTokens: number } | { stop: string } {
    return this.costClamp(Math.max(1, Math.min(wanted, this.run.tokenBudget - this.progress.tokensUsed)));
  }

  /**
   * One model call of step `seq`: what `replied` makes of the reply, or how the attempt or the run ends
   * (see callFailed). Not an async function: while the call is in flight, only its promise's reaction
   * waits here, not a suspended frame (one per run in flight, thousands of them).
   */
  private callModel(
    seq: number,
    request: LlmRequest,
    stream: StepStream | null,
    started: number,
    replied: (reply: LlmResponse) => Promise<StepOutcome>,
  ): Promise<StepOutcome> {
    const { run, deps } = this;
    const sending = promised(() =>
      deps.llm.send(request, {
        signal: deps.signal,
        deadlineAt: run.deadlineAt,
        logFields: { run_id: run.id, worker: deps.owner.worker, step_seq: seq },
        ...(stream && {
          onText: (text: string, attempt: number) => stream.text(text, attempt),
          onThinking: (text: string, attempt: number) => stream.thinking(text, attempt),
          onAttemptFailed: (attempt: number, error: LlmError) => stream.abandon(attempt, 'retry', describeAttemptError(error)),
        }),
      }),
    );
    return sending.then(replied, (e: unknown) => this.callFailed(e, seq, started, stream));
  }

  /**
   * Returns how the run ends (`written` when the checkpoint already recorded it), or undefined to go on.
   * Not an async function, nor is what follows the reply while its checkpoint is written: a step waits
   * on its model call or its write, so a suspended frame here would be one per run in flight.
   */
  private modelStep(seq: number): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const { agent } = deps;
    const modelOptions = this.modelOptions();
    const clamp = this.callMaxTokens(modelOptions?.maxTokens ?? agent.maxTokens);
    if ('stop' in clamp) return Promise.resolve({ end: { status: 'FAILED', error: clamp.stop, budget: 'cost' }, written: false });
    const { maxTokens } = clamp;
    const options = callOptions(modelOptions, maxTokens);
    const started = performance.now();
    const stream = this.stepStream(seq);
    stream?.start();
    const request = {
      model: run.model,
      maxTokens,
      system: agent.system,
      messages: conversation.messages,
      tools: agent.toolDefinitions,
      options,
    };
    return this.callModel(seq, request, stream, started, (reply) => this.recordReply(seq, reply, { maxTokens, options, stream, started }));
  }

  /** The model's reply to step `seq`: folded, then checkpointed with what follows it (see modelStep). */
  private async recordReply(
    seq: number,
    reply: LlmResponse,
    sent: { maxTokens: number; options: CallOptions | undefined; stream: StepStream | null; started: number },
  ): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const latencyMs = performance.now() - sent.started;
    // The stream's last events go in with the checkpoint, ahead of its step.finished. Taken first, so
    // nothing of this step is written later if what follows throws.
    const streamed = (await sent.stream?.rest()) ?? [];
    crashPoint('after-model-response', run.id);
    const { response, warnings } = acceptReply(reply);
    for (const w of warnings) deps.events.stepWarning({ run, worker: deps.owner.worker, seq, ...w });
    const costUsd = storableCost(deps.costOf(run.model, response.usage));
    const tokens = budgetTokens(response.usage);
    const u = response.usage;
    // Fold first: what comes next decides what the checkpoint can do in the same statement. If the
    // write fails, this attempt ends and its in-memory state is dropped with it.
    foldStep(conversation, {
      seq,
      kind: 'MODEL',
      status: 'DONE',
      toolUseId: null,
      response: response.content,
      stopReason: response.stopReason,
      request: { model: run.model },
      inputTokens: u.inputTokens,
      outputTokens: u.outputTokens,
      cacheCreationInputTokens: u.cacheCreationInputTokens,
      cacheReadInputTokens: u.cacheReadInputTokens,
    });
    this.costUsd += costUsd;
    if (toolUseUnderOtherStopReason(conversation)) {
      deps.events.stepWarning({
        run,
        worker: deps.owner.worker,
        seq,
        warning: 'tool-use-under-stop-reason',
        detail: `the reply asks for tools under stop_reason "${response.stopReason}"; running them`,
      });
    }
    const next = decide(conversation);
    const end = next.type === 'finish' ? next.end : undefined;
    const wait = next.type === 'tool' ? await this.approvalsNeeded() : undefined;
    const startNext =
      next.type === 'tool' && !wait && next.pending.startedSeq === null
        ? this.nextToStart(next.pending.use, { tokensUsed: this.progress.tokensUsed + tokens, cancelRequested: false }, seq)
        : undefined;
    const checkpoint = {
      seq,
      request: this.recordedRequest(sent.maxTokens, sent.options),
      content: response.content,
      stopReason: response.stopReason,
      usage: response.usage,
      budgetTokens: tokens,
      attempts: response.attempts,
      costUsd,
      latencyMs,
      streamed,
    };
    const checkpointed = (write: FencedWrite): StepOutcome => {
      crashPoint('after-checkpoint', run.id);
      this.foldStarted(write, startNext);
      deps.events.modelStep({ run, worker: deps.owner.worker, seq, response, latencyMs, costUsd });
      if (wait) return this.waited(wait, write.waited ?? 'WAITING');
      return end && { end, written: true };
    };
    // A rejection, never a throw: the retrying store's first try is a plain promise (retryTransient).
    const writing = deps.store.checkpointModel(run.id, deps.owner, checkpoint, { startNext, end, wait });
    return crashPointDuring('mid-checkpoint', run.id, writing).then(checkpointed, (e: unknown) => {
      if (!(e instanceof PermanentDatabaseError)) throw e;
      // The reply is paid for and cannot be recorded: the run ends with the cause, counting what it cost.
      return { end: { status: 'FAILED', error: e.message, usage: response.usage, costUsd }, written: false };
    });
  }

  /** A model call of step `seq` failed: the attempt ends (stopped, requeued) or the run does (the outcome). */
  private async callFailed(e: unknown, seq: number, started: number, stream: StepStream | null): Promise<StepOutcome> {
    const { run, deps } = this;
    await stream?.fail(e instanceof LlmError ? describeAttemptError(e) : undefined);
    if (deps.signal.aborted) {
      const cutOff = e instanceof LlmError ? this.unrecorded(e.usage) : null;
      if (cutOff && deps.cutOff) deps.cutOff.unrecorded = cutOff;
      throw deps.signal.reason;
    }
    deps.events.modelFailed({ run, worker: deps.owner.worker, seq, error: e as Error, latencyMs: performance.now() - started });
    if (!(e instanceof LlmError)) throw e;
    const unrecorded = this.unrecorded(e.usage);
    // Out of retries on a passing failure (rate limit, overload, outage): not the run's fault, so the
    // run waits in the queue and tries again; the attempt limit still ends a run that never gets through.
    if (e.retryable) throw new AttemptRequeued(describeLlmFailure(e), e.retryAfterMs, unrecorded);
    return { end: { status: 'FAILED', error: describeLlmFailure(e), ...unrecorded }, written: false };
  }

  /**
   * Where the conversation is cut for a summary before the next call (see compaction.ts), or null:
   * compaction is off, the next call's input is estimated below the threshold (from the log: the last
   * call's reported size and the tool results added since, so every attempt decides the same), there
   * is nothing worth cutting, or the model has not given a usable summary twice already.
   */
  private compactionCut(): number | null {
    const { conversation } = this;
    const last = conversation.lastCall;
    if (!last || conversation.unusableSummaries >= MAX_UNUSABLE_SUMMARIES) return null;
    const settings = compactionFor(this.deps.agent.compaction, this.run.model);
    if (!settings) return null;
    const estimate = estimateInputTokens(this.nextRequest(), last, BYTES_PER_TOKEN);
    if (estimate < settings.atInputTokens) return null;
    const cut = compactionCut(conversation.messages, settings.keepTurns);
    return cut !== null && worthCompacting(conversation.messages, cut, estimate) ? cut : null;
  }

  /**
   * A compaction step: the run's own call (its system prompt, tools and options) with a request for a
   * summary of the messages before `cut`, recorded as a MODEL step marked `compaction` with how many
   * messages it keeps. Its text is not streamed (it is no answer), and it has no live events of its
   * own: a call that fails leaves nothing to take back. A summary that cannot be used (cut short,
   * refused, a tool call instead, no text) is recorded too, as unusable: its cost stands, and the
   * conversation goes on uncompacted.
   */
  private compactionStep(seq: number, cut: number): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const { agent } = deps;
    const modelOptions = this.modelOptions();
    const clamp = this.callMaxTokens(Math.min(SUMMARY_MAX_TOKENS, modelOptions?.maxTokens ?? agent.maxTokens));
    // Too little left for a summary worth having: the run goes on to its next call and its budgets.
    if ('stop' in clamp || clamp.maxTokens < SUMMARY_MIN_TOKENS) return this.modelStep(seq);
    const { maxTokens } = clamp;
    const options = callOptions(modelOptions, maxTokens);
    const keptMessages = conversation.messages.length - cut;
    const started = performance.now();
    const request = {
      model: run.model,
      maxTokens,
      system: agent.system,
      messages: summaryRequest(conversation.messages, cut),
      tools: agent.toolDefinitions,
      options,
    };
    return this.callModel(seq, request, null, started, (reply) =>
      this.recordSummary(seq, reply, { maxTokens, options, keptMessages, started }),
    );
  }

  /** The model's summary for compaction step `seq`, usable or not, checkpointed (see compactionStep). */
  private async recordSummary(
    seq: number,
    reply: LlmResponse,
    sent: { maxTokens: number; options: CallOptions | undefined; keptMessages: number; started: number },
  ): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const { maxTokens, options, keptMessages } = sent;
    const latencyMs = performance.now() - sent.started;
    const { response, warnings } = acceptReply(reply);
    for (const w of warnings) deps.events.stepWarning({ run, worker: deps.owner.worker, seq, ...w });
    const summary = textOf(response.content);
    const unusable =
      response.stopReason !== 'end_turn'
        ? `stop_reason ${response.stopReason}`
        : response.content.some(isToolUse)
          ? 'a tool call'
          : summary.trim() === ''
            ? 'no text'
            : null;
    const compaction = unusable ? { keptMessages, unusable } : { keptMessages };
    if (unusable) {
      deps.events.stepWarning({
        run,
        worker: deps.owner.worker,
        seq,
        warning: 'summary-unusable',
        detail: `the summary came back with ${unusable}; the run goes on uncompacted`,
      });
    }
    const content = [{ type: 'text', text: summary }];
    const costUsd = storableCost(deps.costOf(run.model, response.usage));
    const stream = this.stepStream(seq);
    stream?.start();
    const checkpoint = {
      seq,
      request: withFields(this.recordedRequest(maxTokens, options), { compaction }),
      content,
      stopReason: response.stopReason,
      usage: response.usage,
      budgetTokens: budgetTokens(response.usage),
      attempts: response.attempts,
      costUsd,
      latencyMs,
      streamed: (await stream?.rest()) ?? [],
    };
    let write: FencedWrite;
    try {
      write = await deps.store.checkpointModel(run.id, deps.owner, checkpoint, {});
    } catch (e) {
      if (!(e instanceof PermanentDatabaseError)) throw e;
      return { end: { status: 'FAILED', error: e.message, usage: response.usage, costUsd }, written: false };
    }
    crashPoint('after-compaction', run.id);
    foldStep(conversation, {
      seq,
      kind: 'MODEL',
      status: 'DONE',
      toolUseId: null,
      response: content,
      stopReason: response.stopReason,
      request: { model: run.model, compaction },
    });
    this.costUsd += costUsd;
    this.progress = write;
    deps.events.modelStep({ run, worker: deps.owner.worker, seq, response: withFields(response, { content }), latencyMs, costUsd });
    return undefined;
  }

  /**
   * The reply's `max_tokens`, cut so the call's worst case fits the money budget's remainder (see
   * cost-clamp.ts), or why not even a minimal call fits. Runs without a money budget keep `maxTokens`.
   */
  private costClamp(maxTokens: number) {
    const { run, conversation, deps } = this;
    if (run.costBudgetUsd === null) return { maxTokens };
    const input = estimateInputTokens(this.nextRequest(), conversation.lastCall);
    return clampToCost(run.costBudgetUsd - this.costUsd, input, ratesOf(deps.costOf, run.model), maxTokens);
  }

  /**
   * Runs the idempotent calls at the head of the turn together (tool-batch.ts); a database write that
   * can never succeed ends the run, as it does for a single step.
   */
  private toolBatch(preStarted: string | null): Promise<TerminalStatus | undefined> {
    const { run, conversation, deps } = this;
    const batch = idempotentBatch(conversation, (use) => deps.agent.tools.isIdempotent(use.name) && !this.hasDecisionOrTimer(use));
    const progress = (p: RunProgress) => (this.progress = { tokensUsed: p.tokensUsed, cancelRequested: p.cancelRequested });
    return runToolBatch(batch, { run, conversation, deps, preStarted, progress }).then(
      () => undefined,
      (e: unknown) => {
        if (!(e instanceof PermanentDatabaseError)) throw e;
        return this.finish({ status: 'FAILED', error: e.message });
      },
    );
  }

  /**
   * The calls of the latest turn that need a person's approval, as the wait to record with the model
   * step that asked for them; undefined when none does. Nothing of the turn runs until all are decided.
   */
  private async approvalsNeeded(): Promise<WaitStart | undefined> {
    const { tools } = this.deps.agent;
    const calls = [...this.conversation.pending.values()].map((p) => p.use);
    const needing: ToolUseBlock[] = [];
    for (const use of calls) if (await tools.needsApproval(use)) needing.push(use);
    if (needing.length === 0) return undefined;
    const timeouts = needing.map((u) => tools.approvalTimeoutMs(u.name)).filter((ms): ms is number => ms !== null);
    const expiresAt = timeouts.length ? new Date(this.deps.now().getTime() + Math.min(...timeouts)) : null;
    return {
      waiting: { kind: 'approval', toolCalls: needing.map(pendingCall), wakeAt: null, expiresAt },
      decisions: needing.map((u) => ({ toolUseId: u.id, kind: 'approval', expiresAt })),
    };
  }

  /** The run went WAITING (the attempt ends), or CANCELLED when a cancel was pending. */
  private waited(wait: WaitStart, status: 'WAITING' | 'CANCELLED'): StepOutcome {
    if (status === 'CANCELLED') return { end: { status: 'CANCELLED', error: 'cancelled on request' }, written: true };
    this.deps.events.runWaiting({ run: this.run, worker: this.deps.owner.worker, waiting: wait.waiting });
    throw new AttemptWaiting();
  }

  private async consumeDecision(toolUseId: string): Promise<void> {
    await this.deps.store.consumeDecision(this.run.id, this.deps.owner, toolUseId);
    this.crashDecisions?.delete(toolUseId);
  }

  /** A call that may not run now: its result recorded without running it, or the run made to wait. */
  private async stepWithoutRunning(p: PendingTool, seq: number, verdict: Exclude<ToolCallVerdict, { type: 'run' }>): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    if (verdict.type === 'resolve') return this.resolveStep(p, seq, { status: verdict.status, result: verdict.result });
    let wait: WaitStart;
    if (verdict.type === 'wait') {
      // Every call of the turn the same person must decide about is listed, not just the next one.
      const waitsAlike = (q: PendingTool) => {
        const other = this.verdictOn(q);
        return other.type === 'wait' && other.kind === verdict.kind;
      };
      const calls = [...conversation.pending.values()].filter((q) => q === p || waitsAlike(q));
      const expiresAt = verdict.kind === 'approval' ? (this.approvals?.get(p.use.id)?.expiresAt ?? null) : null;
      wait = {
        waiting: { kind: verdict.kind, toolCalls: calls.map((q) => pendingCall(q.use)), wakeAt: null, expiresAt },
        decisions: calls.map((q) => ({ toolUseId: q.use.id, kind: verdict.kind, expiresAt })),
      };
    } else {
      const start = verdict.type === 'sleep' ? { seq, toolUseId: p.use.id, toolName: p.use.name } : undefined;
      wait = {
        waiting: { kind: 'timer', toolCalls: [pendingCall(p.use)], wakeAt: verdict.wakeAt, expiresAt: null },
        ...(start ? { start } : {}),
      };
    }
    const written = await deps.store.wait(run.id, deps.owner, wait);
    this.progress = written;
    return this.waited(wait, written.status);
  }

  /** Records a call's result without running it (denied, timed out, completed by a person, a timer that is up). */
  private async resolveStep(p: PendingTool, seq: number, outcome: ToolOutcome): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const { id: toolUseId, name: toolName } = p.use;
    if (p.startedSeq === null) {
      const started = await deps.store.startTool(run.id, deps.owner, { seq, toolUseId, toolName });
      this.progress = started;
      seq = started.seq;
      foldStep(conversation, { seq, kind: 'TOOL', status: 'STARTED', toolUseId, response: null, stopReason: null });
    }
    const write = await deps.store.finishTool(run.id, deps.owner, {
      toolUseId,
      status: outcome.status,
      result: outcome.result,
      latencyMs: 0,
    });
    this.progress = write;
    foldStep(conversation, { seq, kind: 'TOOL', status: outcome.status, toolUseId, response: outcome.result, stopReason: null });
    deps.events.toolStep({ run, worker: deps.owner.worker, seq, toolName, toolUseId, status: outcome.status, latencyMs: 0 });
    return undefined;
  }

  private async toolStep(p: PendingTool, seq: number, startedHere: boolean): Promise<StepOutcome> {
    const { run, conversation, deps } = this;
    const { id: toolUseId, name: toolName } = p.use;
    const resumed = p.startedSeq !== null && !startedHere;
    crashPoint('before-tool-start', run.id);
    if (p.startedSeq === null) {
      const started = await deps.store.startTool(run.id, deps.owner, { seq, toolUseId, toolName, input: p.use.input });
      this.progress = started;
      seq = started.seq;
      foldStep(conversation, { seq, kind: 'TOOL', status: 'STARTED', toolUseId, response: null, stopReason: null });
    }
    deps.events.toolStarted({ run, worker: deps.owner.worker, seq, toolName, toolUseId, resumed });
    const t0 = performance.now();
    const { outcome, files } = await runCall(deps, p.use, { runId: run.id, signal: deps.signal, worker: deps.owner.worker, seq });
    crashPoint('after-tool-effect', run.id);
    const latencyMs = performance.now() - t0;
    const following = [...conversation.pending.values()].find((q) => q.use.id !== toolUseId);
    const start = following?.startedSeq === null ? this.nextToStart(following.use, this.progress, conversation.lastSeq) : undefined;
    crashPoint('before-tool-finish', run.id);
    const write = await deps.store.finishTool(
      run.id,
      deps.owner,
      {
        toolUseId,
        seq,
        status: outcome.status,
        result: outcome.result,
        latencyMs,
        ...(files && { files }),
        ...(resumed && { rerun: true }),
      },
      start,
    );
    deps.workspace?.saved();
    foldStep(conversation, { seq, kind: 'TOOL', status: outcome.status, toolUseId, response: outcome.result, stopReason: null });
    this.foldStarted(write, start);
    deps.events.toolStep({ run, worker: deps.owner.worker, seq, toolName, toolUseId, status: outcome.status, latencyMs });
    return undefined;
  }
}

/**
 * Drives a claimed run until it ends or the attempt is given up. Reads the log once (and the earlier
 * runs of its conversation, if it continues one), then folds each new step onto the state it holds
 * while it holds the lease. A resumed run talks to the model with the prompt and tool definitions it
 * started with (started-with.ts), whatever the code that resumes it defines now.
 *
 * `deps` are made for this attempt (their `agent` and `workspace` are set here), their store retrying
 * its writes already (`retryingWrites` with the attempt's signal): the worker makes them so, once; a
 * copy made here would be held for the run's whole life too.
 */
export async function drive(run: DrivenRun & { hasSteps?: boolean }, deps: DriverDeps): Promise<TerminalStatus> {
  let conversation;
  try {
    // A fork with no steps of its own still has its source's: its log is read like any other. A run that
    // continues others (previousRunId, its own or its fork source's) replays their conversations first.
    const [steps, earlier] = await Promise.all([
      run.hasSteps === false && !run.forkedFrom ? [] : deps.store.steps(run.id),
      run.previousRunId || run.forkedFrom ? deps.store.conversationBefore(run.id) : [],
    ]);
    deps.agent = await agentAsStarted(deps.agent, steps, (digest) => deps.store.blob(digest));
    conversation = replayRun(run.inputContent ?? run.input, steps, earlier, run.model);
  } catch (e) {
    // No attempt can do better with the same log: end the run now rather than crash on it again and again.
    if (!(e instanceof InconsistentLogError)) throw e;
    await deps.store.finish(run.id, deps.owner, { status: 'FAILED', error: `the run's log is inconsistent: ${e.message}` });
    deps.events.runFinished({ run, worker: deps.owner.worker, status: 'FAILED', error: e.message, tokensUsed: run.tokensUsed });
    return 'FAILED';
  }
  // Decisions exist only for a run that has waited for one (or waits now).
  const decisions = run.waiting ? await deps.store.decisions(run.id) : [];
  // run.started, and the text a previous owner left streaming marked abandoned, before anything else.
  const claimed = await deps.store.eventsClaimed?.(run.id, deps.owner, run.attempts);
  if (claimed?.followed) deps.followers?.follow();
  deps.events.runClaimed({ run, worker: deps.owner.worker, resumedAtSeq: conversation.lastSeq });
  const { workspaces } = deps.agent;
  if (!workspaces) return new RunDriver(run, conversation, deps, decisions, claimed?.attempts).loop();
  try {
    deps.workspace = await workspaces.open(run.id, deps.signal);
  } catch (e) {
    if (!(e instanceof WorkspaceMismatchError)) throw e;
    // Rebuilding again would find the same: the run ends with the cause, its saved workspace untouched.
    const error = `the run's workspace cannot be rebuilt: ${e.message}`;
    await deps.store.finish(run.id, deps.owner, { status: 'FAILED', error });
    deps.events.runFinished({ run, worker: deps.owner.worker, status: 'FAILED', error, tokensUsed: run.tokensUsed });
    return 'FAILED';
  }
  try {
    return await new RunDriver(run, conversation, deps, decisions, claimed?.attempts).loop();
  } finally {
    await deps.workspace.close();
  }
}
