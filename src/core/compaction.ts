/**
 * Compaction: a run long enough to fill the model's context window has its older turns replaced by a
 * summary the model writes, as a model step of its own (recorded with `compaction` in its request).
 * Later calls send the summary, then the recent turns as they were. Replay reads the recorded summary
 * and how many messages it kept, so a resumed run sends exactly what the first attempt would have,
 * never a new summary. Pure: no I/O.
 *
 * Where the cut falls: at an assistant message, so the turns before it (each tool_use with its
 * tool_result in the user message after it) are summarised whole and the recent ones are kept whole;
 * the latest assistant turn is always kept.
 */
import type { ContentBlock, Message } from '../domain/types.ts';

export interface CompactionSettings {
  /** Compact before a call when the previous call's input and output reached this many tokens. */
  atInputTokens: number;
  /** Assistant turns kept as they were, the latest among them; at least 1. */
  keepTurns: number;
}

/** The context window assumed for a model whose name does not say otherwise: that of current Claude models. */
export const DEFAULT_CONTEXT_WINDOW = 200_000;

/** The share of the context window at which a run compacts by default. */
export const DEFAULT_COMPACTION_SHARE = 0.8;

export const DEFAULT_KEEP_TURNS = 2;

/** The context window of `model`: 1M for a name that asks for it (`…[1m]`), else DEFAULT_CONTEXT_WINDOW. */
export function contextWindow(model: string): number {
  return /\[1m\]$/i.test(model) ? 1_000_000 : DEFAULT_CONTEXT_WINDOW;
}

/** The default settings for `model`: at 80% of its context window, keeping the last two turns. */
export function defaultCompaction(model: string): CompactionSettings {
  return { atInputTokens: Math.floor(contextWindow(model) * DEFAULT_COMPACTION_SHARE), keepTurns: DEFAULT_KEEP_TURNS };
}

/** An agent's `compaction` option: false for none, else settings over the defaults of the run's model. */
export type CompactionOption = false | Partial<CompactionSettings>;

/** The settings a run of `model` compacts with, or null for none. */
export function compactionFor(option: CompactionOption | null | undefined, model: string): CompactionSettings | null {
  if (option === false) return null;
  return { ...defaultCompaction(model), ...option };
}

/** The most the summary may take (max_tokens of the summary call), within the run's budgets. */
export const SUMMARY_MAX_TOKENS = 8_192;

/** What a compaction step records in its request: how many of the conversation's last messages it kept. */
export interface CompactionRecord {
  keptMessages: number;
}

/**
 * The index of the first message kept (an assistant message: the start of the last `keepTurns`
 * assistant turns), or null when there is too little before it to be worth a summary (fewer than two
 * messages) or the conversation is not at a turn boundary (it must end on a user message whose tool
 * results, if any, are all there).
 */
export function compactionCut(messages: readonly Message[], keepTurns: number): number | null {
  if (messages.at(-1)?.role !== 'user') return null;
  let seen = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role !== 'assistant') continue;
    seen++;
    if (seen === Math.max(1, keepTurns)) return i >= 2 ? i : null;
  }
  return null;
}

/** What the model is asked, after the messages it summarises. */
export const SUMMARY_REQUEST =
  'The conversation above is long. Write a summary of it that lets you continue the task without it: the task and ' +
  'its constraints, what has been done and found (tool results that matter, with their exact values), what is ' +
  'still open, and any decisions made. Answer with the summary only.';

/** The system prompt of the summary call. */
export const SUMMARY_SYSTEM = 'You summarise conversations between a user and an AI agent, so that the agent can go on from the summary.';

/** The text that opens the summary where it stands for the older turns. */
export const SUMMARY_PREFIX = 'A summary of the conversation so far, written when it grew long:\n\n';

/** The messages of the summary call: those before `cut`, the last (a user turn) followed by the request. */
export function summaryRequest(messages: readonly Message[], cut: number): Message[] {
  const before = messages.slice(0, cut);
  const last = before.at(-1)!;
  const blocks: ContentBlock[] = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : [...last.content];
  return [...before.slice(0, -1), { role: 'user', content: [...blocks, { type: 'text', text: SUMMARY_REQUEST }] }];
}

/** `messages` with all but the last `kept` replaced by one user message holding the summary. */
export function compacted(messages: readonly Message[], kept: number, summary: string): Message[] {
  const tail = messages.slice(Math.max(0, messages.length - kept));
  return [{ role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}${summary}` }] }, ...tail];
}
