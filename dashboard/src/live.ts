/**
 * Live updates by polling, only while the page is visible: a hidden tab costs the server nothing, and
 * coming back refreshes at once. Ticks never overlap. The connection state (last success, last error)
 * is shared so the header can say whether what the page shows is current.
 *
 * When the API streams a run's events (GET /api/runs/{id}/events), the run page can follow that
 * stream instead and keep this poll as its fallback: see `follow` in views/run.ts.
 */
export interface Poller {
  /** Runs the tick now (e.g. after an action), then keeps the rhythm. */
  refresh(): void;
  stop(): void;
}

type ConnectionListener = (state: { ok: boolean; at: Date; message?: string }) => void;
const listeners = new Set<ConnectionListener>();

export function onConnection(listener: ConnectionListener): void {
  listeners.add(listener);
}

export function reportConnection(ok: boolean, message?: string): void {
  for (const l of listeners) l({ ok, at: new Date(), ...(message ? { message } : {}) });
}

/** Calls `tick` now and every `intervalMs` after the previous tick ended, while the page is visible. */
export function poll(tick: () => Promise<void>, intervalMs: number): Poller {
  let timer: number | undefined;
  let running = false;
  let again = false;
  let stopped = false;

  const schedule = () => {
    window.clearTimeout(timer);
    if (!stopped && document.visibilityState === 'visible') timer = window.setTimeout(run, intervalMs);
  };
  const run = async () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await tick();
    } finally {
      running = false;
    }
    if (again) {
      again = false;
      void run();
    } else {
      schedule();
    }
  };
  const onVisibility = () => {
    if (document.visibilityState === 'visible') void run();
    else window.clearTimeout(timer);
  };
  document.addEventListener('visibilitychange', onVisibility);
  void run();
  return {
    refresh: () => void run(),
    stop: () => {
      stopped = true;
      window.clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
