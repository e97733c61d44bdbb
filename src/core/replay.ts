/**
 * Replay: the conversation is a fold over the ordered steps of a run. No I/O, no clock.
 *
 * The fold builds the message list exactly as the Messages API requires: each model step adds an
 * assistant message with its content blocks verbatim; the tool_result blocks of one turn are gathered
 * into a single user message, in the order of that turn's tool_use blocks, once every tool_use has a
 * result. A tool step still STARTED is pending (to be run again with the same idempotency key).
 *
 * A worker folds each new step onto the state it already has (`foldStep`), so the cost of a step does
 * not grow with the length of the log; a resumed run folds the whole log (`replay`): the same code.
 */
import {
  type ContentBlock,
  isToolUse,
  type Message,
  type Step,
  type StepKind,
  type StepStatus,
  textOf,
  type ToolResultBlock,
  type ToolUseBlock,
} from '../domain/types.ts';
import { InconsistentLogError } from '../domain/errors.ts';
import { resultContent } from './content-blocks.ts';
import { type RunInput, withUserInput } from './user-turn.ts';

export type { RunInput } from './user-turn.ts';
import { type CompactionRecord, compacted } from './compaction.ts';
import type { KnownInput } from './cost-clamp.ts';
import { exact } from './exact-array.ts';
import { ToolUseIds } from './tool-use-ids.ts';

export interface PendingTool {
  use: ToolUseBlock;
  /** Seq of its STARTED row when an earlier attempt began it and never recorded the result. */
  startedSeq: number | null;
}

/** A tool_use id the model used a second time: the Messages API needs them unique in a conversation. */
export interface ReusedToolUseId {
  id: string;
  /** The model step that used it first, and the one that used it again (the same step: twice in one turn). */
  firstSeq: number;
  seq: number;
}

export interface Conversation {
  /** The messages to send with the next model call. */
  readonly messages: Message[];
  /** Tool calls of the latest model turn that have no result yet, in the order the model made them. */
  pending: ReadonlyMap<string, PendingTool>;
  /** Results of the latest turn, waiting until the turn is complete. */
  results: ReadonlyMap<string, ToolResultBlock>;
  /** tool_use blocks of the latest turn, in order: the order its results must be sent in. */
  turn: ToolUseBlock[];
  lastSeq: number;
  /** Stop reason of the latest model step; null before the first. */
  stopReason: string | null;
  /** Content of the latest assistant turn (a paused turn's parts together). */
  lastContent: ContentBlock[] | null;
  /** Every tool_use id of the run so far, with the model step that made it. */
  readonly toolUseIds: ToolUseIds;
  /** Set when the latest model step reused a tool_use id; the run cannot go on from such a turn. */
  reusedToolUseId: ReusedToolUseId | null;
  /**
   * The model the next calls go to; null: any. Thinking blocks another model wrote are left out of
   * `messages` (their signatures are valid for that model only); the log keeps them.
   */
  readonly model: string | null;
  /**
   * The size of the latest model call of the log, as reported, and the messages it had seen with its
   * reply: what the next call's input is estimated from (the money budget's clamp, compaction), the
   * same on every attempt. Null before a call that reported usage, and after a compaction step.
   */
  lastCall: KnownInput | null;
  /** Compaction steps whose summary could not be used (see compaction.ts). */
  unusableSummaries: number;
}

/** The fields of a step the fold reads; a worker can fold a step it just wrote without reading it back. */
export type FoldableStep = Pick<Step, 'seq' | 'kind' | 'status' | 'toolUseId' | 'response' | 'stopReason'> & {
  kind: StepKind;
  status: StepStatus;
  /**
   * MODEL: the model that answered (absent: unknown, taken as the conversation's), and for a compaction
   * step how many messages it kept (see compaction.ts).
   */
  request?: { model?: string; compaction?: CompactionRecord } | null;
} & Partial<Pick<Step, 'inputTokens' | 'outputTokens' | 'cacheCreationInputTokens' | 'cacheReadInputTokens'>>;

/**
 * No call pending, no result waiting: one map for every conversation at rest. Each run in flight keeps
 * its conversation, and two empty maps apiece were ~400 bytes a run; a turn's calls and their results
 * get maps of their own, which the fold alone writes (never this one: it holds nothing to delete, and
 * a result makes a new map).
 */
const NONE: ReadonlyMap<string, never> = new Map<string, never>();

/** A turn's map: made by the fold, so its own to change (see NONE). */
const owned = <V>(map: ReadonlyMap<string, V>) => map as Map<string, V>;

/**
 * A conversation before its first step: `history` (the messages of the runs it continues, see
 * chain-replay.ts), then `input` as the next user turn.
 */
export function emptyConversation(input: RunInput, history: readonly Message[] = [], model: string | null = null): Conversation {
  return {
    model,
    messages: withUserInput(history, input),
    pending: NONE,
    results: NONE,
    turn: [],
    lastSeq: 0,
    stopReason: null,
    lastContent: null,
    lastCall: null,
    unusableSummaries: 0,
    toolUseIds: new ToolUseIds(),
    reusedToolUseId: null,
  };
}

function flushResults(c: Conversation): void {
  if (c.results.size === 0) return;
  const ordered = exact(c.turn.map((u) => c.results.get(u.id)).filter((r): r is ToolResultBlock => r !== undefined));
  c.messages.push({ role: 'user', content: ordered });
  c.results = NONE;
}

const THINKING = new Set(['thinking', 'redacted_thinking']);

/** The content as the conversation sends it: without the thinking of a model other than the conversation's. */
function sendable(c: Conversation, step: FoldableStep, content: ContentBlock[]): ContentBlock[] {
  const model = step.request?.model;
  if (!c.model || !model || model === c.model || !content.some((b) => THINKING.has(b.type))) return content;
  const kept = exact(content.filter((b) => !THINKING.has(b.type)));
  return kept.length > 0 ? kept : content;
}

function foldModel(c: Conversation, step: FoldableStep): void {
  const content = sendable(c, step, step.response as ContentBlock[]);
  flushResults(c);
  const last = c.messages[c.messages.length - 1]!;
  let turnContent = content;
  if (last.role === 'assistant' && c.stopReason === 'pause_turn') {
    // A paused turn continues: the API treats consecutive assistant content as one turn, so we keep one message.
    turnContent = [...(last.content as ContentBlock[]), ...content];
    c.messages[c.messages.length - 1] = { role: 'assistant', content: turnContent };
  } else {
    c.messages.push({ role: 'assistant', content });
  }
  c.turn = exact(content.filter(isToolUse));
  c.reusedToolUseId = null;
  const pending = new Map<string, PendingTool>();
  for (const use of c.turn) {
    const firstSeq = c.toolUseIds.firstSeq(use.id);
    if (firstSeq !== undefined) c.reusedToolUseId ??= { id: use.id, firstSeq, seq: step.seq };
    else c.toolUseIds.add(use.id, step.seq);
    pending.set(use.id, { use, startedSeq: null });
  }
  c.pending = pending.size > 0 ? pending : NONE;
  c.stopReason = step.stopReason;
  c.lastContent = turnContent;
  const tokens =
    (step.inputTokens ?? 0) + (step.cacheCreationInputTokens ?? 0) + (step.cacheReadInputTokens ?? 0) + (step.outputTokens ?? 0);
  c.lastCall = tokens > 0 ? { tokens, messages: c.messages.length } : null;
}

function foldTool(c: Conversation, step: FoldableStep): void {
  const id = step.toolUseId ?? '';
  const pending = c.pending.get(id);
  if (!pending) {
    throw new InconsistentLogError(`step ${step.seq}: tool step for ${id}, which the latest model turn did not ask for`);
  }
  if (step.status === 'STARTED') {
    pending.startedSeq = step.seq;
    return;
  }
  owned(c.pending).delete(id);
  if (c.pending.size === 0) c.pending = NONE;
  const result: ToolResultBlock = { type: 'tool_result', tool_use_id: id, content: resultContent(String(step.response ?? '')) };
  if (step.status === 'ERROR') result.is_error = true;
  const results = c.results.size > 0 ? owned(c.results) : new Map<string, ToolResultBlock>();
  results.set(id, result);
  c.results = results;
  if (c.pending.size === 0) flushResults(c);
}

/**
 * A compaction step: the older messages give way to its summary. It is no turn of the conversation:
 * what the latest model turn asked for and how it stopped stand.
 */
function foldCompaction(c: Conversation, step: FoldableStep, record: CompactionRecord): void {
  flushResults(c);
  c.lastCall = null;
  if (record.unusable) {
    c.unusableSummaries++;
    return;
  }
  const kept = record.keptMessages;
  if (!(kept > 0 && kept < c.messages.length) || c.messages[c.messages.length - kept]!.role !== 'assistant') {
    throw new InconsistentLogError(
      `step ${step.seq}: a compaction that keeps ${kept} of ${c.messages.length} messages does not cut at an assistant turn`,
    );
  }
  const summary = textOf((step.response as ContentBlock[] | null) ?? []);
  c.messages.splice(0, c.messages.length, ...compacted(c.messages, kept, summary));
}

/** Folds one step onto the conversation, in place. Steps must come in seq order. */
export function foldStep(c: Conversation, step: FoldableStep): Conversation {
  const compaction = step.kind === 'MODEL' ? step.request?.compaction : undefined;
  if (compaction) foldCompaction(c, step, compaction);
  else if (step.kind === 'MODEL') foldModel(c, step);
  else foldTool(c, step);
  c.lastSeq = Math.max(c.lastSeq, step.seq);
  return c;
}

export function replay(
  input: RunInput,
  steps: readonly FoldableStep[],
  history: readonly Message[] = [],
  model: string | null = null,
): Conversation {
  return steps.reduce(foldStep, emptyConversation(input, history, model));
}
