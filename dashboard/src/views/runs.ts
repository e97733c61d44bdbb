/**
 * The runs list, newest first: status, agent, age, duration, steps, tokens and cost. Filtered by
 * status (the counts come from the overview), paged with the API's cursor (?status= and ?cursor= are
 * in the address, so a page can be reloaded and shared), refreshed while the tab is visible. The
 * agent filter (?agent=) offers the agents of the runs seen so far (the API has no list of agents),
 * and is kept across the status chips and paging.
 */
import { api, ApiError } from '../api.ts';
import { css, fill, h } from '../dom.ts';
import { formatAge, formatClock, formatCost, formatCount, formatDuration, formatTokens, shortId } from '../format.ts';
import { poll, reportConnection } from '../live.ts';
import { navigate, type View } from '../router.ts';
import { isActive, RUN_STATUS_ORDER, statusLabel, statusPill } from '../status.ts';
import type { Overview, RunListItem, RunPage } from '../types.ts';

const PAGE_SIZE = 50;
const COLUMNS = [
  ['Status', 'c-status'],
  ['Run', 'c-run'],
  ['Agent', 'c-agent'],
  ['Age', 'c-age'],
  ['Duration', 'c-num c-duration'],
  ['Steps', 'c-num c-steps'],
  ['Tokens', 'c-num c-tokens'],
  ['Cost', 'c-num c-cost'],
] as const;
const REFRESH_MS = 3000;
/** The status counts read every run; they change slowly, so they are read less often than the page. */
const COUNTS_EVERY = 5;

function href(status: string | null, cursor: string | null, agent: string | null): string {
  const q = new URLSearchParams();
  if (status) q.set('status', status);
  if (agent) q.set('agent', agent);
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `/?${s}` : '/';
}

function row(r: RunListItem, now: number, fresh: boolean): HTMLTableRowElement {
  const created = Date.parse(r.createdAt);
  const duration = r.durationMs ?? (isActive(r.status) ? now - created : null);
  const used = h('span', { class: 'budget-fill' });
  css(used, { width: `${Math.min(100, (100 * r.tokensUsed) / r.tokenBudget)}%` });
  const link = h('a', { href: `/runs/${r.id}`, class: 'run-link mono' }, shortId(r.id));
  const tr = h(
    'tr',
    { class: fresh ? 'fresh' : null, 'data-run-id': r.id, 'data-status': r.status },
    h('td', { class: 'c-status' }, statusPill(r.status)),
    h('td', { class: 'c-run' }, link, h('span', { class: 'input-preview', title: r.input.slice(0, 500) }, r.input)),
    h('td', { class: 'c-agent' }, h('span', { title: r.model }, r.agent)),
    h('td', { class: 'c-age', title: new Date(created).toLocaleString() }, formatAge(now - created)),
    h(
      'td',
      { class: 'c-num c-duration' },
      duration === null ? '–' : isActive(r.status) ? h('span', { class: 'live-num' }, formatDuration(duration)) : formatDuration(duration),
    ),
    h('td', { class: 'c-num c-steps' }, String(r.stepCount)),
    h(
      'td',
      { class: 'c-num c-tokens' },
      h('span', { title: `${formatCount(r.tokensUsed)} of ${formatCount(r.tokenBudget)}` }, formatTokens(r.tokensUsed)),
      h('span', { class: 'budget' }, used),
    ),
    h('td', { class: 'c-num c-cost' }, formatCost(r.costUsd)),
  );
  // The whole row opens the run; the id stays a real link (middle-click, copy link).
  tr.addEventListener('click', (e) => {
    if ((e.target as Element).closest('a') || getSelection()?.toString()) return;
    navigate(`/runs/${r.id}`);
  });
  return tr;
}

function emptyState(status: string | null, agent: string | null): HTMLElement {
  if (status || agent) {
    const what = `${status ? `${statusLabel(status).toLowerCase()} ` : ''}runs${agent ? ` of agent ${agent}` : ''}`;
    return h('div', { class: 'empty' }, h('p', null, `No ${what}.`), h('a', { href: '/' }, 'Show all runs'));
  }
  return h(
    'div',
    { class: 'empty' },
    h('h2', null, 'No runs yet'),
    h('p', { class: 'muted' }, 'Start one, and it shows here within seconds:'),
    h(
      'pre',
      { class: 'code' },
      `curl -s -X POST ${location.origin}/api/runs -H 'Content-Type: application/json' \\\n  -d '{"input":"Which acme tickets are overdue?"}'`,
    ),
  );
}

export const runsView: View = (main, route) => {
  const status = route.query.get('status');
  const cursor = route.query.get('cursor');
  const agent = route.query.get('agent');
  const seen = new Set<string>();
  const agentsSeen = new Set<string>(agent ? [agent] : []);
  let firstLoad = true;
  let ticks = 0;
  let counts: Record<string, number> | null = null;

  const filters = h('nav', { class: 'filters', 'aria-label': 'Filter by status' });
  const agentSelect = h('select', { class: 'agent-filter', 'data-filter': 'agent', 'aria-label': 'Filter by agent' });
  agentSelect.addEventListener('change', () => navigate(href(status, null, agentSelect.value || null)));
  let drawnAgents = '';
  const drawAgents = () => {
    const names = [...agentsSeen].sort();
    if (names.join('\n') === drawnAgents) return;
    drawnAgents = names.join('\n');
    fill(
      agentSelect,
      h('option', { value: '' }, 'All agents'),
      names.map((n) => h('option', { value: n, selected: n === agent ? true : null }, n)),
    );
    agentSelect.value = agent ?? '';
  };
  const tableSlot = h('div', { class: 'card table-card' });
  const pager = h('footer', { class: 'pager' });
  const updated = h('span', { class: 'muted small' });

  fill(
    main,
    h(
      'section',
      { class: 'page runs-page' },
      h('header', { class: 'page-head' }, h('h1', null, 'Runs'), updated),
      filters,
      tableSlot,
      pager,
    ),
  );

  const drawFilters = () => {
    const total = counts ? Object.values(counts).reduce((a, b) => a + b, 0) : null;
    const chip = (value: string | null, label: string, n: number | null | undefined) =>
      h(
        'a',
        {
          href: href(value, null, agent),
          class: `chip${value === status ? ' on' : ''}`,
          'data-filter': value ?? 'ALL',
          'aria-current': value === status ? 'page' : null,
        },
        value ? h('span', { class: `dot st-${value.toLowerCase().replace(/_/g, '-')}` }) : null,
        label,
        n === null || n === undefined ? null : h('span', { class: 'chip-count' }, formatCount(n)),
      );
    const shown = RUN_STATUS_ORDER.filter((s) => s !== 'WAITING' || (counts?.WAITING ?? 0) > 0 || status === 'WAITING');
    fill(
      filters,
      chip(null, 'All', total),
      shown.map((s) => chip(s, statusLabel(s), counts ? (counts[s] ?? 0) : null)),
      h('label', { class: 'agent-filter-box' }, agentSelect),
    );
  };

  const drawPage = (page: RunPage) => {
    const now = Date.now();
    // Someone selecting text in the table (an id, an input) keeps it until they are done.
    const selection = getSelection();
    if (selection && !selection.isCollapsed && tableSlot.contains(selection.anchorNode)) return;
    if (!page.runs.length) {
      fill(tableSlot, emptyState(status, agent));
    } else {
      const rows = page.runs.map((r) => row(r, now, !firstLoad && !seen.has(r.id)));
      for (const r of page.runs) {
        seen.add(r.id);
        agentsSeen.add(r.agent);
      }
      drawAgents();
      fill(
        tableSlot,
        h(
          'table',
          { class: 'runs' },
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              COLUMNS.map(([label, cls]) => h('th', { class: cls, scope: 'col' }, label)),
            ),
          ),
          h('tbody', null, rows),
        ),
      );
    }
    firstLoad = false;
    fill(
      pager,
      cursor ? h('a', { href: href(status, null, agent), class: 'btn ghost' }, '← Newest') : h('span'),
      page.nextCursor
        ? h('a', { href: href(status, page.nextCursor, agent), class: 'btn ghost', rel: 'next' }, 'Older →')
        : h('span', { class: 'muted small' }, page.runs.length ? 'End of the list' : ''),
    );
    updated.textContent = `updated ${formatClock(new Date(now), new Date(now))}`;
  };

  drawAgents();
  drawFilters();
  const poller = poll(async () => {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (status) q.set('status', status);
    if (cursor) q.set('cursor', cursor);
    if (agent) q.set('agent', agent);
    try {
      const wantCounts = ticks++ % COUNTS_EVERY === 0;
      const [page, overview] = await Promise.all([
        api<RunPage>(`/api/runs?${q}`),
        wantCounts ? api<Overview>('/api/overview').catch(() => null) : Promise.resolve(null),
      ]);
      reportConnection(true);
      if (overview) {
        counts = overview.runsByStatus;
        drawFilters();
      }
      drawPage(page);
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) {
        poller.stop();
        fill(tableSlot, h('div', { class: 'empty' }, h('p', { class: 'error-text' }, e.message), h('a', { href: '/' }, 'Show all runs')));
        return;
      }
      reportConnection(false, (e as Error).message);
    }
  }, REFRESH_MS);
  return () => poller.stop();
};
