/**
 * The live events of one model step while its model call streams: step.started, the text in small
 * batches (DELTA_BATCH: one text.delta row per batch, never one per token), and attempt.abandoned
 * when a try fails and the call goes on with another. Writes go out one at a time, in order, without
 * holding up the model call. step.started waits for the first batch (at most DELTA_BATCH.maxMs), and
 * `rest` hands what is still unwritten to the step's checkpoint, which writes it ahead of step.finished
 * in the same statement: a call that answers within one batch costs no commit of its own.
 *
 * The events are written as they come only while somebody follows the run (see Followers): a run
 * nobody watches writes its step's events with the checkpoint, the same kinds in the same order (its
 * text in batches cut by size only), and pays no statement of its own for them. Once a follower appears, what gathered is written at once.
 *
 * A write that fails is not retried here: the step ends with that error at `rest` (its attempt ends,
 * the run is resumed from its last checkpoint, and the worker that claims it abandons what this
 * attempt streamed). A lost lease fences these writes like any other.
 */
import type { RunId } from '../domain/types.ts';
import type { LlmError } from '../domain/errors.ts';
import { type AbandonReason, DELTA_BATCH } from '../events/protocol.ts';
import { newEvent, type NewEvent } from '../ports/new-event.ts';
import type { Lease } from '../ports/engine-store.ts';
import { crashPoint } from './crash-points.ts';

/** Where a step's events are written: the store (its method called on it, not a function bound to it for each step). */
export interface EventAppender {
  appendEvents(runId: RunId, owner: Lease, events: readonly NewEvent[]): Promise<void>;
}

/** How an LlmError reads in attempt.abandoned: "overloaded_error (529)", "timeout" … */
export function describeAttemptError(e: LlmError): string {
  if (e.type === 'timeout') return 'timeout';
  const what = e.type ?? (e.status === -1 ? 'network error' : 'error');
  return e.status > 0 ? `${what} (${e.status})` : what;
}

/**
 * Whether anybody follows a run's live events: told at the claim (an event hub has the run
 * registered) and, from then on, when a hub registers it (a notification). Never goes back: a reader
 * that left may come back, and writing as it streams is only what every followed run does.
 */
export class Followers {
  private on = false;
  private stream: StepStream | null = null;

  get followed(): boolean {
    return this.on;
  }

  follow(): void {
    if (this.on) return;
    this.on = true;
    this.stream?.goLive();
  }

  /** The step streaming now, told when a follower appears; none between model steps. */
  attach(stream: StepStream): void {
    this.stream = stream;
  }

  detach(stream: StepStream): void {
    if (this.stream === stream) this.stream = null;
  }
}

export class StepStream {
  private pending: { attempt: number; kind: 'text' | 'thinking'; text: string } | null = null;
  private queued: NewEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The last write in flight, or null before the first: most steps write nothing themselves (see above). */
  private writing: Promise<void> | null = null;
  private failure: unknown = undefined;
  /** The call's attempt (1, 2, … as the model client counts) whose text has not been finished or abandoned. */
  private open: number | null = null;
  /**
   * step.started is due and not yet taken: made when it is taken (first, before `queued`), not held as
   * an event for the whole call, which is all it is for a run nobody follows.
   */
  private started = false;

  constructor(
    private readonly store: EventAppender,
    private readonly runId: RunId,
    private readonly owner: Lease,
    private readonly seq: number,
    /** Attempts this step used before this claim (previous owners, earlier requeues): numbering goes on from there. */
    private readonly base: number,
    private readonly followers: Followers,
    private readonly batch: { maxMs: number; maxChars: number } = DELTA_BATCH,
  ) {}

  /** A follower appeared: what gathered is written now, and the rest as it comes. */
  goLive(): void {
    this.flush();
  }

  /** The step's attempt number as events carry it, for the model client's attempt `n`. */
  attemptNumber(n: number): number {
    return this.base + n;
  }

  start(): void {
    this.open = 1;
    this.started = true;
    this.followers.attach(this);
    if (this.followers.followed) this.timer ??= setTimeout(() => this.flush(), this.batch.maxMs);
  }

  text(text: string, attempt: number): void {
    this.add('text', text, attempt);
  }

  /** Thinking text: thinking.delta events, batched and abandoned with their attempt as text is. */
  thinking(text: string, attempt: number): void {
    this.add('thinking', text, attempt);
  }

  private add(kind: 'text' | 'thinking', text: string, attempt: number): void {
    if (text === '') return;
    this.open = attempt;
    if (this.pending && (this.pending.attempt !== attempt || this.pending.kind !== kind)) this.takePending();
    if (this.pending) this.pending.text += text;
    else this.pending = { attempt, kind, text };
    if (this.pending.text.length >= this.batch.maxChars) this.flush();
    else if (this.followers.followed) this.timer ??= setTimeout(() => this.flush(), this.batch.maxMs);
    else crashPoint('mid-stream', this.runId);
  }

  /** Try `attempt` failed: everything it streamed is void. */
  abandon(attempt: number, reason: AbandonReason, error?: string): void {
    if (this.pending?.attempt === attempt) this.takePending();
    this.queue(newEvent('attempt.abandoned', { seq: this.seq, attempt: this.attemptNumber(attempt), reason, ...(error ? { error } : {}) }));
    this.open = attempt + 1;
    this.flush();
  }

  /**
   * The call failed for good, or was stopped: the attempt in flight is abandoned (best effort: a
   * takeover would say so too). Written even when nobody follows the run: no checkpoint will carry it,
   * and a later reader should see why the step's attempts ended.
   */
  async fail(error?: string): Promise<void> {
    this.followers.detach(this);
    if (this.open !== null) this.abandon(this.open, 'failed', error);
    this.open = null;
    this.flush(true);
    await this.writing?.catch(() => {});
  }

  /**
   * Waits for every write in flight, throws what made one fail, and returns the events not written yet
   * (in order): the checkpoint writes them before step.finished.
   */
  async rest(): Promise<NewEvent[]> {
    this.followers.detach(this);
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
    this.takePending();
    return this.take();
  }

  /** The events gathered, in order (step.started first, when it is due), and none left. */
  private take(): NewEvent[] {
    const events = this.started
      ? [newEvent('step.started', { seq: this.seq, kind: 'MODEL', attempt: this.attemptNumber(1) })].concat(this.queued)
      : this.queued;
    this.started = false;
    this.queued = [];
    return events;
  }

  private takePending(): void {
    const p = this.pending;
    if (!p) return;
    this.pending = null;
    const data = { seq: this.seq, attempt: this.attemptNumber(p.attempt), text: p.text };
    this.queue(p.kind === 'text' ? newEvent('text.delta', data) : newEvent('thinking.delta', data));
  }

  private queue(e: NewEvent): void {
    // A new array of its size (concat makes one; a push, or a spread followed by more, keeps room for
    // 16 more): a step's queue holds one to three events, kept while its call is in flight and then with
    // its checkpoint.
    this.queued = this.queued.concat(e);
  }

  /** Writes what gathered, if somebody follows the run (or `always`); else it waits for the checkpoint. */
  private flush(always = false): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.takePending();
    if ((this.queued.length === 0 && !this.started) || this.failure !== undefined) return;
    if (!always && !this.followers.followed) return;
    const events = this.take();
    this.writing = (this.writing ?? Promise.resolve()).then(async () => {
      if (this.failure !== undefined) return;
      try {
        await this.store.appendEvents(this.runId, this.owner, events);
      } catch (e) {
        this.failure = e;
        return;
      }
      // A crash here leaves text committed for an attempt nobody will finish: the takeover's case.
      if (events.some((e) => e.type === 'text.delta' || e.type === 'thinking.delta')) crashPoint('mid-stream', this.runId);
    });
  }
}
