import { describe, expect, it } from 'vitest';
import { formatAge, formatCost, formatDuration, formatPercent, formatTick, formatTokens } from '../../dashboard/src/format.ts';

describe('how the dashboard writes numbers', () => {
  it('writes durations at the precision that matters for their size', () => {
    expect(formatDuration(0)).toBe('0 ms');
    expect(formatDuration(804.4)).toBe('804 ms');
    expect(formatDuration(1250)).toBe('1.25 s');
    expect(formatDuration(12_449)).toBe('12.4 s');
    expect(formatDuration(200_000)).toBe('3m 20s');
    expect(formatDuration(2 * 3_600_000 + 5 * 60_000)).toBe('2h 05m');
    expect(formatDuration(3 * 86_400_000 + 4 * 3_600_000)).toBe('3d 4h');
    expect(formatDuration(-1)).toBe('–');
    expect(formatDuration(Number.NaN)).toBe('–');
  });

  it('writes ages, token counts, costs and shares compactly', () => {
    expect(formatAge(1_000)).toBe('just now');
    expect(formatAge(42_000)).toBe('42s ago');
    expect(formatAge(5 * 60_000 + 59_000)).toBe('5m ago');
    expect(formatAge(3 * 3_600_000)).toBe('3h ago');
    expect(formatAge(2 * 86_400_000)).toBe('2d ago');
    expect([0, 842, 1032, 12_345, 1_234_567].map(formatTokens)).toEqual(['0', '842', '1.03k', '12.3k', '1.23M']);
    expect([0, 0.00004, 0.0042, 0.1234, 12.345, 1234.5].map(formatCost)).toEqual([
      '$0',
      '<$0.0001',
      '$0.0042',
      '$0.123',
      '$12.35',
      '$1,235',
    ]);
    expect(formatPercent(1, 300)).toBe('<1%');
    expect(formatPercent(1032, 50_000)).toBe('2%');
    expect(formatPercent(1, 0)).toBe('–');
  });

  it('labels axis ticks in the unit of their size', () => {
    expect([0, 250, 1500, 120_000, 5_400_000].map(formatTick)).toEqual(['0', '250 ms', '1.5 s', '2 min', '1.5 h']);
  });
});
