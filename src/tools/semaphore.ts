/** A counting semaphore whose waits can be given up through an AbortSignal. */
export class Semaphore {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`a concurrency limit must be a whole number of at least 1, not ${size}`);
    this.free = size;
  }

  /** Resolves with the function that gives the place back (call it once); rejects with the signal's reason. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    let given = false;
    const release = () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(release);
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal!.reason);
      };
      this.waiting.push(grant);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
