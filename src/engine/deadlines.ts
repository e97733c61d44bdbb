/**
 * The deadlines of the runs a worker holds, on one timer armed for the soonest. A timer a run cost
 * ~250 bytes (Node's Timeout, its closure, and one of Node's lists of timers per distinct duration,
 * which deadlines a millisecond apart each have), kept by every run in flight for all its life.
 *
 * A binary heap by due time, on the monotonic clock as a timer's is. Each entry knows its place in it,
 * so a run that ends is taken out at once, not kept until its deadline.
 */
import { MAX_TIMER_MS } from '../util/sleep.ts';

/** What the heap keeps on an entry: when it is due (the clock's milliseconds) and its place (-1: none). */
export interface Timed {
  due: number;
  place: number;
}

export class Deadlines<T extends Timed> {
  private readonly heap: T[] = [];
  private timer: NodeJS.Timeout | undefined = undefined;
  /** The due time the timer is armed for (Infinity: none). */
  private armedFor = Infinity;
  private closed = false;

  constructor(
    /** Told of each entry whose time has come, once, after it left the heap. */
    private readonly expire: (entry: T) => void,
    /** The global `performance`, looked up at each call (so a test's fake timers can stand in for it). */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  get size(): number {
    return this.heap.length;
  }

  /**
   * Expires `entry` in `ms` (at once when not positive, or not a number: an entry due at NaN would
   * stand first for ever and keep every other from expiring), unless it is removed first. A due time
   * past setTimeout's limit is looked at again each time the limit runs out.
   */
  add(entry: T, ms: number): void {
    this.detach(entry);
    entry.due = this.clock() + (Number.isNaN(ms) ? 0 : Math.max(ms, 0));
    entry.place = this.heap.length;
    this.heap.push(entry);
    this.up(entry.place);
    this.arm();
  }

  /** Takes `entry` out; nothing when it is not in. */
  remove(entry: T): void {
    if (this.detach(entry)) this.arm();
  }

  /** Stops the timer for good: the entries stay, and expire no more. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = this.clock();
    while (this.heap.length > 0 && this.heap[0]!.due <= now) {
      const first = this.heap[0]!;
      this.detach(first);
      this.expire(first);
    }
    this.arm();
  }

  /** Takes `entry` out of the heap, the timer left as it is; false when it was not in. */
  private detach(entry: T): boolean {
    const at = entry.place;
    if (at < 0 || this.heap[at] !== entry) return false;
    entry.place = -1;
    const last = this.heap.pop()!;
    if (last !== entry) {
      this.put(last, at);
      this.down(at);
      this.up(at);
    }
    return true;
  }

  private arm(): void {
    const first = this.heap[0];
    if (first?.due === this.armedFor) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
    if (!first || this.closed) return;
    this.armedFor = first.due;
    // At least a millisecond: a timer may fire a fraction of one before the clock says it is due.
    this.timer = setTimeout(Deadlines.fired, Math.min(Math.max(Math.ceil(first.due - this.clock()), 1), MAX_TIMER_MS), this);
    this.timer.unref();
  }

  /** The timer's callback: a function, not a closure per arming. */
  private static fired<T extends Timed>(deadlines: Deadlines<T>): void {
    deadlines.fire();
  }

  private put(entry: T, at: number): void {
    this.heap[at] = entry;
    entry.place = at;
  }

  private up(at: number): void {
    const entry = this.heap[at]!;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.heap[parent]!.due <= entry.due) break;
      this.put(this.heap[parent]!, at);
      at = parent;
    }
    this.put(entry, at);
  }

  private down(at: number): void {
    const entry = this.heap[at]!;
    const n = this.heap.length;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && this.heap[right]!.due < this.heap[left]!.due ? right : left;
      if (this.heap[child]!.due >= entry.due) break;
      this.put(this.heap[child]!, at);
      at = child;
    }
    this.put(entry, at);
  }
}
