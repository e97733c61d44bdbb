/**
 * The longest delay one timer can take: Node fires a setTimeout of 2^31 ms or more after 1 ms, so a
 * long wait asked for by a server would turn into an immediate retry.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Waits without holding the caller hostage: an abort rejects at once with the signal's reason. */
export interface Sleeper {
  /** @param ms milliseconds to wait */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Sleeps with timers, in steps of at most MAX_TIMER_MS, so any finite wait is honoured whole. */
export const timerSleeper: Sleeper = {
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason);
      };
      const wakeAt = Date.now() + Math.max(0, Number.isFinite(ms) ? ms : MAX_TIMER_MS);
      const arm = () => {
        const left = wakeAt - Date.now();
        timer = setTimeout(left > MAX_TIMER_MS ? arm : done, Math.min(Math.max(0, left), MAX_TIMER_MS));
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      arm();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
