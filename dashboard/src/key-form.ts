/**
 * The API key form: a modal dialog that `api()` opens on a 401 and that resolves with the key typed
 * in. The key is kept in sessionStorage only (see api.ts); "Forget key" in the header removes it.
 */
import type { KeyPrompt } from './api.ts';
import { h } from './dom.ts';

export const askForKey: KeyPrompt = ({ refused, message }) =>
  new Promise((resolve) => {
    const input = h('input', {
      type: 'password',
      name: 'api-key',
      autocomplete: 'off',
      spellcheck: 'false',
      required: true,
      placeholder: 'Paste an API key',
      'aria-label': 'API key',
    });
    const dialog = h(
      'dialog',
      { class: 'key-dialog', 'aria-labelledby': 'key-title' },
      h(
        'form',
        {
          method: 'dialog',
          onSubmit: (e: SubmitEvent) => {
            e.preventDefault();
            const key = input.value.trim();
            if (!key) return;
            dialog.close();
            dialog.remove();
            resolve(key);
          },
        },
        h('h2', { id: 'key-title' }, refused ? 'That key was not accepted' : 'An API key is needed'),
        h('p', { class: 'muted' }, refused ? `The server said: ${message}` : 'This server asks every request for an API key.'),
        input,
        h('p', { class: 'hint' }, 'It is kept in this browser tab only, until you close it or choose "Forget key".'),
        h('div', { class: 'dialog-actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Use key')),
      ),
    );
    // Without a key the page has nothing to show: the dialog stays until one is given.
    dialog.addEventListener('cancel', (e) => e.preventDefault());
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
