/**
 * Fan-out of run events in one API process: ONE LISTEN connection for the whole process, however many
 * readers, and one shared read per run per announcement, however many readers follow that run.
 *
 * A reader starts from its cursor: it reads the stored events itself (through the pool, a page at a
 * time) until it reaches the run's feed, then joins it. A feed is the live tail of one run: on each
 * announcement (the NOTIFY "<run> <highest id>" of the statement that wrote them, see migration 0014) it reads what is new once and
 * hands it to every reader that has not seen it. It keeps the most recent events in memory, so a
 * reader that joins a followed run (a reconnect, a second device) is served from there without a
 * query. Ids of a run increase in commit order (see migration 0007), so reading "after the last id
 * seen" never skips anything. Announcements lost while the LISTEN connection was down are made up
 * for after every reconnect, and by a slow poll of every followed run.
 *
 * Only runs some hub follows are announced at all (a NOTIFY serializes commits database-wide; see
 * migration 0013): a feed registers its run before its first read, renews the registration while it
 * lives and removes it when its last reader leaves. An event committed by a statement that ran just
 * before the registration is read by the first reader's catch-up, or at worst by the poll.
 *
 * A reader may read only while it may: its stream ends as soon as the API key it was opened with is
 * revoked or its run is deleted (both announced on the same LISTEN connection, migration 0017), and
 * after a reconnect and at every poll the hub asks the database once, for all its readers, whether
 * that happened unannounced.
 */
import { randomUUID } from 'node:crypto';
import { KEY_REVOKED_CHANNEL, listen, RUN_DELETED_CHANNEL, RUN_EVENT_CHANNEL, type Subscription } from '../db/notifications.ts';
import type { RunId } from '../domain/types.ts';
import type { Logger } from '../observability/logger.ts';
import type { ReaderAccess } from '../store/reader-access.ts';
import type { StoredEvent } from '../store/run-events.ts';

export interface EventPages {
  page(runId: RunId, after: number, limit: number): Promise<StoredEvent[]>;
  /** Has these runs' new events announced to `watcher` for `ttlMs`; absent: every run is announced. */
  watch?(runIds: readonly RunId[], watcher: string, ttlMs: number): Promise<void>;
  /** Stops announcing `runId` (without it: every run) to `watcher`. */
  unwatch?(watcher: string, runId?: RunId): Promise<void>;
}

/** @unit milliseconds — how long a registration lasts unless renewed; renewed every quarter of it. */
const WATCH_TTL_MS = 120_000;

/**
 * @unit milliseconds — when a newly followed run is read once more. A write whose statement began
 * before the registration committed did not see it, so was not announced, yet may commit after the
 * first read: this read finds it without waiting for the poll.
 */
const LATE_WRITE_READ_MS = 1000;

export interface EventReader {
  /** Events in order, each once; after run.finished nothing more comes. */
  deliver(events: readonly StoredEvent[]): void;
  /** The events could not be read (the database failed), or the hub closes: the reader should end; its client reconnects. */
  failed(error: Error): void;
  /**
   * The reader may no longer read the run (`reason` says why: its key was revoked, the run deleted):
   * it must end now and deliver nothing more; a reconnect is refused. Absent: `failed` is called.
   */
  withdrawn?(reason: string): void;
}

/** Who opened a reader, as far as its right to go on reading depends on it. */
export interface ReaderAuth {
  /** The API key the reader's request was authenticated with; null without one (nothing to revoke). */
  keyId: string | null;
}

export interface Following {
  close(): void;
}

export interface EventHubOptions {
  /** Where to LISTEN; null: no LISTEN (the poll alone, e.g. in tests of the hub). */
  databaseUrl: string | null;
  logger?: Logger | undefined;
  /** @unit milliseconds — how often every followed run is read even without an announcement. Default 5000. */
  pollMs?: number;
  /** Events kept in memory per followed run for readers that join. Default 2000. */
  recentEvents?: number;
  /** Events per read. Default 1000. */
  pageSize?: number;
  /** Asked after each LISTEN reconnect and at each poll which readers lost their key or run; absent: notifications only. */
  access?: Pick<ReaderAccess, 'lost'> | undefined;
}

interface Reader {
  cursor: number;
  live: boolean;
  closed: boolean;
  sink: EventReader;
  keyId: string | null;
}

class Feed {
  /** The highest id read by the feed; null until its first reader joined. */
  tail: number | null = null;
  /** The feed's recent events, complete after `recentFrom`. */
  recent: StoredEvent[] = [];
  recentFrom = 0;
  readonly readers = new Set<Reader>();
  reading = false;
  again = false;
  /** Settles once the run is registered for announcements (or that failed: the poll still reads it). */
  watched: Promise<void> = Promise.resolve();
  constructor(readonly runId: RunId) {}
}

export class EventHub {
  private readonly feeds = new Map<RunId, Feed>();
  private subscription: Subscription | null = null;
  private poll: NodeJS.Timeout | undefined;
  private renew: NodeJS.Timeout | undefined;
  /** This hub's name in run_event_watch. */
  private readonly watcher = randomUUID();
  /** The last registration change per run, so a quick unwatch and watch of one run apply in order. */
  private readonly watchChanges = new Map<RunId, Promise<void>>();
  private readonly pageSize: number;
  private readonly recentEvents: number;
  private checkingAccess = false;

  constructor(
    private readonly pages: EventPages,
    private readonly opts: EventHubOptions,
  ) {
    this.pageSize = opts.pageSize ?? 1000;
    this.recentEvents = opts.recentEvents ?? 2000;
  }

  /** Runs followed right now (for tests and metrics). */
  get followedRuns(): number {
    return this.feeds.size;
  }

  /** Follows run `runId` from after id `after`: stored events first, then live ones, until `auth` no longer holds. */
  follow(runId: RunId, after: number, sink: EventReader, auth: ReaderAuth = { keyId: null }): Following {
    this.start();
    let feed = this.feeds.get(runId);
    if (!feed) {
      this.feeds.set(runId, (feed = new Feed(runId)));
      feed.watched = this.changeWatch(runId, (pages) => pages.watch([runId], this.watcher, WATCH_TTL_MS));
      const created = feed;
      void feed.watched.then(() => {
        setTimeout(() => {
          if (this.feeds.get(runId) === created) void this.read(created);
        }, LATE_WRITE_READ_MS).unref();
      });
    }
    const reader: Reader = { cursor: after, live: false, closed: false, sink, keyId: auth.keyId };
    feed.readers.add(reader);
    void this.catchUp(feed, reader);
    return { close: () => this.drop(feed, reader) };
  }

  async close(): Promise<void> {
    clearInterval(this.poll);
    this.poll = undefined;
    clearInterval(this.renew);
    this.renew = undefined;
    const watched = this.feeds.size > 0;
    const readers = [...this.feeds.values()].flatMap((feed) => [...feed.readers]);
    this.feeds.clear();
    for (const r of readers) {
      r.closed = true;
      r.sink.failed(new Error('the server is shutting down'));
    }
    await this.subscription?.close();
    this.subscription = null;
    if (watched) await this.pages.unwatch?.(this.watcher).catch(() => {});
  }

  /** Applies a registration change of `runId` after the ones before it; a failure is logged (the poll still reads). */
  private changeWatch(runId: RunId, change: (pages: Required<EventPages>) => Promise<void>): Promise<void> {
    if (!this.pages.watch || !this.pages.unwatch) return Promise.resolve();
    const next = (this.watchChanges.get(runId) ?? Promise.resolve())
      .then(() => change(this.pages as Required<EventPages>))
      .catch((e: Error) =>
        this.opts.logger?.warn(
          { err_message: e.message, run_id: runId },
          'could not register the run for event announcements; its readers are served by the poll',
        ),
      );
    this.watchChanges.set(runId, next);
    void next.then(() => {
      if (this.watchChanges.get(runId) === next) this.watchChanges.delete(runId);
    });
    return next;
  }

  private start(): void {
    if (this.poll) return;
    this.poll = setInterval(() => {
      for (const feed of this.feeds.values()) void this.read(feed);
      void this.checkAccess();
    }, this.opts.pollMs ?? 5000);
    this.poll.unref();
    this.renew = setInterval(() => {
      const runs = [...this.feeds.keys()];
      if (runs.length && this.pages.watch) {
        this.pages
          .watch(runs, this.watcher, WATCH_TTL_MS)
          .catch((e: Error) =>
            this.opts.logger?.warn({ err_message: e.message }, 'could not renew the runs registered for event announcements'),
          );
      }
    }, WATCH_TTL_MS / 4);
    this.renew.unref();
    const url = this.opts.databaseUrl;
    if (url === null) return;
    this.subscription = listen(
      url,
      {
        [RUN_EVENT_CHANNEL]: (payload) => this.announced(payload),
        [KEY_REVOKED_CHANNEL]: (keyId) => this.withdraw((_, r) => r.keyId === keyId, 'the API key was revoked'),
        [RUN_DELETED_CHANNEL]: (runId) => this.withdraw((feed) => feed.runId === runId, 'the run was deleted'),
      },
      {
        // Announcements sent while disconnected are lost: read every followed run again.
        onConnect: () => {
          for (const feed of this.feeds.values()) void this.read(feed);
          void this.checkAccess();
        },
        onError: (e, retryInMs) =>
          this.opts.logger?.warn(
            { err_message: e.message, retry_in_ms: retryInMs },
            'LISTEN connection for run events failed; reconnecting',
          ),
      },
    );
  }

  private announced(payload: string): void {
    const [runId, highest] = payload.split(' ');
    const feed = this.feeds.get(runId as RunId);
    if (!feed) return;
    if (feed.tail !== null && Number(highest) <= feed.tail) return;
    void this.read(feed);
  }

  /** Ends every reader that `lost` matches, at once: nothing more is delivered to it. */
  private withdraw(lost: (feed: Feed, reader: Reader) => boolean, reason: string): void {
    for (const feed of [...this.feeds.values()]) {
      for (const reader of [...feed.readers]) {
        if (!lost(feed, reader)) continue;
        this.drop(feed, reader);
        if (reader.sink.withdrawn) reader.sink.withdrawn(reason);
        else reader.sink.failed(new Error(reason));
      }
    }
  }

  /** Asks the database whether any reader's key was revoked or run deleted while no announcement came. */
  private async checkAccess(): Promise<void> {
    const access = this.opts.access;
    if (!access || this.checkingAccess || this.feeds.size === 0) return;
    this.checkingAccess = true;
    try {
      const keyIds = new Set<string>();
      for (const feed of this.feeds.values()) for (const r of feed.readers) if (r.keyId !== null) keyIds.add(r.keyId);
      const lost = await access.lost([...keyIds], [...this.feeds.keys()]);
      const keys = new Set(lost.keys);
      const runs = new Set(lost.runs);
      if (keys.size) this.withdraw((_, r) => r.keyId !== null && keys.has(r.keyId), 'the API key was revoked');
      if (runs.size) this.withdraw((feed) => runs.has(feed.runId), 'the run was deleted');
    } catch (e) {
      this.opts.logger?.warn(
        { err_message: (e as Error).message },
        'could not check whether the keys and runs of open event streams are still valid; trying again at the next poll',
      );
    } finally {
      this.checkingAccess = false;
    }
  }

  private drop(feed: Feed, reader: Reader): void {
    reader.closed = true;
    feed.readers.delete(reader);
    if (feed.readers.size === 0 && this.feeds.get(feed.runId) === feed) {
      this.feeds.delete(feed.runId);
      void this.changeWatch(feed.runId, (pages) => pages.unwatch(this.watcher, feed.runId));
    }
  }

  private give(reader: Reader, events: readonly StoredEvent[]): void {
    const fresh = events[0] && events[0].id > reader.cursor ? events : events.filter((e) => e.id > reader.cursor);
    if (fresh.length === 0 || reader.closed) return;
    reader.cursor = fresh[fresh.length - 1]!.id;
    reader.sink.deliver(fresh);
  }

  /** The reader reads on its own until it has reached the feed, then joins it (synchronously, so nothing falls in between). */
  private async catchUp(feed: Feed, reader: Reader): Promise<void> {
    try {
      // Registered first: whatever commits after this read is announced.
      await feed.watched;
      for (;;) {
        if (reader.closed) return;
        if (feed.tail !== null && reader.cursor >= feed.recentFrom) {
          this.give(reader, feed.recent);
          reader.live = true;
          return;
        }
        const page = await this.pages.page(feed.runId, reader.cursor, this.pageSize);
        if (reader.closed) return;
        this.give(reader, page);
        if (page.length < this.pageSize && feed.tail === null) {
          // The first reader to reach the end starts the feed where it stands.
          feed.tail = reader.cursor;
          feed.recentFrom = reader.cursor;
          reader.live = true;
          // Anything announced meanwhile was not read by the feed: read now.
          void this.read(feed);
          return;
        }
      }
    } catch (e) {
      this.drop(feed, reader);
      reader.sink.failed(e as Error);
    }
  }

  /** One shared read of what is new in the run, handed to every live reader. */
  private async read(feed: Feed): Promise<void> {
    if (feed.tail === null) return;
    if (feed.reading) {
      feed.again = true;
      return;
    }
    feed.reading = true;
    try {
      do {
        feed.again = false;
        let page: StoredEvent[];
        do {
          page = await this.pages.page(feed.runId, feed.tail, this.pageSize);
          if (page.length === 0) break;
          feed.tail = page[page.length - 1]!.id;
          feed.recent.push(...page);
          const excess = feed.recent.length - this.recentEvents;
          if (excess > 0) feed.recentFrom = feed.recent.splice(0, excess).at(-1)!.id;
          for (const r of feed.readers) if (r.live) this.give(r, page);
        } while (page.length === this.pageSize);
      } while (feed.again);
    } catch (e) {
      this.opts.logger?.warn(
        { err_message: (e as Error).message, run_id: feed.runId },
        'reading run events failed; trying again at the next announcement or poll',
      );
    } finally {
      feed.reading = false;
    }
  }
}
