/** Waits without holding the caller hostage: an abort rejects at once with the signal's reason. */
export interface Sleeper {
  /** @param ms milliseconds to wait */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const timerSleeper: Sleeper = {
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
