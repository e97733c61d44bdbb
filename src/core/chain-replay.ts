/**
 * A run's conversation when it continues earlier runs (`previousRunId`): the messages of each run of
 * the chain, oldest first, each followed by the next run's input, then this run's own steps. Nothing
 * of an earlier run is copied into a later one; this fold follows the chain instead. Pure: no I/O.
 *
 * The store finds the chain by the same lineage walk that gives a fork its inherited steps
 * (lineage-sql.ts): a follow-up is the case "after the source's last step, then a new user input", so
 * each earlier run here carries its whole log (a fork's inherited steps included), and a fork of a
 * follow-up replays the follow-up's chain before its own log.
 *
 * A worker reads the chain once when it claims a run (store.conversationBefore) and folds each new
 * step onto the conversation it holds, so a step of the 100th run of a chain costs what a step of a
 * first run costs; only the claim reads more.
 */
import type { Message, RunId, RunStatus, ToolResultBlock } from '../domain/types.ts';
import { type Conversation, type FoldableStep, replay, type RunInput } from './replay.ts';

/** One finished run of a chain, as replay needs it. */
export interface EarlierRun {
  id: RunId;
  input: RunInput;
  status: RunStatus;
  /** Its steps in seq order. */
  steps: readonly FoldableStep[];
}

/** What the model is told of a tool call its run never ran (it ended first: cancelled, timed out, failed). */
export const NOT_RUN = 'error: not run: the run ended before this tool call ran';

/**
 * The messages a finished run leaves to the run that continues it. A run that ended mid-turn (tool
 * calls without results) gets an is_error result for each, so every tool_use has its tool_result.
 */
export function closedMessages(c: Conversation): Message[] {
  if (c.pending.size === 0) return c.messages;
  const results = c.turn.map(
    (u): ToolResultBlock => c.results.get(u.id) ?? { type: 'tool_result', tool_use_id: u.id, content: NOT_RUN, is_error: true },
  );
  return [...c.messages, { role: 'user', content: results }];
}

/** The messages of the chain `earlier` (oldest first): what a run continuing the last of them starts from. */
export function chainHistory(earlier: readonly EarlierRun[], model: string | null = null): Message[] {
  let history: Message[] = [];
  for (const run of earlier) history = closedMessages(replay(run.input, run.steps, history, model));
  return history;
}

/**
 * Replays a run's conversation: the chain it continues (oldest first, empty for a new one), then its
 * own steps, as sent to `model` (see Conversation.model).
 */
export function replayRun(
  input: RunInput,
  steps: readonly FoldableStep[],
  earlier: readonly EarlierRun[] = [],
  model: string | null = null,
): Conversation {
  return replay(input, steps, chainHistory(earlier, model), model);
}
