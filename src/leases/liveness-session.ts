/**
 * Owner liveness on a session of its own: the worker holds its advisory lock there for as long as it
 * lives (see liveness-sql.ts), and every interval the same session probes which RUNNING runs lost
 * their owner. A key missing at every probe for `confirmMs` (and at two at least) is reported
 * orphaned: a death is noticed within 0.5–0.75 s, and a worker that merely lost its session (a
 * terminated backend) has that long to take its key back before its runs are taken over (it tries
 * again after RECONNECT_MS; a reconnection here takes a few milliseconds).
 *
 * When the session drops, the worker claims nothing and starts no step until it is back (a step in
 * flight finishes; its writes are fenced). It takes the same key back if it can, however long the
 * database was away: its runs were not taken over, or those that were are fenced (the worker checks
 * its leases at once, then its runs go on). If another session holds the key past the grace, its runs
 * are being taken over: the worker is told to stop driving them, and takes a new key.
 *
 * A session that comes back (the server restarted, the network blinked) takes nobody's runs over for
 * `rejoinMs`: the other workers lost their sessions too and are coming back. Without that pause the
 * first worker back would take over the runs of every slower one, fencing their work in flight, and
 * each of those model calls would be paid for twice.
 *
 * Behind a pooler in transaction mode a session lock means nothing (statements land on any server
 * connection). The probe sees it (the lock is not held by the backend that answers) and the worker
 * falls back to the lease alone, saying so; WORKER_LIVENESS=lease chooses that from the start.
 */
import pg from 'pg';
import { type SchemaOption, schemaSql } from '../db/schema.ts';
import { livenessSql, type ProbeRow } from '../store/liveness-sql.ts';
import type { OwnerLiveness, OwnerLivenessFactory, OwnerLivenessListener } from '../ports/engine-store.ts';

export interface LivenessSessionOptions extends SchemaOption {
  /** @unit milliseconds — how often the session probes for orphaned runs (an index-only probe). Default 250. */
  intervalMs?: number;
  /** @unit milliseconds — how long an owner's lock must stay missing before its runs are taken over. Default 500. */
  confirmMs?: number;
  /** @unit milliseconds — how long the key may be held by another session before the worker gives it up. Default 2 × interval. */
  graceMs?: number;
  /** @unit milliseconds — after its session came back, how long the worker waits before taking over anyone's runs. Default 5000. */
  rejoinMs?: number;
  /** Told what the session decided about itself (a fallback, a loss, a recovery). */
  log?: (level: 'info' | 'warn', message: string, fields?: Record<string, unknown>) => void;
}

/** How soon a dropped session is tried again. */
const RECONNECT_MS = 100;

type State = 'starting' | 'live' | 'reconnecting' | 'lost' | 'lease' | 'closed';

class LivenessSession implements OwnerLiveness {
  private client: pg.Client | null = null;
  private key: number | null = null;
  private state: State = 'starting';
  /** When the session dropped (null while live). */
  private droppedAt: number | null = null;
  /** Until when no orphan is reported: the session came back, and so may the others. */
  private rejoiningUntil = 0;
  /** Since when the server has answered that another session holds the key (null: it has not). */
  private heldElsewhereSince: number | null = null;
  /** Keys missing at every probe since, by when they were first found missing. */
  private missing = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  /** The tick in progress, if any: ticks never overlap. */
  private ticking: Promise<void> | null = null;
  private markReady!: () => void;
  readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));
  private readonly sql: ReturnType<typeof livenessSql>;
  private readonly intervalMs: number;
  private readonly graceMs: number;
  private readonly confirmMs: number;
  private readonly rejoinMs: number;

  constructor(
    private readonly url: string,
    private readonly listener: OwnerLivenessListener,
    private readonly opts: LivenessSessionOptions,
  ) {
    this.sql = livenessSql(schemaSql(opts.schema));
    this.intervalMs = opts.intervalMs ?? 250;
    this.graceMs = opts.graceMs ?? 2 * this.intervalMs;
    this.confirmMs = opts.confirmMs ?? 500;
    this.rejoinMs = opts.rejoinMs ?? 5_000;
    this.schedule(0);
  }

  ownerLock(): number | null | 'lost' {
    if (this.state === 'lease') return null;
    return this.state === 'live' ? this.key : 'lost';
  }

  private schedule(ms: number): void {
    if (this.state === 'closed' || this.state === 'lease' || this.ticking) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => {
        this.ticking = null;
        this.schedule(this.state === 'live' ? this.intervalMs : RECONNECT_MS);
      });
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const c = this.client;
    try {
      if (!c) await this.connect();
      else if (this.state === 'live') await this.probe(c);
    } catch (e) {
      this.dropped(e as Error, c ?? this.client);
    } finally {
      if (this.state === 'starting' && this.droppedAt !== null) this.markReady(); // unreachable at start: keeps trying
    }
  }

  private async connect(): Promise<void> {
    const c = new pg.Client({
      connectionString: this.url,
      application_name: 'durable-agent-liveness',
      query_timeout: Math.max(2 * this.intervalMs, 2_000),
    });
    // An idle session that dies (its backend terminated) says so here, between probes.
    c.on('error', (e) => {
      if (this.client !== c) return;
      this.dropped(e, c);
      this.schedule(0);
    });
    await c.connect().catch((e: Error) => {
      void c.end().catch(() => {});
      throw e;
    });
    this.client = c;
    if (this.key !== null && this.state !== 'lost') {
      const { rows } = await c.query<{ held: boolean }>(this.sql.RETAKE_KEY, [this.key]);
      if (rows[0]!.held) {
        this.opts.log?.('info', 'liveness session back; its lock taken again', { owner_lock: this.key });
        this.live();
        this.listener.regained();
        return;
      }
      // Held by another session: the old one not gone yet (give it the grace, counted from the first
      // answer that says so, not from the drop: an outage may have lasted longer), or the key was taken.
      this.heldElsewhereSince ??= Date.now();
      if (Date.now() - this.heldElsewhereSince < this.graceMs) {
        await this.hangUp();
        return;
      }
      this.giveUp('its lock is held by another session');
    }
    const { rows } = await c.query<{ key: number }>(this.sql.TAKE_NEW_KEY);
    if (!rows[0]) return await this.hangUp(); // the sequence cycled onto a key still held: the next one, next time
    this.key = rows[0].key;
    // Does this very backend hold the lock? Not behind a pooler in transaction mode.
    const probe = await c.query<ProbeRow>({ text: this.sql.PROBE, values: [this.key] });
    if (!probe.rows[0]!.mine) return await this.fallBack();
    if (this.state === 'starting')
      this.opts.log?.('info', "owner liveness: a session lock; a dead worker's runs are taken over within about a second", {
        owner_lock: this.key,
      });
    else this.opts.log?.('info', 'liveness session back under a new lock', { owner_lock: this.key });
    this.live();
  }

  private live(): void {
    if (this.droppedAt !== null) this.rejoiningUntil = Date.now() + this.rejoinMs;
    this.state = 'live';
    this.droppedAt = null;
    this.heldElsewhereSince = null;
    this.markReady();
  }

  private async probe(c: pg.Client): Promise<void> {
    const { rows } = await c.query<ProbeRow>({ text: this.sql.PROBE, values: [this.key] });
    const { mine, orphaned } = rows[0]!;
    if (!mine) return await this.fallBack();
    const now = Date.now();
    const confirmed = now < this.rejoiningUntil ? [] : orphaned.filter((k) => now - (this.missing.get(k) ?? now) >= this.confirmMs);
    this.missing = new Map(orphaned.map((k) => [k, this.missing.get(k) ?? now]));
    if (confirmed.length) this.listener.orphaned(confirmed);
  }

  /** The session `c` failed (null: no session could be opened). */
  private dropped(e: Error, c: pg.Client | null): void {
    if (c && this.client !== c) return; // already dealt with
    this.client = null;
    if (c) void c.end().catch(() => {});
    if (this.state === 'closed' || this.state === 'lease') return;
    if (this.droppedAt === null) {
      this.droppedAt = Date.now();
      this.missing.clear();
      if (this.state === 'live') {
        this.state = 'reconnecting';
        this.opts.log?.('warn', 'liveness session lost; claiming nothing until it is back', {
          err_message: e.message,
          owner_lock: this.key,
        });
      }
    }
  }

  /** Its runs are being taken over: stop driving them; a new key comes with the next session. */
  private giveUp(why: string): void {
    this.opts.log?.('warn', `liveness lock given up (${why}); the runs this worker drove are left to others`, { owner_lock: this.key });
    this.state = 'lost';
    this.key = null;
    this.heldElsewhereSince = null;
    this.listener.lost();
  }

  private async hangUp(): Promise<void> {
    const c = this.client;
    this.client = null;
    await c?.end().catch(() => {});
  }

  private async fallBack(): Promise<void> {
    this.opts.log?.(
      'warn',
      "owner liveness: the session lock is not held by the connection that answers (a pooler in transaction mode?); falling back to the lease alone: a dead worker's runs wait for their lease to lapse",
    );
    this.state = 'lease';
    this.key = null;
    await this.hangUp();
    this.markReady();
  }

  async close(): Promise<void> {
    const key = this.state === 'live' ? this.key : null;
    this.state = 'closed';
    clearTimeout(this.timer);
    await this.ticking?.catch(() => {});
    const c = this.client;
    this.client = null;
    if (!c) return;
    if (key !== null) await c.query(this.sql.RELEASE_KEY, [key]).catch(() => {});
    await c.end().catch(() => {});
  }
}

/** Owner liveness on a session lock of its own at `url` (see the module comment). */
export function livenessSession(url: string, opts: LivenessSessionOptions = {}): OwnerLivenessFactory {
  return (listener) => new LivenessSession(url, listener, opts);
}

/** No session lock: the lease alone tells a dead worker (WORKER_LIVENESS=lease, e.g. behind a transaction pooler). */
export function leaseOnlyLiveness(log?: LivenessSessionOptions['log']): OwnerLivenessFactory {
  return () => {
    log?.('info', "owner liveness: the lease alone (WORKER_LIVENESS=lease); a dead worker's runs wait for their lease to lapse");
    return { ready: Promise.resolve(), ownerLock: () => null, close: async () => {} };
  };
}
