import { describe, expect, it } from 'vitest';
import { describeSeqs, type TurnRow, wholeTurnEnds } from '../../src/core/fork-points.ts';

const model = (seq: number, toolUses: number): TurnRow => ({ seq, kind: 'MODEL', status: 'DONE', toolUses });
const tool = (seq: number, status: TurnRow['status'] = 'DONE'): TurnRow => ({ seq, kind: 'TOOL', status, toolUses: null });

describe('wholeTurnEnds', () => {
  it('ends a turn after a reply without tool calls, and after the last result of one with calls', () => {
    expect(wholeTurnEnds([model(1, 2), tool(2), tool(3, 'ERROR'), model(4, 0)])).toEqual([3, 4]);
  });
  it('does not end a turn while one of its calls is unfinished or not yet started', () => {
    expect(wholeTurnEnds([model(1, 3), tool(2), tool(3, 'STARTED'), tool(4)])).toEqual([]);
    expect(wholeTurnEnds([model(1, 3), tool(2), tool(3)])).toEqual([]);
  });
  it('works on a part of a log that starts at a model step', () => {
    expect(wholeTurnEnds([model(7, 1), tool(8)])).toEqual([8]);
  });
});

describe('describeSeqs', () => {
  it('lists few seqs and elides the middle of many', () => {
    expect(describeSeqs([])).toBe('none yet');
    expect(describeSeqs([2, 4])).toBe('2, 4');
    expect(
      describeSeqs(
        Array.from({ length: 30 }, (_, i) => i + 1),
        4,
      ),
    ).toBe('1, 2, … (26 more), 29, 30');
  });
});
