import { describe, expect, it } from 'vitest';
import { decide } from '../../src/engine/decide.ts';
import { type FoldableStep, replay } from '../../src/core/replay.ts';
import { elementsCapacity } from '../support/heap-snapshot.ts';

const model = (seq: number, content: object[], stopReason: string): FoldableStep => ({
  seq,
  kind: 'MODEL',
  status: 'DONE',
  toolUseId: null,
  response: content as never,
  stopReason,
});
const tool = (seq: number, toolUseId: string, status: 'STARTED' | 'DONE' | 'ERROR', response: string | null = null): FoldableStep => ({
  seq,
  kind: 'TOOL',
  status,
  toolUseId,
  response,
  stopReason: null,
});
const use = (id: string, name = 'lookup') => ({ type: 'tool_use', id, name, input: { id } });

describe('replay', () => {
  it('starts with the user input and nothing pending', () => {
    const c = replay('hello', []);
    expect(c.messages).toEqual([{ role: 'user', content: 'hello' }]);
    expect(c.pending.size).toBe(0);
    expect(decide(c)).toEqual({ type: 'model' });
  });

  it('groups the results of parallel tool uses into one user message, in the order of the tool uses', () => {
    const turn = [{ type: 'text', text: 'let me look' }, use('a'), use('b'), use('c')];
    // Results recorded out of order: b, c, a.
    const c = replay('q', [model(1, turn, 'tool_use'), tool(2, 'b', 'DONE', 'B'), tool(3, 'c', 'DONE', 'C'), tool(4, 'a', 'DONE', 'A')]);
    expect(c.messages).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: turn },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'a', content: 'A' },
          { type: 'tool_result', tool_use_id: 'b', content: 'B' },
          { type: 'tool_result', tool_use_id: 'c', content: 'C' },
        ],
      },
    ]);
    expect(c.pending.size).toBe(0);
    expect(c.lastSeq).toBe(4);
  });

  it('keeps the results of an unfinished turn out of the messages, and the rest pending in order', () => {
    const c = replay('q', [model(1, [use('a'), use('b'), use('c')], 'tool_use'), tool(2, 'b', 'DONE', 'B')]);
    expect(c.messages).toHaveLength(2);
    expect([...c.pending.keys()]).toEqual(['a', 'c']);
  });

  it('treats a STARTED tool as still pending, remembering its seq', () => {
    const c = replay('q', [model(1, [use('a')], 'tool_use'), tool(2, 'a', 'STARTED')]);
    expect(c.pending.get('a')).toMatchObject({ startedSeq: 2, use: { id: 'a' } });
    expect(c.messages).toHaveLength(2);
    expect(decide(c)).toMatchObject({ type: 'tool', pending: { startedSeq: 2 } });
  });

  it('marks an ERROR step is_error for the model', () => {
    const c = replay('q', [model(1, [use('a')], 'tool_use'), tool(2, 'a', 'STARTED'), tool(2, 'a', 'ERROR', 'error: boom')]);
    expect(c.messages[2]).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'a', content: 'error: boom', is_error: true }],
    });
  });

  it('finishes when the model ends its turn with nothing pending', () => {
    const steps = [model(1, [use('a')], 'tool_use'), tool(2, 'a', 'DONE', 'x'), model(3, [{ type: 'text', text: 'bye' }], 'end_turn')];
    expect(decide(replay('q', steps.slice(0, 2)))).toEqual({ type: 'model' });
    const c = replay('q', steps);
    expect(decide(c)).toMatchObject({ type: 'finish', end: { status: 'SUCCEEDED', output: 'bye' } });
    expect(c.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });

  it('continues a paused turn in the same assistant message', () => {
    const c = replay('q', [
      model(1, [{ type: 'text', text: 'part 1' }], 'pause_turn'),
      model(2, [{ type: 'text', text: 'part 2' }], 'end_turn'),
    ]);
    expect(c.messages).toEqual([
      { role: 'user', content: 'q' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'part 1' },
          { type: 'text', text: 'part 2' },
        ],
      },
    ]);
    expect(decide(c)).toMatchObject({ end: { status: 'SUCCEEDED', output: 'part 1part 2' } });
  });

  it('rejects a tool step the model never asked for', () => {
    expect(() => replay('q', [model(1, [use('a')], 'tool_use'), tool(2, 'zzz', 'DONE', 'x')])).toThrow(/did not ask for/);
  });
});

describe('decide', () => {
  it('calls the model first, runs pending tools, then finishes with the text', () => {
    expect(decide(replay('q', []))).toEqual({ type: 'model' });
    const c = replay('q', [model(1, [use('a')], 'tool_use')]);
    expect(decide(c)).toMatchObject({ type: 'tool', pending: { use: { id: 'a' } } });
    const done = replay('q', [
      model(1, [use('a')], 'tool_use'),
      tool(2, 'a', 'DONE', 'x'),
      model(3, [{ type: 'text', text: 'hi' }], 'end_turn'),
    ]);
    expect(decide(done)).toEqual({ type: 'finish', end: { status: 'SUCCEEDED', output: 'hi', stopReason: 'end_turn' } });
  });

  it('leaves a STARTED call to the gate, whether or not its tool is idempotent', () => {
    const c = replay('q', [model(1, [use('a', 'charge_card')], 'tool_use'), tool(2, 'a', 'STARTED')]);
    expect(decide(c)).toMatchObject({ type: 'tool', pending: { startedSeq: 2, use: { name: 'charge_card' } } });
  });

  it('handles every stop reason on purpose', () => {
    const after = (stop: string) => decide(replay('q', [model(1, [{ type: 'text', text: 't' }], stop)]));
    expect(after('stop_sequence')).toMatchObject({ end: { status: 'SUCCEEDED', output: 't' } });
    expect(after('max_tokens')).toMatchObject({ end: { status: 'SUCCEEDED', output: 't', stopReason: 'max_tokens' } });
    expect(after('pause_turn')).toEqual({ type: 'model' });
    expect(after('refusal')).toMatchObject({ end: { status: 'FAILED', error: expect.stringMatching(/refused/) } });
    expect(after('something_new')).toMatchObject({
      end: { status: 'FAILED', error: expect.stringMatching(/unknown stop reason "something_new"/) },
    });
    expect(after('tool_use')).toMatchObject({
      end: { status: 'FAILED', error: expect.stringMatching(/stop_reason "tool_use"\) but its reply holds no tool_use block/) },
    });
  });

  it.each(['end_turn', 'stop_sequence', 'pause_turn'])('runs the tools of a turn that ends with %s, then asks the model again', (stop) => {
    const turn = [{ type: 'text', text: 'checking' }, use('a')];
    expect(decide(replay('q', [model(1, turn, stop)]))).toMatchObject({ type: 'tool', pending: { use: { id: 'a' } } });
    expect(decide(replay('q', [model(1, turn, stop), tool(2, 'a', 'DONE', 'x')]))).toEqual({ type: 'model' });
  });

  it('does not run the tools of a turn cut off by max_tokens (the last one may be cut mid-input)', () => {
    const c = replay('q', [model(1, [{ type: 'text', text: 'partial' }, use('a')], 'max_tokens')]);
    expect(decide(c)).toMatchObject({ type: 'finish', end: { status: 'SUCCEEDED', output: 'partial', stopReason: 'max_tokens' } });
  });

  it('fails a turn that reuses a tool_use id, from an earlier turn or within itself, naming it', () => {
    const reused = replay('q', [model(1, [use('a')], 'tool_use'), tool(2, 'a', 'DONE', 'x'), model(3, [use('b'), use('a')], 'tool_use')]);
    expect(reused.reusedToolUseId).toEqual({ id: 'a', firstSeq: 1, seq: 3 });
    expect(decide(reused)).toMatchObject({
      type: 'finish',
      end: { status: 'FAILED', error: expect.stringMatching(/tool_use id "a" in step 3, already used in step 1/) },
    });
    const twice = replay('q', [model(1, [use('c'), use('c')], 'tool_use')]);
    expect(decide(twice)).toMatchObject({
      type: 'finish',
      end: { status: 'FAILED', error: expect.stringMatching(/tool_use id "c" twice in step 1/) },
    });
  });
});

describe('replay, as a run in flight holds it', () => {
  it('keeps what it holds for the rest of the run in arrays of exactly their size', async () => {
    const turn = [{ type: 'text', text: 'let me look' }, use('a'), use('b')];
    const c = replay('q', [model(1, turn, 'tool_use')]);
    // The turn's tool uses, filtered out of its content: a filter's array keeps room for 16 more.
    expect(c.turn).toHaveLength(2);
    expect(await elementsCapacity(c.turn)).toBe(2);
    const done = replay('q', [model(1, turn, 'tool_use'), tool(2, 'b', 'DONE', 'B'), tool(3, 'a', 'DONE', 'A')]);
    const results = done.messages[2]!.content as unknown[];
    expect(results).toHaveLength(2);
    expect(await elementsCapacity(results)).toBe(2);
  });
});
