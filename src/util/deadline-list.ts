/**
 * Deadlines of one length for many things at once (the attempts in flight of one model endpoint, all
 * with the same time limit), on one timer. Node groups its timers by duration too, but keeps a Timeout
 * object per timer, with its callback and its place in the list: with thousands of calls in flight,
 * hundreds of bytes each for a limit that almost never runs out. Here an entry is one slot of a Map.
 *
 * Entries sharing their length fall due in the order they were added, which a Map keeps: the timer is
 * armed for the first one still there, and a deleted entry is simply gone from the Map.
 */
export class DeadlineList<T> {
  /** Each entry's deadline, in performance.now() milliseconds, in the order they were added. */
  private readonly due = new Map<T, number>();
  private timer: NodeJS.Timeout | null = null;

  /** @param ms milliseconds from an entry's `add` to its `expire` (at most MAX_TIMER_MS) */
  constructor(
    private readonly ms: number,
    private readonly expire: (item: T) => void,
  ) {}

  /** `item` expires `ms` from now, unless deleted before. */
  add(item: T): void {
    this.due.delete(item);
    this.due.set(item, Math.ceil(performance.now() + this.ms));
    if (!this.timer) this.arm(this.ms);
  }

  /** `item` will not expire (nothing happens when it was not there). */
  delete(item: T): void {
    if (!this.due.delete(item) || this.due.size > 0 || !this.timer) return;
    clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.fire(), ms);
  }

  private fire(): void {
    this.timer = null;
    const now = performance.now();
    for (const [item, at] of this.due) {
      if (at > now) return this.arm(at - now);
      this.due.delete(item);
      this.expire(item);
    }
  }
}
