/**
 * Pending tool calls of a WAITING run, each with Approve and Deny (with a reason). The run JSON lists
 * them in `waiting.toolCalls`; a decision is POST /api/runs/{id}/tool-calls/{toolUseId}/decision with
 * {"decision":"approve"} or {"decision":"deny","reason":…}. A run waits for a decision when a tool that
 * needs approval is called, or when a call that is not idempotent was cut short by a crash.
 */
import { api, ApiError } from '../api.ts';
import { h } from '../dom.ts';
import { jsonTree } from '../json-tree.ts';
import type { PendingToolCall, Run } from '../types.ts';

function call(runId: string, c: PendingToolCall, onDecided: () => void): HTMLElement {
  const reason = h('input', {
    type: 'text',
    class: 'reason',
    placeholder: 'Reason (sent to the model when denying)',
    maxlength: 2000,
    'aria-label': `Reason for ${c.toolName}`,
  });
  const result = h('p', { class: 'decision-result', role: 'status' });
  const decide = async (decision: 'approve' | 'deny') => {
    const body = decision === 'deny' ? { decision, reason: reason.value.trim() || 'denied from the dashboard' } : { decision };
    buttons.forEach((b) => (b.disabled = true));
    try {
      await api(`/api/runs/${encodeURIComponent(runId)}/tool-calls/${encodeURIComponent(c.toolUseId)}/decision`, { method: 'POST', body });
      result.textContent = decision === 'approve' ? 'Approved.' : 'Denied.';
      onDecided();
    } catch (e) {
      result.textContent = `Not recorded: ${e instanceof ApiError ? e.message : String(e)}`;
      buttons.forEach((b) => (b.disabled = false));
    }
  };
  const buttons = [
    h('button', { type: 'button', class: 'btn primary', onClick: () => void decide('approve') }, 'Approve'),
    h('button', { type: 'button', class: 'btn danger', onClick: () => void decide('deny') }, 'Deny'),
  ];
  return h(
    'div',
    { class: 'approval', 'data-tool-use-id': c.toolUseId },
    h(
      'div',
      { class: 'blk-head' },
      h('span', { class: 'blk-tag' }, 'needs approval'),
      h('span', { class: 'mono' }, c.toolName),
      h('span', { class: 'muted mono small' }, c.toolUseId),
    ),
    h('div', { class: 'json boxed' }, jsonTree(c.input)),
    h('div', { class: 'approval-actions' }, reason, ...buttons),
    result,
  );
}

/** The approvals section of a run, or null when it is not waiting for decisions. */
export function renderApprovals(run: Run, onDecided: () => void): HTMLElement | null {
  const calls = run.status === 'WAITING' ? (run.waiting?.toolCalls ?? []) : [];
  if (!calls.length) return null;
  return h(
    'section',
    { class: 'card approvals' },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, 'Waiting for a decision'),
      h('span', { class: 'muted' }, `${calls.length} tool call${calls.length === 1 ? '' : 's'}`),
    ),
    calls.map((c) => call(run.id, c, onDecided)),
  );
}
