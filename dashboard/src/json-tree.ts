/**
 * JSON as a folding tree: objects and arrays are <details> (open near the top, folded deeper down or
 * when large), strings keep their line breaks, long strings fold behind "show all".
 */
import { h } from './dom.ts';

const LONG_STRING = 600;

function size(value: object): number {
  return Array.isArray(value) ? value.length : Object.keys(value).length;
}

function primitive(value: unknown): HTMLElement {
  if (value === null) return h('span', { class: 'j-null' }, 'null');
  switch (typeof value) {
    case 'string':
      return longText(value, 'j-str');
    case 'number':
      return h('span', { class: 'j-num' }, String(value));
    case 'boolean':
      return h('span', { class: 'j-bool' }, String(value));
    default:
      return h('span', { class: 'j-null' }, String(value));
  }
}

/** Text that shows its first part and the rest on request. */
export function longText(text: string, cls = 'text', limit = LONG_STRING): HTMLElement {
  if (text.length <= limit) return h('span', { class: cls }, text);
  const span = h('span', { class: cls }, text.slice(0, limit));
  const more = h(
    'button',
    {
      type: 'button',
      class: 'link-btn',
      onClick: () => {
        span.textContent = text;
        more.remove();
      },
    },
    `… show all ${text.length.toLocaleString('en-US')} characters`,
  );
  return h('span', null, span, ' ', more);
}

export function jsonTree(value: unknown, depth = 0, label?: string): HTMLElement {
  const key = label === undefined ? null : h('span', { class: 'j-key' }, label, ': ');
  if (value === null || typeof value !== 'object') return h('div', { class: 'j-row' }, key, primitive(value));
  const n = size(value);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  if (n === 0) return h('div', { class: 'j-row' }, key, h('span', { class: 'j-punct' }, `${open}${close}`));
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  const details = h(
    'details',
    { class: 'j-node' },
    h(
      'summary',
      null,
      key,
      h('span', { class: 'j-punct' }, open),
      h('span', { class: 'j-count' }, ` ${n} ${Array.isArray(value) ? (n === 1 ? 'item' : 'items') : n === 1 ? 'key' : 'keys'} `),
      h('span', { class: 'j-punct' }, close),
    ),
    h(
      'div',
      { class: 'j-children' },
      entries.map(([k, v]) => jsonTree(v, depth + 1, k)),
    ),
  );
  details.open = depth < 2 && n <= 20;
  return details;
}

/** A string that may hold JSON (a tool's result): a tree when it parses to an object, the text otherwise. */
export function textOrJson(text: string): HTMLElement {
  const t = text.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      return h('div', { class: 'json' }, jsonTree(JSON.parse(t)));
    } catch {
      // Not JSON after all: shown as the text it is.
    }
  }
  return h('div', { class: 'prose' }, longText(text));
}
