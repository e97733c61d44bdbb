/**
 * The page's addresses, in the browser's history: / (runs), /runs/{id} (one run; ?step=N opens a
 * step), /overview, /schedules. The server answers each with the same shell (src/api/dashboard.ts lists them).
 * A view draws into the main element and returns what to do when the page leaves it.
 */
export interface Route {
  name: 'runs' | 'run' | 'overview' | 'schedules' | 'not-found';
  params: Record<string, string>;
  query: URLSearchParams;
}

export type View = (main: HTMLElement, route: Route) => () => void;

export function match(url: URL): Route {
  const query = url.searchParams;
  const path = url.pathname.replace(/\/+$/, '') || '/';
  if (path === '/') return { name: 'runs', params: {}, query };
  if (path === '/overview') return { name: 'overview', params: {}, query };
  if (path === '/schedules') return { name: 'schedules', params: {}, query };
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run) return { name: 'run', params: { id: decodeURIComponent(run[1]!) }, query };
  return { name: 'not-found', params: {}, query };
}

let render: (() => void) | null = null;

/** Goes to `href` in the page; `replace` for changes that should not add a history entry (filters, paging). */
export function navigate(href: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  render?.();
}

/** Starts routing: draws the current address, and again on every link click and back/forward. */
export function startRouter(onRoute: (route: Route) => void): void {
  render = () => onRoute(match(new URL(location.href)));
  window.addEventListener('popstate', render);
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element | null)?.closest?.('a');
    if (!a || a.target || a.hasAttribute('download') || a.origin !== location.origin) return;
    if (a.pathname.startsWith('/api/') || a.pathname.startsWith('/assets/') || a.pathname.endsWith('.json')) return;
    e.preventDefault();
    navigate(a.pathname + a.search);
  });
  render();
}
