/**
 * The overview: every run by status, then for the last hour and the last day the tokens, cost and
 * steps (with a bar per 5 minutes or per hour) and p50/p95 step latency by kind. All of it is one
 * GET /api/overview, read again every few seconds while the tab is visible.
 */
import { api } from '../api.ts';
import { css, fill, h, svg } from '../dom.ts';
import { formatClock, formatCost, formatCount, formatDuration, formatPercent, formatTokens } from '../format.ts';
import { poll, reportConnection } from '../live.ts';
import type { View } from '../router.ts';
import { RUN_STATUS_ORDER, statusClass, statusLabel } from '../status.ts';
import type { Overview, OverviewWindow, UsageTotals } from '../types.ts';

const REFRESH_MS = 10_000;

/** The tokens a run's budget counts: input, cache writes and output (cache reads are left out). */
const budgetTokens = (t: UsageTotals) => t.inputTokens + t.cacheWriteTokens + t.outputTokens;

function statusCard(byStatus: Record<string, number>): HTMLElement {
  const statuses = [
    ...RUN_STATUS_ORDER.filter((s) => s in byStatus),
    ...Object.keys(byStatus).filter((s) => !(RUN_STATUS_ORDER as readonly string[]).includes(s)),
  ];
  const total = statuses.reduce((a, s) => a + (byStatus[s] ?? 0), 0);
  const bar = h('div', { class: 'stack', role: 'img', 'aria-label': statuses.map((s) => `${statusLabel(s)} ${byStatus[s]}`).join(', ') });
  for (const s of statuses) {
    const n = byStatus[s] ?? 0;
    if (!n) continue;
    const part = h('span', { class: `stack-part ${statusClass(s)}`, title: `${statusLabel(s)}: ${formatCount(n)}` });
    css(part, { 'flex-grow': String(n) });
    bar.append(part);
  }
  return h(
    'section',
    { class: 'card status-card' },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, 'Runs by status'),
      h('span', { class: 'big-inline', 'data-figure': 'runs-total' }, formatCount(total), h('span', { class: 'muted' }, ' runs')),
    ),
    total ? bar : h('div', { class: 'stack empty' }),
    h(
      'ul',
      { class: 'status-legend' },
      statuses.map((s) =>
        h(
          'li',
          { 'data-status': s },
          h('a', { href: `/?status=${s}` }, h('span', { class: `dot ${statusClass(s)}` }), statusLabel(s)),
          h('span', { class: 'legend-count', 'data-figure': `status-${s}` }, formatCount(byStatus[s] ?? 0)),
          h('span', { class: 'legend-share muted' }, formatPercent(byStatus[s] ?? 0, total)),
        ),
      ),
    ),
  );
}

function chart(w: OverviewWindow, label: (d: Date) => string): SVGSVGElement {
  const W = 600;
  const H = 120;
  const gap = 3;
  const values = w.series.map(budgetTokens);
  const max = Math.max(1, ...values);
  const barW = W / w.series.length - gap;
  const root = svg('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${H + 20}`,
    preserveAspectRatio: 'none',
    role: 'img',
    'aria-label': 'Tokens per interval',
  });
  for (const f of [0.5, 1]) root.append(svg('line', { class: 'chart-grid', x1: 0, x2: W, y1: H - f * H, y2: H - f * H }));
  w.series.forEach((b, i) => {
    const v = values[i]!;
    const hgt = v ? Math.max(2, (v / max) * H) : 0;
    const x = i * (W / w.series.length) + gap / 2;
    root.append(
      svg(
        'rect',
        { class: 'chart-hit', x, y: 0, width: barW, height: H },
        svg('title', null, `${label(new Date(b.start))}: ${formatTokens(v)} tokens · ${formatCost(b.costUsd)} · ${b.steps} steps`),
      ),
      svg('rect', { class: 'chart-bar', x, y: H - hgt, width: barW, height: hgt, rx: 2 }),
    );
  });
  const first = w.series[0];
  const last = w.series.at(-1);
  if (first && last) {
    root.append(
      svg('text', { class: 'chart-label', x: 0, y: H + 16 }, label(new Date(first.start))),
      svg('text', { class: 'chart-label end', x: W, y: H + 16 }, 'now'),
    );
  }
  return root;
}

function windowCard(title: string, key: 'hour' | 'day', w: OverviewWindow, now: Date): HTMLElement {
  const t = w.totals;
  const created = Object.values(w.runsCreated).reduce((a, b) => a + b, 0);
  const failed = (w.runsCreated.FAILED ?? 0) + (w.runsCreated.TIMED_OUT ?? 0);
  const label = (d: Date) => formatClock(d, now).replace(/:\d\d$/, '');
  return h(
    'section',
    { class: 'card window-card', 'data-window': key },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, title),
      h('span', { class: 'muted small' }, `since ${formatClock(new Date(w.since), now)}`),
    ),
    h(
      'div',
      { class: 'figures-row' },
      h(
        'div',
        { class: 'figure' },
        h('div', { class: 'figure-label' }, 'Tokens'),
        h(
          'div',
          { class: 'figure-value', 'data-figure': `${key}-tokens`, title: formatCount(budgetTokens(t)) },
          formatTokens(budgetTokens(t)),
        ),
      ),
      h(
        'div',
        { class: 'figure' },
        h('div', { class: 'figure-label' }, 'Cost'),
        h('div', { class: 'figure-value', 'data-figure': `${key}-cost` }, formatCost(t.costUsd)),
      ),
      h(
        'div',
        { class: 'figure' },
        h('div', { class: 'figure-label' }, 'Steps'),
        h('div', { class: 'figure-value', 'data-figure': `${key}-steps` }, formatCount(t.steps)),
      ),
      h(
        'div',
        { class: 'figure' },
        h('div', { class: 'figure-label' }, 'Runs started'),
        h('div', { class: 'figure-value', 'data-figure': `${key}-runs` }, formatCount(created)),
        failed ? h('div', { class: 'figure-note bad' }, `${formatCount(failed)} failed`) : null,
      ),
    ),
    h(
      'div',
      { class: 'token-split muted small' },
      `input ${formatTokens(t.inputTokens)} · output ${formatTokens(t.outputTokens)} · cache write ${formatTokens(t.cacheWriteTokens)} · cache read ${formatTokens(t.cacheReadTokens)} (not counted)`,
    ),
    chart(w, label),
  );
}

function latencyCard(o: Overview): HTMLElement {
  const cell = (ms: number | null) => (ms === null ? '–' : formatDuration(ms));
  return h(
    'section',
    { class: 'card latency-card' },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, 'Step latency'),
      h('span', { class: 'muted small' }, 'finished steps, nearest-rank percentiles'),
    ),
    h(
      'table',
      { class: 'latency' },
      h(
        'thead',
        null,
        h('tr', null, h('th', null, 'Kind'), ...['Last hour', 'Last 24 hours'].map((w) => h('th', { colspan: 3, class: 'c-group' }, w))),
        h(
          'tr',
          { class: 'sub-head' },
          h('th'),
          ...['steps', 'p50', 'p95', 'steps', 'p50', 'p95'].map((c) => h('th', { class: 'c-num' }, c)),
        ),
      ),
      h(
        'tbody',
        null,
        o.hour.latency.map((l, i) => {
          const d = o.day.latency[i]!;
          return h(
            'tr',
            { 'data-kind': l.kind },
            h(
              'td',
              null,
              h('span', { class: `wf-kind ${l.kind === 'MODEL' ? 'model' : 'tool'}` }),
              l.kind === 'MODEL' ? 'Model calls' : 'Tool calls',
            ),
            h('td', { class: 'c-num' }, formatCount(l.steps)),
            h('td', { class: 'c-num', 'data-figure': `hour-${l.kind}-p50` }, cell(l.p50Ms)),
            h('td', { class: 'c-num', 'data-figure': `hour-${l.kind}-p95` }, cell(l.p95Ms)),
            h('td', { class: 'c-num' }, formatCount(d.steps)),
            h('td', { class: 'c-num', 'data-figure': `day-${l.kind}-p50` }, cell(d.p50Ms)),
            h('td', { class: 'c-num', 'data-figure': `day-${l.kind}-p95` }, cell(d.p95Ms)),
          );
        }),
      ),
    ),
  );
}

export const overviewView: View = (main) => {
  const updated = h('span', { class: 'muted small' });
  const body = h('div', { class: 'overview-grid' }, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('section', { class: 'page overview-page' }, h('header', { class: 'page-head' }, h('h1', null, 'Overview'), updated), body));
  const poller = poll(async () => {
    try {
      const o = await api<Overview>('/api/overview');
      reportConnection(true);
      const now = new Date(o.at);
      updated.textContent = `as of ${formatClock(now, new Date())}`;
      updated.setAttribute('data-at', o.at);
      fill(
        body,
        statusCard(o.runsByStatus),
        windowCard('Last hour', 'hour', o.hour, now),
        windowCard('Last 24 hours', 'day', o.day, now),
        latencyCard(o),
      );
    } catch (e) {
      reportConnection(false, (e as Error).message);
    }
  }, REFRESH_MS);
  return () => poller.stop();
};
