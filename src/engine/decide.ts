/**
 * What the driver does next, given the replayed conversation. Pure.
 * Every stop reason the Messages API defines is handled on purpose; an unknown one is an error, not a guess.
 *
 * Tools are decided from the content, not the stop reason: a turn that holds tool_use blocks has them
 * run and their results sent back before the run goes on, whatever stop reason came with it — running
 * them and then finishing would drop results the model never saw. The one exception is `max_tokens`,
 * whose last tool_use may be cut off mid-input: that turn is not run at all.
 */
import { textOf } from '../domain/types.ts';
import type { RunEnd } from '../ports/engine-store.ts';
import type { Conversation, PendingTool } from '../core/replay.ts';

export type NextAction = { type: 'model' } | { type: 'tool'; pending: PendingTool } | { type: 'finish'; end: RunEnd };

/** Stop reasons under which a reply's tool calls are run all the same (see `decide`). */
const RUNS_TOOLS_ANYWAY = new Set(['end_turn', 'stop_sequence', 'pause_turn']);

/** True when the latest turn's tools run under a stop reason other than `tool_use` (worth a warning). */
export function toolUseUnderOtherStopReason(c: Conversation): boolean {
  return c.turn.length > 0 && c.stopReason !== null && RUNS_TOOLS_ANYWAY.has(c.stopReason);
}

/** Call the model: one object for every run (a run's loop holds its action while the step is under way). */
const CALL_MODEL: NextAction = Object.freeze({ type: 'model' });

export function decide(c: Conversation): NextAction {
  const next = c.pending.values().next();
  // Whether a call may run now (an approval, a call a crash left unfinished, a timer) is judged in
  // tool-call-verdict.ts: it needs the decisions recorded for the run, which the log does not hold.
  const runTools = (): NextAction => (next.done ? CALL_MODEL : { type: 'tool', pending: next.value });
  const output = () => textOf(c.lastContent ?? []);

  const reused = c.reusedToolUseId;
  if (reused) {
    const where =
      reused.firstSeq === reused.seq ? `twice in step ${reused.seq}` : `in step ${reused.seq}, already used in step ${reused.firstSeq}`;
    return {
      type: 'finish',
      end: {
        status: 'FAILED',
        output: output() || null,
        error: `the model used tool_use id "${reused.id}" ${where}; tool_use ids must be unique in a conversation, so the run cannot go on`,
        stopReason: c.stopReason,
      },
    };
  }

  switch (c.stopReason) {
    case null:
      return { type: 'model' };
    case 'pause_turn': // the API paused a long turn: send the content back and it continues
    case 'end_turn':
    case 'stop_sequence':
      if (c.turn.length > 0) return runTools();
      return c.stopReason === 'pause_turn'
        ? { type: 'model' }
        : { type: 'finish', end: { status: 'SUCCEEDED', output: output(), stopReason: c.stopReason } };
    case 'tool_use':
      if (c.turn.length === 0) {
        return {
          type: 'finish',
          end: {
            status: 'FAILED',
            output: output() || null,
            error: 'the model stopped to use a tool (stop_reason "tool_use") but its reply holds no tool_use block',
            stopReason: 'tool_use',
          },
        };
      }
      return runTools();
    case 'max_tokens':
      // The answer is cut short; it is still the answer, and the run says why it ends there.
      return { type: 'finish', end: { status: 'SUCCEEDED', output: output(), stopReason: 'max_tokens' } };
    case 'refusal':
      return {
        type: 'finish',
        end: {
          status: 'FAILED',
          output: output() || null,
          error: 'the model refused to continue (stop_reason "refusal")',
          stopReason: 'refusal',
        },
      };
    case 'model_context_window_exceeded':
      return {
        type: 'finish',
        end: {
          status: 'FAILED',
          output: output() || null,
          error: "the conversation no longer fits the model's context window",
          stopReason: c.stopReason,
        },
      };
    default:
      return {
        type: 'finish',
        end: { status: 'FAILED', error: `unknown stop reason "${c.stopReason}" from the model`, stopReason: c.stopReason },
      };
  }
}
