/**
 * One step opened: its figures, and its request and response made readable. A model step's request
 * is the conversation as it was sent (rebuilt by the server from the log): the messages as turns,
 * tool calls and their results as cards, JSON folded; the system prompt and the tool definitions fold
 * away. A tool step shows the call's input and the result.
 */
import { api } from '../api.ts';
import { navigate } from '../router.ts';
import { fill, h } from '../dom.ts';
import { formatClock, formatCost, formatDuration, formatTokens } from '../format.ts';
import { jsonTree, longText, textOrJson } from '../json-tree.ts';
import type { ContentBlock, Message, ModelRequest, StepDetail, ToolRequest } from '../types.ts';

/** Long conversations show their last turns; the earlier ones are one click away. */
const RECENT_MESSAGES = 4;

function block(b: ContentBlock): HTMLElement {
  switch (b.type) {
    case 'text':
      return h('div', { class: 'blk text' }, longText(String(b.text ?? ''), 'prose', 4000));
    case 'tool_use':
      return h(
        'div',
        { class: 'blk tool-use' },
        h(
          'div',
          { class: 'blk-head' },
          h('span', { class: 'blk-tag' }, 'tool call'),
          h('span', { class: 'mono tool-name' }, String(b.name)),
          h('span', { class: 'muted mono small' }, String(b.id)),
        ),
        h('div', { class: 'json' }, jsonTree(b.input)),
      );
    case 'tool_result': {
      const isError = b.is_error === true;
      const content = typeof b.content === 'string' ? textOrJson(b.content) : h('div', { class: 'json' }, jsonTree(b.content));
      return h(
        'div',
        { class: `blk tool-result${isError ? ' error' : ''}` },
        h(
          'div',
          { class: 'blk-head' },
          h('span', { class: 'blk-tag' }, isError ? 'tool error' : 'tool result'),
          h('span', { class: 'muted mono small' }, String(b.tool_use_id)),
        ),
        content,
      );
    }
    default:
      return h(
        'div',
        { class: 'blk other' },
        h('div', { class: 'blk-head' }, h('span', { class: 'blk-tag' }, b.type)),
        h('div', { class: 'json' }, jsonTree(b)),
      );
  }
}

function content(c: string | ContentBlock[]): HTMLElement[] {
  return typeof c === 'string' ? [h('div', { class: 'blk text' }, longText(c, 'prose', 4000))] : c.map(block);
}

function message(m: Message): HTMLElement {
  return h('div', { class: `msg ${m.role}` }, h('div', { class: 'msg-role' }, m.role), h('div', { class: 'msg-body' }, content(m.content)));
}

function messages(list: Message[]): HTMLElement {
  const box = h('div', { class: 'msgs' });
  const earlier = list.slice(0, Math.max(0, list.length - RECENT_MESSAGES));
  const recent = list.slice(earlier.length);
  if (earlier.length) {
    const more = h(
      'button',
      {
        type: 'button',
        class: 'btn ghost small',
        onClick: () => {
          more.replaceWith(...earlier.map(message));
        },
      },
      `Show ${earlier.length} earlier message${earlier.length === 1 ? '' : 's'}`,
    );
    box.append(more);
  }
  box.append(...recent.map(message));
  return box;
}

function fold(title: string, body: HTMLElement, note?: string): HTMLElement {
  return h('details', { class: 'fold' }, h('summary', null, title, note ? h('span', { class: 'muted' }, ` ${note}`) : null), body);
}

function modelRequest(r: ModelRequest): HTMLElement[] {
  return [
    h(
      'div',
      { class: 'kv-line' },
      h('span', { class: 'muted' }, 'model '),
      h('span', { class: 'mono' }, r.model),
      h('span', { class: 'muted' }, '  ·  max_tokens '),
      h('span', { class: 'mono' }, String(r.max_tokens)),
    ),
    r.system
      ? fold(
          'System prompt',
          h('div', { class: 'prose boxed' }, longText(r.system, 'prose', 4000)),
          `${r.system.length.toLocaleString('en-US')} characters`,
        )
      : null,
    r.tools?.length ? fold('Tools', h('div', { class: 'json' }, jsonTree(r.tools)), r.tools.map((t) => t.name).join(', ')) : null,
    h('h4', null, `Messages (${r.messages.length})`),
    messages(r.messages),
  ].filter((x): x is HTMLElement => x !== null);
}

function toolRequest(r: ToolRequest): HTMLElement[] {
  return [
    h(
      'div',
      { class: 'kv-line' },
      h('span', { class: 'muted' }, 'tool '),
      h('span', { class: 'mono' }, r.name),
      h('span', { class: 'muted' }, '  ·  call '),
      h('span', { class: 'mono' }, r.toolUseId),
    ),
    h('h4', null, 'Input'),
    h('div', { class: 'json boxed' }, jsonTree(r.input)),
  ];
}

function response(s: StepDetail): HTMLElement[] {
  if (s.response === null)
    return [h('p', { class: 'muted' }, s.status === 'STARTED' ? 'Still running: no result yet.' : 'No response recorded.')];
  if (typeof s.response === 'string')
    return [s.status === 'ERROR' ? h('div', { class: 'blk tool-result error' }, textOrJson(s.response)) : textOrJson(s.response)];
  return [
    h(
      'div',
      { class: 'msgs' },
      h(
        'div',
        { class: 'msg assistant' },
        h('div', { class: 'msg-role' }, 'assistant'),
        h('div', { class: 'msg-body' }, content(s.response)),
      ),
    ),
  ];
}

function figures(s: StepDetail): [string, string][] {
  const rows: [string, string][] = [
    ['Latency', s.latencyMs === null ? 'running' : formatDuration(s.latencyMs)],
    ['Started', formatClock(new Date(s.startedAt), new Date())],
    ['Worker', s.worker ?? '–'],
  ];
  if (s.kind === 'MODEL') {
    rows.push(
      ['Input', formatTokens(s.inputTokens)],
      ['Output', formatTokens(s.outputTokens)],
      ['Cache write', formatTokens(s.cacheCreationInputTokens)],
      ['Cache read', formatTokens(s.cacheReadInputTokens)],
      ['Cost', formatCost(s.costUsd)],
      ['Attempts', String(s.attempts)],
    );
  }
  return rows;
}

/**
 * "Fork from here": a new run continuing this run's conversation after this step, with the model
 * named (or the same one). The server says when the step does not end a whole turn, and which do.
 */
function forkFromHere(runId: string, s: StepDetail): HTMLElement | null {
  if (s.status === 'STARTED') return null;
  const model = h('input', {
    type: 'text',
    class: 'fork-model mono small',
    placeholder: 'same model',
    'aria-label': 'Model for the fork',
  }) as HTMLInputElement;
  const note = h('span', { class: 'fork-note muted small', role: 'status' });
  const button = h('button', { type: 'button', class: 'btn ghost small', 'data-action': 'fork' }, 'Fork from here') as HTMLButtonElement;
  button.addEventListener('click', () => {
    button.disabled = true;
    const body = { afterSeq: s.seq, ...(model.value.trim() ? { model: model.value.trim() } : {}) };
    api<{ id: string }>(`/api/runs/${encodeURIComponent(runId)}/fork`, { method: 'POST', body })
      .then((fork) => navigate(`/runs/${fork.id}`))
      .catch((e: Error) => {
        note.textContent = `Not forked: ${e.message}`;
        note.className = 'fork-note error-text small';
        button.disabled = false;
      });
  });
  return h('div', { class: 'fork-from-here kv-line' }, button, model, note);
}

export function renderStep(s: StepDetail, onClose: () => void, runId?: string): HTMLElement {
  const title = s.kind === 'MODEL' ? 'Model call' : `Tool call · ${s.toolName ?? ''}`;
  const isModel = s.kind === 'MODEL';
  return h(
    'section',
    { class: 'card step-detail', 'data-seq': s.seq, 'aria-label': `Step ${s.seq}` },
    h(
      'header',
      { class: 'card-head' },
      h('h2', null, h('span', { class: 'muted' }, `Step ${s.seq} · `), title),
      h('span', { class: `step-status ${s.status.toLowerCase()}` }, s.stopReason ?? s.status),
      h('button', { type: 'button', class: 'btn ghost small close', 'aria-label': 'Close step', onClick: onClose }, 'Close'),
    ),
    h(
      'dl',
      { class: 'figures' },
      figures(s).map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))),
    ),
    s.inherited ? h('p', { class: 'muted small' }, 'Inherited: this step belongs to the run this one was forked from.') : null,
    runId ? forkFromHere(runId, s) : null,
    h(
      'div',
      { class: 'step-io' },
      h(
        'div',
        { class: 'step-pane' },
        h('h3', null, 'Request'),
        s.request === null
          ? h('p', { class: 'muted' }, 'Not recorded.')
          : isModel
            ? modelRequest(s.request as ModelRequest)
            : toolRequest(s.request as ToolRequest),
      ),
      h('div', { class: 'step-pane' }, h('h3', null, 'Response'), response(s)),
    ),
    fold('Raw JSON', h('div', { class: 'json boxed' }, jsonTree(s, 1))),
  );
}

/** Loads step `seq` of run `runId` into `slot`. */
export async function loadStep(slot: HTMLElement, runId: string, seq: number, onClose: () => void): Promise<void> {
  fill(slot, h('section', { class: 'card step-detail loading' }, h('p', { class: 'muted' }, `Loading step ${seq}…`)));
  try {
    const s = await api<StepDetail>(`/api/runs/${encodeURIComponent(runId)}/steps/${seq}`);
    fill(slot, renderStep(s, onClose, runId));
  } catch (e) {
    fill(slot, h('section', { class: 'card step-detail' }, h('p', { class: 'error-text' }, `Step ${seq}: ${(e as Error).message}`)));
  }
}
