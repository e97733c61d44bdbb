import { describe, expect, it } from 'vitest';
import { bearerToken } from '../../src/api/auth.ts';
import { ago, cost, duration, parseDuration, table } from '../../src/cli/format.ts';

describe("the runs commands' text", () => {
  it('aligns columns: each as wide as its widest cell, numbers to the right', () => {
    const rows = [
      { a: 'x', n: 5 },
      { a: 'longer', n: 1234 },
    ];
    expect(
      table(rows, [
        { title: 'NAME', value: (r) => r.a },
        { title: 'N', value: (r) => String(r.n), align: 'right' },
      ]),
    ).toBe('NAME       N\nx          5\nlonger  1234\n');
  });

  it('says how long ago, and how long, in a few characters', () => {
    const now = new Date('2026-01-01T12:00:00Z');
    const before = (ms: number) => ago(new Date(now.getTime() - ms), now);
    expect([before(400), before(45_000), before(180_000), before(7_200_000), before(3 * 86_400_000), before(-120_000)]).toEqual([
      'just now',
      '45s ago',
      '3m ago',
      '2h ago',
      '3d ago',
      'in 2m',
    ]);
    expect([duration(57), duration(1_234), duration(45_000), duration(192_000), duration(7_500_000), duration(100 * 3_600_000)]).toEqual([
      '57ms',
      '1.2s',
      '45s',
      '3m 12s',
      '2h 5m',
      '4d 4h',
    ]);
    // Rounded once, at the smallest unit shown: never "1m 60s", "60s" or "10.0s".
    expect([duration(119_966), duration(59_700), duration(9_970), duration(999.7)]).toEqual(['2m 0s', '1m 0s', '10s', '1.0s']);
    expect([cost(0), cost(0.0042), cost(1.5)]).toEqual(['$0', '$0.0042', '$1.50']);
  });

  it('reads --older-than durations, and nothing else', () => {
    expect(parseDuration('30d')).toBe(30 * 86_400_000);
    expect(parseDuration('12h')).toBe(12 * 3_600_000);
    expect(parseDuration('1.5w')).toBe(1.5 * 7 * 86_400_000);
    for (const bad of ['30', 'd', '-1d', '0d', '30 days', '1y']) expect(parseDuration(bad), bad).toBeNull();
  });
});

describe('the bearer token of a request', () => {
  it('is the token after "Bearer", undefined without the header, null for any other scheme', () => {
    expect(bearerToken({ authorization: 'Bearer dak_abc' })).toBe('dak_abc');
    expect(bearerToken({ authorization: 'bearer   dak_abc ' })).toBe('dak_abc');
    expect(bearerToken({})).toBeUndefined();
    expect(bearerToken({ authorization: 'Basic YTpi' })).toBeNull();
    expect(bearerToken({ authorization: 'Bearer a b' })).toBeNull();
  });
});
