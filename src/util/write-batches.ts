/**
 * Concurrent writes of different runs, sent as one statement. A checkpoint's cost in the database is
 * mostly the statement's, not its rows': each execution locks every table and index the plan touches,
 * starts and ends the executor, commits and flushes the WAL. With hundreds of runs in flight, the writes
 * that arrive while earlier ones are in flight wait for a free slot and go out together, in one
 * statement and one transaction: every step still commits exactly once, with the step that produced
 * it, and the fence is still each run's own (a run whose lease is gone writes nothing and is told so).
 * A lone write goes out at once, as it would have alone.
 *
 * Runs are in a batch at most once (a later write of the same run waits for the next), so the
 * statement can join its parts on the run id.
 *
 * When the statement fails because of what one write held (a value the database refuses, a broken
 * constraint: the "permanent" kind of db-errors.ts), each write of the batch is tried alone, so the
 * others land and that one gets its own error. Any other failure (the connection, the server) is every
 * write's: each caller retries or gives up as it would have alone.
 */
import { classifyDatabaseError } from '../core/database-errors.ts';

export interface BatchedWrite {
  /** The run written, as PostgreSQL spells a uuid (lower case): outcomes are matched to writes by it. */
  run: string;
}

/**
 * Writes `items` in one statement, `json` being their JSON array; the outcome of each, in order: its
 * result, or the error it is to raise.
 */
export type WriteAll<I, O> = (items: readonly I[], json: string) => Promise<readonly (O | Error)[]>;

export interface WriteBatchesOptions {
  /** Statements in flight at once: what arrives meanwhile waits and goes out in the next. */
  maxInFlight: number;
  /** Writes in one statement at most. */
  maxItems: number;
}

/** Enough to keep the database's cores busy while the next batch gathers; measured on the agent-loop bench. */
export const WRITE_BATCHES: WriteBatchesOptions = { maxInFlight: 4, maxItems: 400 };

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

/**
 * Writes on their way out and their JSON array, made when the batch is taken, not when each is handed
 * in: a write waiting for a slot holds only what its caller holds anyway (with thousands of runs in
 * flight, hundreds wait at any moment), and one that cannot be serialized fails alone. Only the array
 * is kept while the statement is out, not each write's own JSON beside it.
 */
interface Batch<I, O> {
  writes: Pending<I, O>[];
  json: string;
}

export class WriteBatches<I extends BatchedWrite, O> {
  private queue: Pending<I, O>[] = [];
  private inFlight = 0;
  /**
   * Runs with a statement in flight. A run's next write waits for it: two statements of one run (a
   * run's tool calls finishing at once) would otherwise fill the slots, each waiting for the run's row
   * while holding the rows of every other run in its batch.
   */
  private readonly busy = new Set<string>();

  constructor(
    private readonly writeAll: WriteAll<I, O>,
    private readonly opts: WriteBatchesOptions = WRITE_BATCHES,
  ) {}

  /** Writes `item` with others when they meet. It is serialized when its batch goes out: it must not change until this settles. */
  write(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.opts.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      if (!batch) return;
      const { writes } = batch;
      this.inFlight++;
      for (const p of writes) this.busy.add(p.item.run);
      void this.send(batch)
        .catch((e: unknown) => writes.forEach((p) => p.reject(e)))
        .finally(() => {
          this.inFlight--;
          for (const p of writes) this.busy.delete(p.item.run);
          this.pump();
        });
    }
  }

  /** The oldest writes, one per run and none of a busy run, up to maxItems; the rest stays queued in order. Null: none. */
  private take(): Batch<I, O> | null {
    const runs = new Set<string>();
    const writes: Pending<I, O>[] = [];
    const json: string[] = [];
    const rest: Pending<I, O>[] = [];
    for (const p of this.queue) {
      if (writes.length < this.opts.maxItems && !runs.has(p.item.run) && !this.busy.has(p.item.run)) {
        try {
          json.push(JSON.stringify(p.item));
        } catch (e) {
          p.reject(e);
          continue;
        }
        runs.add(p.item.run);
        writes.push(p);
      } else rest.push(p);
    }
    this.queue = rest;
    return writes.length === 0 ? null : { writes, json: `[${json.join(',')}]` };
  }

  /** Settles every write of `batch` (a promise settled twice keeps its first outcome). */
  private async send({ writes, json }: Batch<I, O>): Promise<void> {
    let outcomes: readonly (O | Error)[];
    try {
      outcomes = await this.writeAll(
        writes.map((p) => p.item),
        json,
      );
    } catch (e) {
      if (writes.length > 1 && classifyDatabaseError(e) === 'permanent') {
        // One after another, in this batch's slot: the others' retries must not flood the pool. Each
        // serialized again: it was once, and a write does not change until it settles.
        for (const p of writes) await this.send({ writes: [p], json: `[${JSON.stringify(p.item)}]` });
      } else {
        for (const p of writes) p.reject(e);
      }
      return;
    }
    if (outcomes.length !== writes.length) throw new Error(`a batch of ${writes.length} writes came back with ${outcomes.length} outcomes`);
    writes.forEach((p, i) => {
      const o = outcomes[i]!;
      if (o instanceof Error) p.reject(o);
      else p.resolve(o);
    });
  }
}
