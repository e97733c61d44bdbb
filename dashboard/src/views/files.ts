/**
 * A run's workspace on its page: the tree as of the step selected in the waterfall (the latest
 * checkpointed one when none is), what that step changed, and one file's content. Shown only for runs
 * that have files. Contents arrive as bytes and are shown as text (never as markup); a binary file says
 * so, with a link to download it.
 */
import { api, apiBytes } from '../api.ts';
import { fill, h } from '../dom.ts';
import { formatCount } from '../format.ts';
import type { FileChange, RunFile, RunFiles } from '../types.ts';

/** @unit bytes — longer contents are shown cut, with a link to the whole file. */
const SHOWN_BYTES = 200_000;

const filesUrl = (runId: string, atSeq: number | null) =>
  `/api/runs/${encodeURIComponent(runId)}/files${atSeq === null ? '' : `?atSeq=${atSeq}`}`;
const fileUrl = (runId: string, path: string, atSeq: number | null) =>
  `/api/runs/${encodeURIComponent(runId)}/files/${path.split('/').map(encodeURIComponent).join('/')}${atSeq === null ? '' : `?atSeq=${atSeq}`}`;

const sizeOf = (f: RunFile) => (f.type === 'dir' ? '' : f.type === 'symlink' ? `→ ${f.target ?? ''}` : `${formatCount(f.size)} B`);

export interface FilesCard {
  el: HTMLElement;
  /** Shows the workspace as of `atSeq` (null: the latest); read again when `changedSteps` differs from the last call's. */
  show(atSeq: number | null, changedSteps: string): void;
}

export function filesCard(runId: string): FilesCard {
  const title = h('h2', null, 'Files');
  const note = h('span', { class: 'muted small' });
  const tree = h('ul', { class: 'file-tree', role: 'tree' });
  const changes = h('div', { class: 'file-changes' });
  const content = h('div', { class: 'file-content' });
  const el = h(
    'section',
    { class: 'card files', hidden: true },
    h('header', { class: 'card-head' }, title, note),
    changes,
    h('div', { class: 'files-grid' }, tree, content),
  );
  let shownAt: number | null | undefined;
  let shownSteps = '';
  let open: string | null = null;
  let seen = false;
  let downloadUrl: string | null = null;

  const openFile = async (f: RunFile, atSeq: number | null) => {
    open = f.path;
    for (const li of tree.querySelectorAll('li')) li.classList.toggle('on', li.dataset.path === f.path);
    if (f.type === 'dir') return fill(content);
    fill(content, h('p', { class: 'muted small' }, 'Loading…'));
    try {
      const { contentType, bytes } = await apiBytes(fileUrl(runId, f.path, atSeq));
      // The bytes already fetched (with the API key), not a second request the browser would send without it.
      if (downloadUrl) URL.revokeObjectURL(downloadUrl);
      downloadUrl = URL.createObjectURL(new Blob([bytes as BlobPart], { type: 'application/octet-stream' }));
      const link = h('a', { href: downloadUrl, download: f.path.split('/').pop() ?? 'file' }, 'download');
      const head = h('div', { class: 'file-head' }, h('span', { class: 'mono' }, f.path), ' · ', sizeOf(f), ' · ', link);
      if (!contentType.startsWith('text/'))
        return fill(content, head, h('p', { class: 'muted' }, `A binary file of ${formatCount(bytes.length)} bytes.`));
      const text = new TextDecoder().decode(bytes.subarray(0, SHOWN_BYTES));
      fill(
        content,
        head,
        h('pre', { class: 'code file-text' }, text),
        bytes.length > SHOWN_BYTES ? h('p', { class: 'muted small' }, 'Cut: download it for the rest.') : null,
      );
    } catch (e) {
      fill(content, h('p', { class: 'muted' }, (e as Error).message));
    }
  };

  const draw = (files: RunFiles, atSeq: number | null) => {
    const changedBy = new Map((files.changed ?? []).map((c) => [c.path, c.change] as const));
    note.textContent = atSeq === null ? 'as of the latest step' : `as of step ${atSeq}`;
    fill(
      tree,
      files.files.map((f) => {
        const depth = f.path.split('/').length - 1;
        const name = f.path.split('/').pop()!;
        const change = changedBy.get(f.path);
        const li = h(
          'li',
          { role: 'treeitem', 'data-path': f.path, 'data-type': f.type, class: change ? `changed ${change}` : '' },
          h(
            'button',
            { type: 'button', class: 'file-row', onClick: () => void openFile(f, atSeq) },
            h('span', { class: 'file-name' }, f.type === 'dir' ? `${name}/` : name),
            h('span', { class: 'file-size muted' }, sizeOf(f)),
          ),
        );
        li.style.setProperty('--depth', String(depth));
        return li;
      }),
      files.files.length === 0 ? h('li', { class: 'muted' }, 'No files at this step.') : null,
    );
    const listed = (files.changed ?? []) as FileChange[];
    fill(
      changes,
      atSeq !== null
        ? listed.length
          ? h(
              'p',
              { class: 'small' },
              `Step ${atSeq} changed: `,
              ...listed.map((c) =>
                h(
                  'span',
                  { class: `tag change ${c.change}`, title: c.change },
                  `${c.change === 'deleted' ? '−' : c.change === 'added' ? '+' : '~'} ${c.path}`,
                ),
              ),
            )
          : h('p', { class: 'muted small' }, `Step ${atSeq} changed no file.`)
        : null,
    );
    const still = open && files.files.find((f) => f.path === open);
    if (still) void openFile(still, atSeq);
    else fill(content, files.files.length ? h('p', { class: 'muted small' }, 'Choose a file to see its content.') : null);
  };

  return {
    el,
    show(atSeq, changedSteps) {
      if (atSeq === shownAt && changedSteps === shownSteps) return;
      shownAt = atSeq;
      shownSteps = changedSteps;
      void api<RunFiles>(filesUrl(runId, atSeq)).then(
        (files) => {
          seen ||= files.files.length > 0 || (files.changed?.length ?? 0) > 0;
          el.hidden = !seen;
          if (seen) draw(files, atSeq);
        },
        () => {},
      );
    },
  };
}
