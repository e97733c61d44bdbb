import { describe, expect, it } from 'vitest';
import {
  compacted,
  compactionCut,
  compactionFor,
  contextWindow,
  SUMMARY_PREFIX,
  SUMMARY_REQUEST,
  summaryRequest,
} from '../../src/core/compaction.ts';
import { replay, type FoldableStep } from '../../src/core/replay.ts';
import type { ContentBlock, Message } from '../../src/domain/types.ts';
import { messagesApiViolations } from '../support/messages-rules.ts';

/** The steps of a run whose model makes `turns` turns of `calls` tool calls each, then answers. */
function toolRun(turns: number, calls: number): FoldableStep[] {
  const steps: FoldableStep[] = [];
  let seq = 0;
  for (let t = 0; t < turns; t++) {
    const uses: ContentBlock[] = Array.from({ length: calls }, (_, i) => ({ type: 'tool_use', id: `t${t}_${i}`, name: 'f', input: {} }));
    steps.push({
      seq: ++seq,
      kind: 'MODEL',
      status: 'DONE',
      toolUseId: null,
      response: [{ type: 'text', text: `turn ${t}` }, ...uses],
      stopReason: 'tool_use',
    });
    for (const u of uses)
      steps.push({ seq: ++seq, kind: 'TOOL', status: 'DONE', toolUseId: String(u.id), response: `result of ${u.id}`, stopReason: null });
  }
  return steps;
}

describe('compactionCut', () => {
  it('cuts at the assistant turn that starts the last keepTurns turns, so each tool_use keeps its result', () => {
    for (let turns = 1; turns <= 6; turns++) {
      for (let calls = 1; calls <= 3; calls++) {
        for (let keep = 1; keep <= 3; keep++) {
          const { messages } = replay('task', toolRun(turns, calls));
          const cut = compactionCut(messages, keep);
          // The user's task, then an assistant turn and its results per turn: turn k starts at 1 + 2k.
          expect(cut).toBe(turns > keep ? 1 + 2 * (turns - keep) : null);
          if (cut === null) continue;
          expect(messages[cut]!.role).toBe('assistant');
          expect(messages.slice(cut).filter((m) => m.role === 'assistant')).toHaveLength(keep);
          const after = compacted(messages, messages.length - cut, 'the summary');
          expect(messagesApiViolations(after)).toEqual([]);
          expect(messagesApiViolations(summaryRequest(messages, cut))).toEqual([]);
          // The latest assistant turn is kept as it was.
          expect(after.filter((m) => m.role === 'assistant').at(-1)).toBe(messages.filter((m) => m.role === 'assistant').at(-1));
        }
      }
    }
  });

  it('does not cut a conversation that ends on an assistant turn (tool calls without results yet)', () => {
    const steps = toolRun(3, 1);
    const { messages } = replay('task', steps.slice(0, -1));
    expect(messages.at(-1)!.role).toBe('assistant');
    expect(compactionCut(messages, 1)).toBeNull();
  });

  it('asks for the summary after the messages it summarises, in their last user turn', () => {
    const { messages } = replay('task', toolRun(3, 1));
    const cut = compactionCut(messages, 1)!;
    const asked = summaryRequest(messages, cut);
    expect(asked).toHaveLength(cut);
    const last = asked.at(-1)!.content as ContentBlock[];
    expect(last[0]).toMatchObject({ type: 'tool_result' });
    expect(last.at(-1)).toEqual({ type: 'text', text: SUMMARY_REQUEST });
    expect(JSON.stringify(messages)).not.toContain(SUMMARY_REQUEST); // the conversation itself is untouched
  });
});

describe('replay of a compaction step', () => {
  it('replaces all but the kept messages with the summary, and later steps fold after it', () => {
    const steps = toolRun(3, 2);
    const before = replay('task', steps).messages;
    const kept = 2;
    const compaction: FoldableStep = {
      seq: steps.length + 1,
      kind: 'MODEL',
      status: 'DONE',
      toolUseId: null,
      response: [{ type: 'text', text: 'SUMMARY' }],
      stopReason: 'end_turn',
      request: { model: 'm', compaction: { keptMessages: kept } },
    };
    const answer: FoldableStep = {
      seq: steps.length + 2,
      kind: 'MODEL',
      status: 'DONE',
      toolUseId: null,
      response: [{ type: 'text', text: 'done' }],
      stopReason: 'end_turn',
    };
    const c = replay('task', [...steps, compaction]);
    expect(c.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}SUMMARY` }] }, ...before.slice(-kept)]);
    expect(c.stopReason).toBe('tool_use'); // no turn of its own
    const after = replay('task', [...steps, compaction, answer]);
    expect(after.messages.at(-1)).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'done' }] });
    expect(messagesApiViolations(after.messages as Message[])).toEqual([]);
  });
});

describe('settings', () => {
  it('compacts at 80% of the context window by default, keeping two turns; false turns it off', () => {
    expect(compactionFor(null, 'claude-sonnet-4-6')).toEqual({ atInputTokens: 160_000, keepTurns: 2 });
    expect(compactionFor(undefined, 'gpt-5.4-mini')).toEqual({ atInputTokens: 320_000, keepTurns: 2 });
    expect(compactionFor({ contextWindow: 1_000_000, keepTurns: 3 }, 'claude-sonnet-4-6')).toEqual({
      atInputTokens: 800_000,
      keepTurns: 3,
    });
    expect(compactionFor({ atInputTokens: 5_000 }, 'x')).toEqual({ atInputTokens: 5_000, keepTurns: 2 });
    expect(compactionFor(false, 'x')).toBeNull();
    expect(contextWindow('qwen3:8b')).toBe(128_000); // unknown: cautious
    expect(contextWindow('gpt-4o-mini')).toBe(128_000);
  });
});
