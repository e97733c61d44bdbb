/**
 * The live events of a run: what a reader of `GET /api/runs/{id}/events` receives, defined once.
 *
 * A run's events have ids that are positive and strictly increasing within the run; they are written
 * by the worker in the transaction of the checkpoint they describe (step.finished, tool.finished,
 * tool.started of a STARTED row: read from that step's row, src/store/step-events.ts; the others are
 * rows of table run_event), by a trigger in the transaction that
 * ends the run (run.finished), or in small batches while a model streams (text.delta: see
 * DELTA_BATCH; in a run nobody follows, the step's stream goes in with its checkpoint, see
 * src/engine/step-stream.ts). Any API process serves them from a cursor and then follows the run live; the worker and
 * the API never talk to each other.
 *
 * Honest text. The tries of one model step are numbered (`attempt`: 1, 2, … across retries and across
 * workers). When a try fails after streaming (an error event mid-stream, a timeout, a worker that died
 * or lost its lease), `attempt.abandoned` says so before the next try streams — written by the worker
 * that retries, or by the worker that takes the run over, before its own attempt starts. Every
 * text.delta of an abandoned (seq, attempt) is void. A client shows, for each model step, the deltas of
 * its latest attempt that was not abandoned (`foldEvents` does exactly that); at the end the text of
 * the last model step equals the run's `output`.
 *
 * Adding an event type is one line in RUN_EVENT_TYPES below (and its data type in RunEventData).
 */

/** Every event type, in the order a run usually meets them. */
export const RUN_EVENT_TYPES = [
  'run.started',
  'step.started',
  'text.delta',
  'thinking.delta',
  'attempt.abandoned',
  'tool.started',
  'tool.finished',
  'step.finished',
  'run.waiting',
  'run.resumed',
  'run.finished',
] as const;

export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

/** Why an attempt's text is void. */
export type AbandonReason =
  /** It failed and the call is tried again (`error` says how: "overloaded_error (529)", "timeout" …). */
  | 'retry'
  /** It failed for good, or was stopped (cancel, deadline, shutdown): the step did not finish. */
  | 'failed'
  /** Its worker died or lost its lease mid-stream; the worker that took the run over says so. */
  | 'takeover'
  /** The run ended while it was still open. */
  | 'run-ended';

/** The data of each event type (at least these fields; more may be added). */
export interface RunEventData {
  /** Each claim of the run: the worker that drives it and the claim's number (1 for the first). */
  'run.started': { worker: string; attempt: number };
  /** A step begins; a MODEL step says which attempt of it starts (a takeover starts the step again). */
  'step.started': { seq: number; kind: 'MODEL' | 'TOOL'; attempt?: number };
  /** Model text as it streams. */
  'text.delta': { seq: number; attempt: number; text: string };
  /** Thinking text as it streams (extended thinking); void with its attempt as text is. */
  'thinking.delta': { seq: number; attempt: number; text: string };
  /** Every text.delta and thinking.delta of (seq, attempt) is void. */
  'attempt.abandoned': { seq: number; attempt: number; reason: AbandonReason; error?: string };
  /**
   * A tool call starts; `input` is exactly as the model sent it, as the model step stores it. Model
   * output is never redacted: a stored assistant turn goes back to the model as it came, and the two
   * copies agree (encryption at rest protects them).
   */
  'tool.started': { seq: number; toolUseId: string; toolName: string; input: unknown };
  /**
   * A tool call's result as stored, cut to TOOL_OUTPUT_MAX_CHARS (`truncated` says so). A result comes
   * into the run from outside the model, so the REDACT patterns were applied to it first: to its string
   * values when it is JSON text (its other fields kept), else to the text.
   */
  'tool.finished': { seq: number; toolUseId: string; isError: boolean; output: string; truncated?: boolean };
  'step.finished': {
    seq: number;
    kind: 'MODEL' | 'TOOL';
    status: 'DONE' | 'ERROR';
    stopReason?: string | null;
    inputTokens?: number;
    outputTokens?: number;
    cacheReadInputTokens?: number;
    cacheCreationInputTokens?: number;
    latencyMs: number;
    /** A compaction step (see Models): its answer is a summary of the older turns, not a reply. */
    compaction?: true;
  };
  /**
   * The run waits and holds nothing (written with the status change): for people to decide about
   * `toolCalls` (kind approval or decision), or until `wakeAt` (kind timer).
   */
  'run.waiting': {
    kind: string;
    toolCalls: { toolUseId: string; toolName: string; input: unknown }[];
    wakeAt: string | null;
    expiresAt: string | null;
  };
  /** The run left WAITING (every call decided, its timer due, or an approval timed out); `kind` is what it waited for. */
  'run.resumed': { kind: string; toolCalls: { toolUseId: string; toolName: string; input: unknown }[] };
  /** The last event of every run: the stream closes after it. */
  'run.finished': { status: string; output: string | null; error: string | null; stopReason: string | null };
}

/** One event as the JSON form and followRun give it. */
export type RunEvent = {
  [T in RunEventType]: { id: number; type: T; data: RunEventData[T] };
}[RunEventType];

/** An event of a type this version does not know (a newer server): kept, and ignored by foldEvents. */
export interface UnknownRunEvent {
  id: number;
  type: string;
  data: Record<string, unknown>;
}

/** A tool.finished `output` is cut to this many characters (the whole result stays in the step). */
export const TOOL_OUTPUT_MAX_CHARS = 16_384;

/**
 * How the worker batches streamed text: a batch is written when its first text is DELTA_BATCH.maxMs
 * old or it holds DELTA_BATCH.maxChars characters, whichever comes first; one text.delta row per
 * batch, never one per token. The checkpoint writes what is left ahead of its step.finished (after
 * the batches in flight), so the deltas of a step always come before its step.finished.
 */
export const DELTA_BATCH = { maxMs: 100, maxChars: 4096 } as const;

/** @unit milliseconds — an SSE comment line is sent this often so proxies and clients see the stream alive. */
export const KEEP_ALIVE_MS = 15_000;

/** Events per page of the JSON form, by default and at most. */
export const EVENTS_PAGE = { default: 1000, max: 1000 } as const;

export function isFinished(e: { type: string }): boolean {
  return e.type === 'run.finished';
}

/** One event in Server-Sent Events framing; `data` is the event's JSON text (one line). */
export function sseFrame(id: number, type: string, data: string): string {
  return `id: ${id}\nevent: ${type}\ndata: ${data}\n\n`;
}
