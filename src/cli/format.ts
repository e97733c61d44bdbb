/** Text for people: aligned columns, relative times, short durations, costs and counts. Pure. */

export type Align = 'left' | 'right';

export interface Column<T> {
  title: string;
  value: (row: T) => string;
  align?: Align;
}

/** Rows under their column titles, each column as wide as its widest cell, two spaces between. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => c.value(r)));
  const widths = columns.map((c, i) => Math.max(c.title.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => (columns[i]!.align === 'right' ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.title)), ...cells.map(line)].join('\n') + '\n';
}

/** 1.2s, 45s, 3m 12s, 2h 5m, 3d 4h. */
export function duration(ms: number): string {
  if (ms < 999.5) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 9.95) return `${s.toFixed(1)}s`;
  // Whole seconds first, so that 119.97 s is "2m 0s", never "1m 60s".
  const total = Math.round(s);
  if (total < 60) return `${total}s`;
  const m = Math.floor(total / 60);
  if (m < 60) return `${m}m ${total - m * 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m - h * 60}m`;
  const d = Math.floor(h / 24);
  return `${d}d ${h - d * 24}h`;
}

/** How long ago `then` was, from `now`: "just now", "45s ago", "3m ago", "2h ago", "5d ago"; "in 2m" for the future. */
export function ago(then: Date, now: Date): string {
  const ms = now.getTime() - then.getTime();
  const abs = Math.abs(ms);
  if (abs < 1000) return 'just now';
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ];
  const [size, unit] = units.find(([u]) => abs >= u)!;
  const n = Math.floor(abs / size);
  return ms >= 0 ? `${n}${unit} ago` : `in ${n}${unit}`;
}

export const count = (n: number) => n.toLocaleString('en-US');

export function cost(usd: number): string {
  if (usd === 0) return '$0';
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** Text on one line, cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/** `30d`, `12h`, `90m`, `45s`, `2w` → milliseconds; null when it is not one of those. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([smhdw])$/.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2]!]!;
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}
