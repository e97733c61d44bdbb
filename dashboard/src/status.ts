/** Run and step statuses: their words and their colours (the colours themselves live in app.css). */
import { h } from './dom.ts';

/** The order the page lists statuses in: what needs attention first. */
export const RUN_STATUS_ORDER = ['RUNNING', 'WAITING', 'QUEUED', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;

const ACTIVE = new Set(['QUEUED', 'RUNNING', 'WAITING']);

export const isActive = (status: string) => ACTIVE.has(status);

const LABELS: Record<string, string> = {
  QUEUED: 'Queued',
  RUNNING: 'Running',
  WAITING: 'Waiting',
  SUCCEEDED: 'Succeeded',
  FAILED: 'Failed',
  CANCELLED: 'Cancelled',
  TIMED_OUT: 'Timed out',
};

export function statusLabel(status: string): string {
  return LABELS[status] ?? status.charAt(0) + status.slice(1).toLowerCase().replace(/_/g, ' ');
}

/** The CSS class of a status; an unknown one gets the neutral colour. */
export function statusClass(status: string): string {
  return LABELS[status] ? `st-${status.toLowerCase().replace(/_/g, '-')}` : 'st-unknown';
}

export function statusPill(status: string, size: 'sm' | 'lg' = 'sm'): HTMLElement {
  return h(
    'span',
    { class: `pill ${size} ${statusClass(status)}`, 'data-status': status },
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    statusLabel(status),
  );
}
