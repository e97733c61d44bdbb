/** How numbers, durations and times read on the page. Pure: the same input always reads the same. */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const grouped = new Intl.NumberFormat('en-US');

export function formatCount(n: number): string {
  return grouped.format(n);
}

/** 850 ms · 1.25 s · 12.4 s · 3m 20s · 2h 05m · 3d 4h */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < MINUTE) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < HOUR) {
    const m = Math.floor(ms / MINUTE);
    const s = Math.floor((ms % MINUTE) / 1000);
    return `${m}m ${String(s).padStart(2, '0')}s`;
  }
  if (ms < DAY) {
    const hours = Math.floor(ms / HOUR);
    const m = Math.floor((ms % HOUR) / MINUTE);
    return `${hours}h ${String(m).padStart(2, '0')}m`;
  }
  const d = Math.floor(ms / DAY);
  return `${d}d ${Math.floor((ms % DAY) / HOUR)}h`;
}

/** A short label for an axis tick: 0 · 250 ms · 1.5 s · 2 min · 1.5 h */
export function formatTick(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1000) return `${ms} ms`;
  if (ms < MINUTE) return `${trim(ms / 1000)} s`;
  if (ms < HOUR) return `${trim(ms / MINUTE)} min`;
  return `${trim(ms / HOUR)} h`;
}

const trim = (x: number) => String(Number(x.toFixed(2)));

/** How long ago, for lists: just now · 42s ago · 5m ago · 3h ago · 2d ago */
export function formatAge(ms: number): string {
  if (ms < 5_000) return 'just now';
  if (ms < MINUTE) return `${Math.floor(ms / 1000)}s ago`;
  if (ms < HOUR) return `${Math.floor(ms / MINUTE)}m ago`;
  if (ms < DAY) return `${Math.floor(ms / HOUR)}h ago`;
  return `${Math.floor(ms / DAY)}d ago`;
}

/** 842 · 12.3k · 1.23M */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${trimTo(n / 1000, n < 10_000 ? 2 : 1)}k`;
  return `${trimTo(n / 1_000_000, 2)}M`;
}

const trimTo = (x: number, digits: number) => String(Number(x.toFixed(digits)));

/** $0 · $0.0042 · $0.123 · $12.34 · $1,234 */
export function formatCost(usd: number): string {
  if (usd === 0) return '$0';
  if (usd < 0.0001) return '<$0.0001';
  if (usd < 0.01) return `$${usd.toFixed(4)}`;
  if (usd < 1) return `$${usd.toFixed(3)}`;
  if (usd < 1000) return `$${usd.toFixed(2)}`;
  return `$${grouped.format(Math.round(usd))}`;
}

export function formatPercent(part: number, whole: number): string {
  if (whole <= 0) return '–';
  const p = (100 * part) / whole;
  return p > 0 && p < 1 ? '<1%' : `${Math.round(p)}%`;
}

/** The first block of a UUID: enough to tell runs apart on a page. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** Local wall-clock time, with the date when it is not today. */
export function formatClock(date: Date, now: Date): string {
  const time = date.toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  if (date.toDateString() === now.toDateString()) return time;
  return `${date.toLocaleDateString('en-GB', { day: 'numeric', month: 'short' })} ${time}`;
}
