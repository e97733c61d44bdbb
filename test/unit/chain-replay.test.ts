import { describe, expect, it } from 'vitest';
import { chainHistory, NOT_RUN, replayRun, type EarlierRun } from '../../src/core/chain-replay.ts';
import type { RunId } from '../../src/domain/types.ts';
import type { FoldableStep } from '../../src/core/replay.ts';

const model = (seq: number, content: unknown[], stopReason = 'end_turn'): FoldableStep =>
  ({ seq, kind: 'MODEL', status: 'DONE', toolUseId: null, response: content, stopReason }) as FoldableStep;
const tool = (seq: number, id: string, status: 'STARTED' | 'DONE' = 'DONE'): FoldableStep =>
  ({ seq, kind: 'TOOL', status, toolUseId: id, response: status === 'DONE' ? `result of ${id}` : null, stopReason: null }) as FoldableStep;
const use = (id: string) => ({ type: 'tool_use', id, name: 'lookup', input: {} });
const earlier = (id: string, input: string, steps: FoldableStep[], status: EarlierRun['status'] = 'SUCCEEDED'): EarlierRun => ({
  id: id as RunId,
  input,
  status,
  steps,
});

describe('chain replay', () => {
  it('puts the earlier runs first, oldest first, each input after the answer before it', () => {
    const first = earlier('a', 'one', [model(1, [use('t1')], 'tool_use'), tool(2, 't1'), model(3, [{ type: 'text', text: 'answer one' }])]);
    const second = earlier('b', 'two', [model(1, [{ type: 'text', text: 'answer two' }])]);
    const c = replayRun('three', [], [first, second]);
    expect(c.messages).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: [use('t1')] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'result of t1' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'answer one' }] },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: [{ type: 'text', text: 'answer two' }] },
      { role: 'user', content: 'three' },
    ]);
    // The run's own log starts at its own first step.
    expect(c.lastSeq).toBe(0);
  });

  it('closes a run that ended mid-turn: every tool call gets a result, and the next input joins that user turn', () => {
    // Cancelled while the second of two parallel tool calls was running.
    const cut = earlier('a', 'one', [model(1, [use('t1'), use('t2')], 'tool_use'), tool(2, 't1'), tool(3, 't2', 'STARTED')], 'CANCELLED');
    expect(replayRun('go on', [], [cut]).messages.slice(1)).toEqual([
      { role: 'assistant', content: [use('t1'), use('t2')] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'result of t1' },
          { type: 'tool_result', tool_use_id: 't2', content: NOT_RUN, is_error: true },
          { type: 'text', text: 'go on' },
        ],
      },
    ]);
    // A run that failed before any model call leaves its input as the last user turn.
    expect(chainHistory([earlier('x', 'hello', [], 'FAILED')])).toEqual([{ role: 'user', content: 'hello' }]);
    expect(replayRun('again', [], [earlier('x', 'hello', [], 'FAILED')]).messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'text', text: 'again' },
        ],
      },
    ]);
  });
});
