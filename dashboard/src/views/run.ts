/**
 * One run: its status and budgets, input and output, the steps as a waterfall, and the step opened
 * from it. While the run is active the page follows its events: the live text of the model call in
 * flight, and the run and timeline read again when a step starts or finishes (polled instead while the
 * stream is down, and now and then as a safety net); all of it stops once the run has finished. Cancel sends POST /api/runs/{id}/cancel and says what the server answered.
 */
import { api, ApiError } from '../api.ts';
import type { RunFold } from '../events/fold.ts';
import { followRunEvents } from '../live-text.ts';
import { css, fill, h } from '../dom.ts';
import { formatAge, formatClock, formatCost, formatCount, formatDuration, formatPercent, formatTokens, shortId } from '../format.ts';
import { poll, reportConnection } from '../live.ts';
import type { Route, View } from '../router.ts';
import { lastAttemptNote, runStatePhrase } from '../run-state.ts';
import { isActive, statusPill } from '../status.ts';
import type { Run, TimelineStep } from '../types.ts';
import { renderApprovals } from './approvals.ts';
import { filesCard } from './files.ts';
import { loadStep } from './step.ts';
import { renderWaterfall } from './waterfall.ts';

/** How often an active run is read again. */
const REFRESH_MS = 1500;
/** @unit milliseconds — while the events stream is connected, the run is still read this often. */
const STREAMING_REFRESH_MS = 15_000;

function meter(label: string, value: string, of: string | null, fraction: number | null, note?: string): HTMLElement {
  const bar = h('span', { class: 'meter-fill' });
  if (fraction !== null) css(bar, { width: `${Math.min(100, Math.max(0, fraction * 100))}%` });
  const level = fraction === null ? '' : fraction >= 1 ? ' full' : fraction >= 0.8 ? ' high' : '';
  return h(
    'div',
    { class: `meter${level}`, 'data-meter': label.toLowerCase() },
    h('div', { class: 'meter-label' }, label),
    h('div', { class: 'meter-value' }, value, of ? h('span', { class: 'meter-of' }, ` / ${of}`) : null),
    fraction !== null ? h('div', { class: 'meter-track' }, bar) : null,
    note ? h('div', { class: 'meter-note' }, note) : null,
  );
}

function meters(run: Run, steps: readonly TimelineStep[], nowMs: number): HTMLElement[] {
  const created = Date.parse(run.createdAt);
  const end = run.finishedAt ? Date.parse(run.finishedAt) : nowMs;
  const allowed = Date.parse(run.deadlineAt) - created;
  const modelSteps = steps.filter((s) => s.kind === 'MODEL').length;
  const cacheRead = steps.reduce((a, s) => a + s.cacheReadInputTokens, 0);
  return [
    meter(
      'Tokens',
      formatCount(run.tokensUsed),
      formatCount(run.tokenBudget),
      run.tokensUsed / run.tokenBudget,
      `${formatPercent(run.tokensUsed, run.tokenBudget)} of the budget${cacheRead ? ` · ${formatTokens(cacheRead)} cache reads not counted` : ''}`,
    ),
    meter(
      'Steps',
      String(steps.length),
      String(run.maxSteps),
      steps.length / run.maxSteps,
      `${modelSteps} model · ${steps.length - modelSteps} tool`,
    ),
    meter(
      'Time',
      formatDuration(end - created),
      formatDuration(allowed),
      (end - created) / allowed,
      run.finishedAt
        ? `ended ${formatClock(new Date(run.finishedAt), new Date(nowMs))}`
        : `deadline ${formatClock(new Date(run.deadlineAt), new Date(nowMs))}`,
    ),
    meter(
      'Cost',
      formatCost(run.costUsd),
      null,
      null,
      `${modelSteps} model call${modelSteps === 1 ? '' : 's'}${run.attempts > 1 ? ` · ${run.attempts} claims` : ''}`,
    ),
  ];
}

function outcome(run: Run): HTMLElement {
  if (run.error) {
    return h(
      'section',
      { class: 'card io error-card' },
      h('h2', null, run.status === 'CANCELLED' ? 'Why it stopped' : 'Error'),
      h('div', { class: 'prose' }, run.error),
      run.output ? h('div', { class: 'prose muted' }, run.output) : null,
    );
  }
  if (run.output !== null) {
    return h(
      'section',
      { class: 'card io output' },
      h('h2', null, 'Output', run.stopReason === 'max_tokens' ? h('span', { class: 'tag warn' }, 'cut short: max_tokens') : null),
      h('div', { class: 'prose' }, run.output),
    );
  }
  const note = lastAttemptNote(run, new Date());
  return h(
    'section',
    { class: 'card io output pending' },
    h('h2', null, 'Output'),
    h('p', { class: 'muted' }, isActive(run.status) ? 'Not finished yet.' : 'No output.'),
    note ? h('p', { class: 'muted small last-error' }, note) : null,
  );
}

function notFound(main: HTMLElement, id: string, message: string): void {
  fill(
    main,
    h(
      'section',
      { class: 'page' },
      h('nav', { class: 'crumbs' }, h('a', { href: '/' }, 'Runs'), ' / ', h('span', { class: 'mono' }, shortId(id))),
      h('div', { class: 'card empty' }, h('h2', null, 'No such run'), h('p', { class: 'muted' }, message)),
    ),
  );
}

export const runView: View = (main, route: Route) => {
  const id = route.params.id!;
  let run: Run | null = null;
  let steps: TimelineStep[] = [];
  let selected: number | null = Number(route.query.get('step')) || null;
  let drawnSteps = '';
  let drawnApprovals = '';

  const head = h('div', { class: 'run-head' });
  const notice = h('div', { class: 'notice', role: 'status', hidden: true });
  const meterRow = h('section', { class: 'meters' });
  const outcomeSlot = h('div');
  const approvalsSlot = h('div');
  // The text of the model call in flight, as it streams (kept once the run ends: it is what was watched).
  // Shown only once there is text: a step that only called tools, or a run waiting on one, has none.
  const liveTitle = h('h2');
  const liveBody = h('div', { class: 'prose live-body' });
  const liveText = h('section', { class: 'card live-text', hidden: true, 'aria-live': 'polite' }, liveTitle, liveBody);
  let fold: RunFold | null = null;
  const drawLive = () => {
    const step = fold?.steps.at(-1);
    if (!fold || !step) return;
    liveText.dataset.seq = String(step.seq);
    liveText.hidden = fold.text === '';
    const live = !fold.finished && run?.status !== 'WAITING';
    fill(
      liveTitle,
      live ? 'Live text' : 'Streamed text',
      h('span', { class: 'muted small' }, ` · step ${step.seq}${step.attempt > 1 ? ` · attempt ${step.attempt}` : ''}`),
    );
    liveBody.textContent = fold.text;
  };
  let streaming = false;
  let stale = true;
  let readAt = 0;
  let unfollow: (() => void) | null = null;
  const waterfall = h('div', { class: 'waterfall-box' });
  const stepSlot = h('div', { class: 'step-slot' });
  const files = filesCard(id);
  // The workspace as of the step selected; read again when a step finishes.
  const drawFiles = () => files.show(selected, steps.map((s) => `${s.seq}:${s.status}`).join(','));
  const inputCard = h('section', { class: 'card io input' }, h('h2', null, 'Input'));
  const legend = h(
    'div',
    { class: 'legend', 'aria-hidden': 'true' },
    ...[
      ['model', 'Model call'],
      ['tool', 'Tool call'],
      ['error', 'Error'],
      ['ongoing', 'Running'],
    ].map(([k, label]) => h('span', { class: `legend-item ${k}` }, h('span', { class: 'swatch' }), label)),
  );

  fill(
    main,
    h(
      'section',
      { class: 'page run-page' },
      h('nav', { class: 'crumbs' }, h('a', { href: '/' }, 'Runs'), ' / ', h('span', { class: 'mono' }, shortId(id))),
      head,
      notice,
      meterRow,
      h('div', { class: 'io-grid' }, inputCard, outcomeSlot),
      approvalsSlot,
      liveText,
      h('section', { class: 'card steps' }, h('header', { class: 'card-head' }, h('h2', null, 'Steps'), legend), waterfall),
      stepSlot,
      files.el,
    ),
  );

  const select = (seq: number | null) => {
    selected = seq;
    const url = new URL(location.href);
    if (seq === null) url.searchParams.delete('step');
    else url.searchParams.set('step', String(seq));
    history.replaceState(null, '', url.pathname + url.search);
    drawWaterfall(true);
    drawFiles();
    if (seq === null) {
      fill(stepSlot);
      return;
    }
    void loadStep(stepSlot, id, seq, () => select(null)).then(() => stepSlot.scrollIntoView({ block: 'nearest', behavior: 'smooth' }));
  };

  const drawWaterfall = (force = false) => {
    if (!run) return;
    const active = isActive(run.status);
    const signature = JSON.stringify([steps, run.status, selected]);
    // An active run's bars grow with the clock; a finished run's only change when its steps do.
    if (!force && !active && signature === drawnSteps) return;
    drawnSteps = signature;
    renderWaterfall(waterfall, {
      steps,
      originMs: Date.parse(run.createdAt),
      endMs: run.finishedAt ? Date.parse(run.finishedAt) : Date.now(),
      inFlight: run.status === 'RUNNING' && steps.length > 0 && !steps.some((s) => s.status === 'STARTED'),
      selected,
      onSelect: (seq) => select(seq === selected ? null : seq),
    });
  };

  const cancel = async (button: HTMLButtonElement) => {
    button.disabled = true;
    try {
      const r = await api<{ status: string }>(`/api/runs/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
      show(r.status === 'CANCELLED' ? 'Cancelled before it started.' : 'Cancel requested: the run stops before its next step.', 'ok');
    } catch (e) {
      show(`Not cancelled: ${(e as Error).message}`, 'error');
    }
    poller.refresh();
  };

  const show = (text: string, kind: 'ok' | 'error') => {
    notice.className = `notice ${kind}`;
    notice.textContent = text;
    notice.hidden = false;
  };

  // The header is built once; a refresh rewrites its text, and the Cancel button only when it comes or goes
  // (so it keeps focus and hover between refreshes).
  const title = h('h1');
  const sub = h('p', { class: 'sub' });
  const actions = h('div', { class: 'actions' });
  fill(head, h('div', { class: 'run-title' }, title, sub), actions);
  let drawnTitle = '';
  const drawHead = (r: Run) => {
    const now = Date.now();
    const created = Date.parse(r.createdAt);
    const state = runStatePhrase(r, new Date(now));
    if (drawnTitle !== r.status) {
      drawnTitle = r.status;
      fill(title, statusPill(r.status, 'lg'), h('span', { class: 'mono run-id', title: r.id }, r.id));
    }
    fill(
      sub,
      h('span', { title: `agent (model ${r.model})` }, r.agent),
      ` · created ${formatClock(new Date(created), new Date(now))} (${formatAge(now - created)})`,
      ' · ',
      h('span', { class: 'run-state', 'data-state': state.state }, state.text),
      r.attempts > 1 ? ` · claimed ${r.attempts} times` : '',
      r.cancelRequested && isActive(r.status) ? h('span', { class: 'tag warn' }, 'cancel requested') : null,
    );
    const canCancel = isActive(r.status) && !r.cancelRequested;
    if (canCancel && !actions.firstChild) {
      const button = h('button', { type: 'button', class: 'btn danger', 'data-action': 'cancel' }, 'Cancel run');
      button.addEventListener('click', () => void cancel(button));
      actions.append(button);
    } else if (!canCancel) {
      actions.replaceChildren();
    }
  };

  const draw = () => {
    if (!run) return;
    drawHead(run);
    fill(meterRow, meters(run, steps, Date.now()));
    if (inputCard.childElementCount === 1) inputCard.append(h('div', { class: 'prose' }, run.input));
    fill(outcomeSlot, outcome(run));
    // Redrawn only when the pending calls change, so a reason being typed survives the refresh.
    const pending = run.status === 'WAITING' ? JSON.stringify(run.waiting?.toolCalls?.map((c) => c.toolUseId) ?? []) : '';
    if (pending !== drawnApprovals) {
      drawnApprovals = pending;
      fill(
        approvalsSlot,
        renderApprovals(run, () => poller.refresh()),
      );
    }
    drawLive();
    drawWaterfall();
    drawFiles();
  };

  let first = true;
  const poller = poll(async () => {
    // The events stream says when the run changes; between those the page only redraws (bars grow with the clock).
    if (streaming && !stale && Date.now() - readAt < STREAMING_REFRESH_MS) {
      draw();
      return;
    }
    stale = false;
    readAt = Date.now();
    try {
      const [r, t] = await Promise.all([
        api<Run>(`/api/runs/${encodeURIComponent(id)}`),
        api<TimelineStep[]>(`/api/runs/${encodeURIComponent(id)}/timeline`),
      ]);
      reportConnection(true);
      const reopen = selected !== null && steps.find((s) => s.seq === selected)?.status !== t.find((s) => s.seq === selected)?.status;
      run = r;
      steps = t;
      draw();
      if (first || reopen) {
        first = false;
        if (selected !== null) select(selected);
      }
      // A stream already open ends by itself at run.finished, with the last of the text.
      if (!isActive(r.status)) poller.stop();
      else
        unfollow ??= followRunEvents(id, {
          text: (f) => {
            fold = f;
            drawLive();
          },
          changed: () => {
            stale = true;
            poller.refresh();
          },
          connected: (ok) => (streaming = ok),
        });
    } catch (e) {
      if (e instanceof ApiError && (e.status === 404 || e.status === 400)) {
        stop();
        notFound(main, id, e.message);
        return;
      }
      reportConnection(false, (e as Error).message);
    }
  }, REFRESH_MS);
  const stop = () => {
    poller.stop();
    unfollow?.();
  };

  return stop;
};
