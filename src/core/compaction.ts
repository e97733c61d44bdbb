/**
 * Compaction: a run long enough to fill the model's context window has its older turns replaced by a
 * summary the model writes, as a model step of its own (recorded with `compaction` in its request). The
 * summary call is the run's own call (its system prompt, tools and options, so it reads the cached
 * prefix) with the request for a summary added to its last user turn.
 * Later calls send the summary, then the recent turns as they were. Replay reads the recorded summary
 * and how many messages it kept, so a resumed run sends exactly what the first attempt would have,
 * never a new summary. Pure: no I/O.
 *
 * Where the cut falls: at an assistant message, so the turns before it (each tool_use with its
 * tool_result in the user message after it) are summarised whole and the recent ones are kept whole;
 * the latest assistant turn is always kept.
 */
import type { Message } from '../domain/types.ts';
import { withUserInput } from './user-turn.ts';

export interface CompactionSettings {
  /** Compact before a call whose input is estimated at this many tokens or more: the last call's, and what came since. */
  atInputTokens: number;
  /** Assistant turns kept as they were, the latest among them; at least 1. */
  keepTurns: number;
}

/**
 * Context windows by model name, as the providers publish them (tokens); the first match counts. A
 * model the table does not know gets DEFAULT_CONTEXT_WINDOW, a cautious size for self-hosted models:
 * an agent on a larger one sets `compaction.contextWindow`.
 */
export const CONTEXT_WINDOWS: readonly [RegExp, number][] = [
  [/^claude-/, 200_000],
  [/^gpt-5/, 400_000],
  [/^gpt-4\.1/, 1_047_576],
  [/^gpt-4o/, 128_000],
  [/^o[134](-|$)/, 200_000],
  [/^gemini-/, 1_048_576],
];

export const DEFAULT_CONTEXT_WINDOW = 128_000;

/** The share of the context window at which a run compacts by default. */
export const DEFAULT_COMPACTION_SHARE = 0.8;

export const DEFAULT_KEEP_TURNS = 2;

/** The context window of `model` (see CONTEXT_WINDOWS). */
export function contextWindow(model: string): number {
  return CONTEXT_WINDOWS.find(([pattern]) => pattern.test(model))?.[1] ?? DEFAULT_CONTEXT_WINDOW;
}

/**
 * An agent's `compaction` option: false for none, else settings over the defaults of the run's model
 * (`contextWindow`: the model's window in tokens, when the table above does not know it).
 */
export type CompactionOption = false | (Partial<CompactionSettings> & { contextWindow?: number });

/** The settings a run of `model` compacts with (by default at 80% of its context window, keeping two turns), or null for none. */
export function compactionFor(option: CompactionOption | null | undefined, model: string): CompactionSettings | null {
  if (option === false) return null;
  const window = option?.contextWindow ?? contextWindow(model);
  return {
    atInputTokens: option?.atInputTokens ?? Math.floor(window * DEFAULT_COMPACTION_SHARE),
    keepTurns: option?.keepTurns ?? DEFAULT_KEEP_TURNS,
  };
}

/** The most the summary may take (max_tokens of the summary call), within the agent's max tokens and the run's budgets. */
export const SUMMARY_MAX_TOKENS = 8_192;

/** Below this the summary call is not made: a budget near its end leaves too little for a summary worth keeping. */
export const SUMMARY_MIN_TOKENS = 1_024;

/**
 * What a compaction step records in its request: how many of the conversation's last messages it kept;
 * or, for a summary that could not be used (cut short, a refusal, a tool call, no text), why: the step
 * keeps its cost on record and changes nothing in the conversation.
 */
export interface CompactionRecord {
  keptMessages: number;
  unusable?: string;
}

/** A rough size of JSON text in tokens, for what was added since the last call (which reported its own size). */
export const BYTES_PER_TOKEN = 4;

/** After this many unusable summaries a run compacts no more: a model that will not summarise is not asked again and again. */
export const MAX_UNUSABLE_SUMMARIES = 2;

/**
 * Whether the messages before `cut` are a share of the conversation worth a summary (a quarter at
 * least, of `totalTokens` as estimated): when the kept turns alone fill most of it, a summary would be
 * asked for at every turn and save little. Only the kept turns are measured.
 */
export function worthCompacting(messages: readonly Message[], cut: number, totalTokens: number): boolean {
  const kept = Math.ceil(JSON.stringify(messages.slice(cut)).length / BYTES_PER_TOKEN);
  return (totalTokens - kept) * 3 >= kept;
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

/** The text that opens the summary where it stands for the older turns. */
export const SUMMARY_PREFIX = 'A summary of the conversation so far, written when it grew long:\n\n';

/** The messages of the summary call: those before `cut` (they end on a user turn), the request in that turn. */
export function summaryRequest(messages: readonly Message[], cut: number): Message[] {
  return withUserInput(messages.slice(0, cut), [{ type: 'text', text: SUMMARY_REQUEST }]);
}

/** `messages` with all but the last `kept` replaced by one user message holding the summary. */
export function compacted(messages: readonly Message[], kept: number, summary: string): Message[] {
  const tail = messages.slice(Math.max(0, messages.length - kept));
  return [{ role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}${summary}` }] }, ...tail];
}
