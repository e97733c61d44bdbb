/**
 * The schedules: each with its expression and time zone, its next slot, its last runs and their
 * statuses, what it skipped; Pause / Resume and Trigger act on it (PATCH, POST …/trigger). Read again
 * every few seconds while the tab is visible.
 */
import { api } from '../api.ts';
import { fill, h } from '../dom.ts';
import { formatAge, formatClock, shortId } from '../format.ts';
import { poll, reportConnection } from '../live.ts';
import type { View } from '../router.ts';
import { statusPill } from '../status.ts';
import type { RunPage, Schedule, SchedulePage } from '../types.ts';

const REFRESH_MS = 5_000;
/** The last runs shown per schedule. */
const LAST_RUNS = 5;

/** "in 4m" / "3m ago", with the clock time as its title. */
function when(iso: string | null, now: number): HTMLElement | string {
  if (iso === null) return '—';
  const t = Date.parse(iso);
  const text = t >= now ? `in ${formatAge(t - now)}` : `${formatAge(now - t)} ago`;
  return h('time', { datetime: iso, title: formatClock(new Date(t), new Date(now)) }, text);
}

export const schedulesView: View = (main) => {
  const notice = h('div', { class: 'notice', role: 'status', hidden: true });
  const body = h('div');
  fill(
    main,
    h(
      'section',
      { class: 'page' },
      h('div', { class: 'page-head' }, h('h1', null, 'Schedules')),
      notice,
      h('section', { class: 'card' }, body),
    ),
  );
  const show = (text: string, kind: 'ok' | 'error') => {
    notice.className = `notice ${kind}`;
    notice.textContent = text;
    notice.hidden = false;
  };
  const act = async (button: HTMLButtonElement, what: () => Promise<string>) => {
    button.disabled = true;
    try {
      show(await what(), 'ok');
    } catch (e) {
      show((e as Error).message, 'error');
    }
    poller.refresh();
  };

  const row = (s: Schedule, runs: RunPage['runs'], now: number) => {
    const pause = h(
      'button',
      { type: 'button', class: 'btn ghost small', 'data-action': s.paused ? 'resume' : 'pause' },
      s.paused ? 'Resume' : 'Pause',
    );
    pause.addEventListener(
      'click',
      () =>
        void act(pause, async () => {
          await api(`/api/schedules/${encodeURIComponent(s.id)}`, { method: 'PATCH', body: { paused: !s.paused } });
          return s.paused ? `${s.name} resumed` : `${s.name} paused`;
        }),
    );
    const trigger = h('button', { type: 'button', class: 'btn ghost small', 'data-action': 'trigger' }, 'Run now');
    trigger.addEventListener(
      'click',
      () =>
        void act(trigger, async () => {
          const r = await api<{ id: string }>(`/api/schedules/${encodeURIComponent(s.id)}/trigger`, { method: 'POST' });
          return `${s.name}: run ${shortId(r.id)} queued`;
        }),
    );
    const skipped = s.skipped.missed + s.skipped.overlap;
    return h(
      'tr',
      { 'data-schedule': s.name },
      h('td', { class: 'c-name' }, h('strong', null, s.name), h('div', { class: 'muted small' }, s.agent)),
      h('td', { class: 'c-cron mono' }, s.cron, h('div', { class: 'muted small' }, s.timezone)),
      h('td', { class: 'c-next' }, s.paused ? h('span', { class: 'tag warn' }, 'paused') : when(s.nextRunAt, now)),
      h(
        'td',
        { class: 'c-last' },
        runs.length
          ? runs.map((r) =>
              h('a', { href: `/runs/${r.id}`, class: 'last-run', title: r.scheduledFor ?? 'triggered' }, statusPill(r.status)),
            )
          : h('span', { class: 'muted' }, 'none yet'),
      ),
      h(
        'td',
        { class: 'c-skipped' },
        skipped ? `${skipped}` : '0',
        skipped && s.skipped.lastReason ? h('div', { class: 'muted small' }, `last: ${s.skipped.lastReason}`) : null,
      ),
      h('td', { class: 'c-actions' }, pause, ' ', trigger),
    );
  };

  const poller = poll(async () => {
    try {
      const page = await api<SchedulePage>('/api/schedules?limit=200');
      const last = await Promise.all(
        page.schedules.map((s) => api<RunPage>(`/api/runs?scheduleId=${encodeURIComponent(s.id)}&limit=${LAST_RUNS}`)),
      );
      reportConnection(true);
      const now = Date.now();
      if (!page.schedules.length) {
        fill(
          body,
          h(
            'div',
            { class: 'empty' },
            h('h2', null, 'No schedules yet'),
            h(
              'pre',
              { class: 'code' },
              `curl -X POST ${location.origin}/api/schedules -H 'Content-Type: application/json' \\\n  -d '{"name":"nightly","cron":"0 3 * * *","timezone":"Europe/Berlin","input":"…"}'`,
            ),
          ),
        );
        return;
      }
      fill(
        body,
        h(
          'table',
          { class: 'runs schedules' },
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              ['Schedule', 'Cron', 'Next run', `Last runs (newest first)`, 'Skipped', ''].map((label) => h('th', { scope: 'col' }, label)),
            ),
          ),
          h(
            'tbody',
            null,
            page.schedules.map((s, i) => row(s, last[i]!.runs, now)),
          ),
        ),
      );
    } catch (e) {
      reportConnection(false, (e as Error).message);
    }
  }, REFRESH_MS);
  return () => poller.stop();
};
