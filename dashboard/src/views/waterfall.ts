/**
 * The steps of a run as a waterfall: one row per step, its bar on a time axis shared by all rows,
 * coloured by kind (model, tool) and outcome (error, still running), with latency, tokens, cost and
 * worker. Hovering a row shows its figures; clicking it (or Enter) opens the step.
 */
import { css, fill, h } from '../dom.ts';
import { formatClock, formatCost, formatDuration, formatTick, formatTokens } from '../format.ts';
import type { TimelineStep } from '../types.ts';
import { layoutWaterfall, type WaterfallBar } from '../waterfall-layout.ts';

export interface WaterfallInput {
  steps: readonly TimelineStep[];
  originMs: number;
  endMs: number;
  inFlight: boolean;
  selected: number | null;
  onSelect: (seq: number) => void;
}

function name(step: TimelineStep | undefined, bar: WaterfallBar): HTMLElement {
  if (bar.status === 'IN_FLIGHT') return h('span', { class: 'wf-name' }, 'model call', h('span', { class: 'wf-sub' }, 'in flight'));
  if (bar.kind === 'TOOL') return h('span', { class: 'wf-name mono' }, step?.toolName ?? 'tool');
  return h('span', { class: 'wf-name' }, 'model', step?.stopReason ? h('span', { class: 'wf-sub' }, step.stopReason) : null);
}

function barClass(bar: WaterfallBar): string {
  const outcome = bar.status === 'ERROR' ? 'error' : bar.ongoing ? 'ongoing' : 'done';
  return `wf-bar ${bar.kind === 'MODEL' ? 'model' : 'tool'} ${outcome}${bar.status === 'IN_FLIGHT' ? ' in-flight' : ''}`;
}

const promptTokens = (s: TimelineStep) => s.inputTokens + s.cacheCreationInputTokens + s.cacheReadInputTokens;

function tipRows(step: TimelineStep | undefined, bar: WaterfallBar): [string, string][] {
  if (!step)
    return [
      ['Started', `+${formatDuration(bar.startMs)}`],
      ['Running for', formatDuration(bar.durationMs)],
    ];
  const rows: [string, string][] = [
    ['Status', step.status],
    ['Latency', step.latencyMs === null ? `running ${formatDuration(bar.durationMs)}` : formatDuration(step.latencyMs)],
    ['Started', `+${formatDuration(bar.startMs)} (${formatClock(new Date(step.startedAt), new Date())})`],
  ];
  if (step.kind === 'MODEL') {
    rows.push(['Input', formatTokens(step.inputTokens)], ['Output', formatTokens(step.outputTokens)]);
    if (step.cacheCreationInputTokens) rows.push(['Cache write', formatTokens(step.cacheCreationInputTokens)]);
    if (step.cacheReadInputTokens) rows.push(['Cache read', formatTokens(step.cacheReadInputTokens)]);
    rows.push(['Cost', formatCost(step.costUsd)]);
    if (step.attempts > 1) rows.push(['Attempts', String(step.attempts)]);
  } else if (step.toolUseId) {
    rows.push(['Tool call', step.toolUseId]);
  }
  rows.push(['Worker', step.worker ?? '–']);
  return rows;
}

export function renderWaterfall(container: HTMLElement, input: WaterfallInput): void {
  const layout = layoutWaterfall(input);
  const bySeq = new Map(input.steps.map((s) => [s.seq, s]));
  const workers = new Set(input.steps.map((s) => s.worker).filter((w): w is string => w !== null));
  const tip = h('div', { class: 'wf-tip', role: 'tooltip', hidden: true });

  const gridlines = () =>
    layout.ticks.map((t) => {
      const line = h('span', { class: 'wf-gridline', 'aria-hidden': 'true' });
      css(line, { left: `${t.pct}%` });
      return line;
    });

  const axis = h(
    'div',
    { class: 'wf-row wf-axis', 'aria-hidden': 'true' },
    h('span', { class: 'wf-label' }, 'Step'),
    h(
      'span',
      { class: 'wf-track' },
      layout.ticks.map((t) => {
        const label = h('span', { class: 'wf-tick' }, formatTick(t.ms));
        css(label, { left: `${t.pct}%` });
        if (t.pct > 92) label.classList.add('end');
        return label;
      }),
    ),
    h('span', { class: 'wf-num' }, 'Tokens'),
    h('span', { class: 'wf-num' }, 'Cost'),
  );

  const rows = layout.bars.map((bar) => {
    const step = bySeq.get(bar.seq);
    const barEl = h('span', { class: barClass(bar) });
    css(barEl, { left: `${bar.leftPct}%`, width: `${bar.widthPct}%` });
    const note = [bar.ongoing ? `${formatDuration(bar.durationMs)}…` : formatDuration(bar.durationMs)];
    if (workers.size > 1 && step?.worker) note.push(step.worker);
    const noteEl = h('span', { class: 'wf-note' }, note.join(' · '));
    // The note sits after the bar, or before it when the bar reaches the right edge.
    if (bar.leftPct + bar.widthPct > 75) {
      noteEl.classList.add('before');
      css(noteEl, { right: `${100 - bar.leftPct}%` });
    } else {
      css(noteEl, { left: `${bar.leftPct + bar.widthPct}%` });
    }
    const selectable = step !== undefined;
    const row = h(
      'div',
      {
        class: `wf-row${input.selected === bar.seq ? ' selected' : ''}${selectable ? '' : ' ghost'}${step?.inherited ? ' inherited' : ''}`,
        'data-seq': bar.seq,
        'data-kind': bar.kind,
        'data-status': bar.status,
        ...(selectable ? { role: 'button', tabindex: 0, 'aria-label': `Step ${bar.seq}: open` } : {}),
      },
      h(
        'span',
        { class: 'wf-label' },
        h('span', { class: 'wf-seq' }, String(bar.seq)),
        h('span', { class: `wf-kind ${bar.kind === 'MODEL' ? 'model' : 'tool'}`, 'aria-hidden': 'true' }),
        name(step, bar),
      ),
      h('span', { class: 'wf-track' }, gridlines(), barEl, noteEl),
      h(
        'span',
        { class: 'wf-num' },
        step && step.kind === 'MODEL' ? `${formatTokens(promptTokens(step))} → ${formatTokens(step.outputTokens)}` : '–',
      ),
      h('span', { class: 'wf-num' }, step && step.kind === 'MODEL' ? formatCost(step.costUsd) : '–'),
    );
    if (selectable) {
      row.addEventListener('click', () => input.onSelect(bar.seq));
      row.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          input.onSelect(bar.seq);
        }
      });
    }
    row.addEventListener('mouseenter', () => {
      fill(
        tip,
        h(
          'div',
          { class: 'wf-tip-title' },
          bar.status === 'IN_FLIGHT'
            ? `Step ${bar.seq} · model call in flight`
            : `Step ${bar.seq} · ${bar.kind === 'MODEL' ? 'model call' : (step?.toolName ?? 'tool')}`,
        ),
        h(
          'dl',
          null,
          tipRows(step, bar).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
        ),
      );
      tip.hidden = false;
    });
    row.addEventListener('mousemove', (e) => {
      const box = container.getBoundingClientRect();
      const x = Math.min(e.clientX - box.left + 14, box.width - tip.offsetWidth - 4);
      css(tip, { left: `${Math.max(0, x)}px`, top: `${e.clientY - box.top + 16}px` });
    });
    row.addEventListener('mouseleave', () => (tip.hidden = true));
    return row;
  });

  const body = rows.length ? rows : h('div', { class: 'wf-empty' }, 'No steps yet. The first appears when the first model call returns.');
  fill(container, h('div', { class: 'waterfall' }, axis, body), tip);
}
