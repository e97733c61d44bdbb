/**
 * The dashboard's entry: the header (navigation, connection state, the API key), the key form for
 * `api()`, and the router that draws one view at a time into <main>.
 */
import { apiKey, setKeyPrompt } from './api.ts';
import { fill, h } from './dom.ts';
import { askForKey } from './key-form.ts';
import { onConnection } from './live.ts';
import { type Route, startRouter, type View } from './router.ts';
import { overviewView } from './views/overview.ts';
import { runView } from './views/run.ts';
import { runsView } from './views/runs.ts';
import { schedulesView } from './views/schedules.ts';

const notFoundView: View = (main) => {
  fill(
    main,
    h(
      'section',
      { class: 'page' },
      h('div', { class: 'card empty' }, h('h2', null, 'Nothing here'), h('a', { href: '/' }, 'Go to the runs')),
    ),
  );
  return () => {};
};

const VIEWS: Record<Route['name'], View> = {
  runs: runsView,
  run: runView,
  overview: overviewView,
  schedules: schedulesView,
  'not-found': notFoundView,
};
const TITLES: Record<Route['name'], string> = {
  runs: 'Runs',
  run: 'Run',
  overview: 'Overview',
  schedules: 'Schedules',
  'not-found': 'Not found',
};

function header(): { el: HTMLElement; setActive(name: Route['name']): void } {
  const links = {
    runs: h('a', { href: '/', class: 'nav-link' }, 'Runs'),
    overview: h('a', { href: '/overview', class: 'nav-link' }, 'Overview'),
    schedules: h('a', { href: '/schedules', class: 'nav-link' }, 'Schedules'),
  };
  const conn = h(
    'span',
    { class: 'conn', role: 'status', title: 'Connecting…' },
    h('span', { class: 'conn-dot' }),
    h('span', { class: 'conn-text' }, 'connecting'),
  );
  const key = h('span', { class: 'key-slot' });
  const drawKey = () => {
    fill(
      key,
      apiKey.get()
        ? h(
            'button',
            {
              type: 'button',
              class: 'btn ghost small',
              title: 'Remove the API key from this tab',
              onClick: () => {
                apiKey.clear();
                drawKey();
              },
            },
            'Forget key',
          )
        : null,
    );
  };
  drawKey();
  window.addEventListener('storage', drawKey);
  onConnection(({ ok, at, message }) => {
    conn.classList.toggle('down', !ok);
    conn.lastElementChild!.textContent = ok ? 'live' : 'offline';
    conn.title = ok ? `Last update ${at.toLocaleTimeString()}` : `${message ?? 'unreachable'}; retrying`;
    drawKey();
  });
  const el = h(
    'header',
    { class: 'top' },
    h(
      'div',
      { class: 'top-inner' },
      h(
        'a',
        { href: '/', class: 'brand' },
        h('img', { src: '/assets/favicon.svg', alt: '', width: 22, height: 22 }),
        h('span', null, 'durable-agent'),
      ),
      h('nav', { class: 'nav' }, links.runs, links.overview, links.schedules),
      h('div', { class: 'top-right' }, conn, key),
    ),
  );
  return {
    el,
    setActive(name) {
      links.runs.classList.toggle('on', name === 'runs' || name === 'run');
      links.overview.classList.toggle('on', name === 'overview');
      links.schedules.classList.toggle('on', name === 'schedules');
    },
  };
}

function start(): void {
  setKeyPrompt(askForKey);
  const app = document.getElementById('app')!;
  const top = header();
  const main = h('main', { class: 'main' });
  fill(app, top.el, main);
  let leave: () => void = () => {};
  startRouter((route) => {
    leave();
    top.setActive(route.name);
    document.title = `${TITLES[route.name]} · durable-agent`;
    window.scrollTo(0, 0);
    leave = VIEWS[route.name](main, route);
  });
}

start();
