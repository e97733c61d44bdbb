/**
 * What the driver does next, given the replayed conversation. Pure.
 * Every stop reason the Messages API defines is handled on purpose; an unknown one is an error, not a guess.
 */
import { textOf } from '../domain.ts';
import type { RunEnd } from '../store/ports.ts';
import type { Conversation, PendingTool } from './replay.ts';

export type NextAction =
  | { type: 'model' }
  | { type: 'tool'; pending: PendingTool }
  | { type: 'finish'; end: RunEnd };

export function decide(c: Conversation, isIdempotent: (toolName: string) => boolean): NextAction {
  const next = c.pending.values().next();
  const runTools = (): NextAction => {
    if (next.done) return { type: 'model' };
    const p = next.value;
    if (p.startedSeq !== null && !isIdempotent(p.use.name)) {
      return {
        type: 'finish',
        end: {
          status: 'FAILED',
          error:
            `tool ${p.use.name} (${p.use.id}, step ${p.startedSeq}) was started but its result was never recorded, ` +
            'and it is not idempotent: a human must decide whether it ran before this run can go on',
        },
      };
    }
    return { type: 'tool', pending: p };
  };
  const output = () => textOf(c.lastContent ?? []);

  switch (c.stopReason) {
    case null:
    case 'pause_turn': // the API paused a long turn: send the content back and it continues
      return { type: 'model' };
    case 'tool_use':
      return runTools();
    case 'end_turn':
    case 'stop_sequence':
      return next.done ? { type: 'finish', end: { status: 'SUCCEEDED', output: output(), stopReason: c.stopReason } } : runTools();
    case 'max_tokens':
      // The answer is cut short; it is still the answer, and the run says why it ends there.
      return { type: 'finish', end: { status: 'SUCCEEDED', output: output(), stopReason: 'max_tokens' } };
    case 'refusal':
      return { type: 'finish', end: { status: 'FAILED', output: output() || null, error: 'the model refused to continue (stop_reason "refusal")', stopReason: 'refusal' } };
    case 'model_context_window_exceeded':
      return { type: 'finish', end: { status: 'FAILED', output: output() || null, error: "the conversation no longer fits the model's context window", stopReason: c.stopReason } };
    default:
      return { type: 'finish', end: { status: 'FAILED', error: `unknown stop reason "${c.stopReason}" from the model`, stopReason: c.stopReason } };
  }
}
