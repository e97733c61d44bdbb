/**
 * The lease keeper on its own thread, with its own connection: a step that blocks the main event loop
 * (a tool doing a long synchronous computation) cannot stop the renewals, so the runs of a live worker
 * are never taken over just because it was busy. One statement per interval keeps every lease the
 * worker holds alive (RENEW_LEASES: it renews those no step renewed lately); the main thread says which
 * runs it holds and hears back which leases were lost and which runs have a cancel pending.
 *
 * The thread runs plain JavaScript given as source text (`eval: true`) and loads `pg` by its resolved
 * path, so it works the same under tsx, under vitest and from the compiled package: worker threads
 * do not go through the loaders that compile TypeScript.
 */
import { createRequire } from 'node:module';
import { Worker as Thread } from 'node:worker_threads';
import type { RunId } from '../domain/types.ts';
import { type NamedStatement, type SchemaOption, schemaSql } from '../db/schema.ts';
import { renewWithinMs } from '../core/lease-policy.ts';
import { leaseRenewalSql } from '../store/lease-renewal.ts';
import type { LeaseKeeper, LeaseKeeperFactory, LeaseKeeperListener, LeaseOwner } from '../ports/engine-store.ts';

type Statement = Pick<NamedStatement, 'text'> & Partial<Pick<NamedStatement, 'name'>>;

/** `changes`: runs now held (id, token) and runs let go since the last message. */
type ToThread = { type: 'changes'; hold: [string, string][]; drop: string[] } | { type: 'alive' } | { type: 'close' };
type FromThread =
  | { type: 'ready' }
  | { type: 'lost'; runId: string; token: string }
  | { type: 'cancel'; runId: string }
  | { type: 'followed'; runId: string }
  | { type: 'failed'; message: string };

interface ThreadData {
  pgPath: string;
  url: string;
  statement: Statement;
  owner: LeaseOwner;
  intervalMs: number;
  /** @unit milliseconds — leases that run out sooner are renewed, the others only checked (renewWithinMs). */
  withinMs: number;
  /** @unit milliseconds — renewals stop when the main thread has not said it is alive for this long. */
  stallLimitMs: number;
  held: [string, string][];
}

/** The thread's program (CommonJS, run with `eval: true`); its input is ThreadData, its messages ToThread/FromThread. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const pg = require(workerData.pgPath);
const { url, statement, owner, intervalMs, withinMs, stallLimitMs } = workerData;
// The main thread says it is alive every interval. A main thread blocked for good (a tool stuck in a
// synchronous loop) must not hold its runs for ever: past the limit the leases are left to lapse, and
// other workers take the runs over (the attempt is given back if this worker ever wakes up).
let lastAlive = Date.now();
const held = new Map(workerData.held); // run id -> lease token
const cancelReported = new Set();
const followReported = new Set();
let client = null;
let timer = null;
let closing = false;

function disconnect() {
  const c = client;
  client = null;
  if (c) c.end().catch(() => {});
}

async function connection() {
  if (client) return client;
  const c = new pg.Client({ connectionString: url, application_name: 'durable-agent-lease-keeper', query_timeout: Math.max(intervalMs, 1000) });
  c.on('error', () => { if (client === c) disconnect(); });
  await c.connect();
  client = c;
  return c;
}

// Rounds start every intervalMs (a slow round shortens the wait for the next, it does not push it
// back): the lease must be renewed well within its length even when the database answers slowly.
async function round() {
  timer = null;
  const started = Date.now();
  if (held.size > 0 && Date.now() - lastAlive <= stallLimitMs) {
    const ids = [...held.keys()];
    const tokens = ids.map((id) => held.get(id));
    try {
      const c = await connection();
      const { rows } = await c.query({ name: statement.name, text: statement.text, values: [owner.worker, owner.leaseMs, ids, tokens, withinMs] });
      const renewed = new Set(rows.map((r) => r.id + ' ' + r.lease_token));
      ids.forEach((runId, i) => {
        const token = tokens[i];
        if (renewed.has(runId + ' ' + token) || held.get(runId) !== token) return;
        held.delete(runId);
        parentPort.postMessage({ type: 'lost', runId, token });
      });
      for (const r of rows) {
        if (r.followed && !followReported.has(r.id)) {
          followReported.add(r.id);
          parentPort.postMessage({ type: 'followed', runId: r.id });
        }
        if (r.cancel_requested && !cancelReported.has(r.id)) {
          cancelReported.add(r.id);
          parentPort.postMessage({ type: 'cancel', runId: r.id });
        }
      }
    } catch (e) {
      disconnect();
      parentPort.postMessage({ type: 'failed', message: e && e.message ? e.message : String(e) });
    }
  }
  if (!closing) timer = setTimeout(round, Math.max(0, intervalMs - (Date.now() - started)));
}

parentPort.on('message', (m) => {
  if (m.type === 'alive') lastAlive = Date.now();
  else if (m.type === 'changes') {
    for (const runId of m.drop) {
      held.delete(runId);
      cancelReported.delete(runId);
      followReported.delete(runId);
    }
    for (const [runId, token] of m.hold) {
      if (held.get(runId) !== token) {
        // Claimed again: a new claim's cancel and followers are news to its driver.
        cancelReported.delete(runId);
        followReported.delete(runId);
      }
      held.set(runId, token);
    }
  } else if (m.type === 'close') {
    closing = true;
    if (timer) clearTimeout(timer);
    const c = client;
    client = null;
    Promise.resolve(c && c.end()).catch(() => {}).finally(() => parentPort.close());
  }
});
// Connected before the first claim's lease needs renewing: a connection made at the first round
// (under load, with the main thread busy) could come too late for it.
connection().then(
  () => parentPort.postMessage({ type: 'ready' }),
  (e) => parentPort.postMessage({ type: 'failed', message: e && e.message ? e.message : String(e) }),
);
timer = setTimeout(round, intervalMs);
`;

const pgPath = createRequire(import.meta.url).resolve('pg');

/** How long close() waits for the thread to hang up its connection before terminating it. */
const CLOSE_TIMEOUT_MS = 2_000;

/**
 * @unit milliseconds — how long runs let go of gather before the thread hears of them in one message:
 * a message per finished run cost ~60 µs (the other thread's wake-up). Renewing a run this worker let
 * go of a little longer is harmless, its fence (status and token) refuses it. A run claimed is sent at
 * once (with what gathered): the main thread may block right after the claim, and the thread must
 * keep that lease alive.
 */
const DROPS_DELAY_MS = 100;

class ThreadLeaseKeeper implements LeaseKeeper {
  /** What the thread should hold: replayed into a new thread if the old one died. */
  private readonly held = new Map<string, string>();
  /** Changes the thread has not been told of yet: run id → its token, or null when let go. */
  private readonly changes = new Map<string, string | null>();
  private flushing: NodeJS.Timeout | undefined;
  private thread: Thread | null = null;
  private restart: NodeJS.Timeout | undefined;
  private readonly alive: NodeJS.Timeout;
  private closed = false;
  private markReady!: () => void;
  /** Settles once the first thread has connected, or failed to (it then keeps trying). */
  readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));

  constructor(
    private readonly url: string,
    /** RENEW_LEASES of the keeper's schema: the text the thread runs (unnamed: never prepared by name). */
    private readonly statement: Statement,
    private readonly owner: LeaseOwner,
    private readonly intervalMs: number,
    private readonly listener: LeaseKeeperListener,
    private readonly stallLimitMs: number,
  ) {
    this.spawn();
    // Runs on the main thread: when it is blocked, these stop, and so (past the limit) do the renewals.
    this.alive = setInterval(() => this.send({ type: 'alive' }), intervalMs);
    this.alive.unref();
  }

  private spawn(): void {
    // A new thread starts from `held`: what it was not told yet is in there already.
    this.changes.clear();
    const data: ThreadData = {
      pgPath,
      url: this.url,
      statement: this.statement,
      owner: this.owner,
      intervalMs: this.intervalMs,
      withinMs: renewWithinMs(this.owner.leaseMs, this.intervalMs),
      stallLimitMs: this.stallLimitMs,
      held: [...this.held],
    };
    const thread = new Thread(THREAD_SOURCE, { eval: true, workerData: data });
    // The process's life is the main thread's business; the keeper only serves it.
    thread.unref();
    thread.on('message', (m: FromThread) => this.receive(m));
    thread.on('error', (e) => {
      this.markReady();
      this.listener.failed(e);
    });
    thread.on('exit', () => {
      if (this.thread !== thread || this.closed) return;
      this.thread = null;
      // Died unexpectedly: start another after an interval (not in a tight loop), with the same leases.
      this.restart = setTimeout(() => this.spawn(), this.intervalMs);
      this.restart.unref();
    });
    this.thread = thread;
  }

  private receive(m: FromThread): void {
    switch (m.type) {
      case 'ready':
        this.markReady();
        break;
      case 'lost':
        if (this.held.get(m.runId) === m.token) this.listener.lost({ runId: m.runId as RunId, token: m.token });
        break;
      case 'cancel':
        if (this.held.has(m.runId)) this.listener.cancelRequested(m.runId as RunId);
        break;
      case 'followed':
        if (this.held.has(m.runId)) this.listener.followed?.(m.runId as RunId);
        break;
      case 'failed':
        this.markReady();
        this.listener.failed(new Error(`lease renewal failed: ${m.message}`));
        break;
    }
  }

  private send(m: ToThread): void {
    this.thread?.postMessage(m);
  }

  hold(lease: { runId: RunId; token: string }): void {
    this.held.set(lease.runId, lease.token);
    this.changes.set(lease.runId, lease.token);
    this.flush();
  }

  drop(runId: RunId): void {
    this.held.delete(runId);
    this.changes.set(runId, null);
    if (this.flushing) return;
    this.flushing = setTimeout(() => this.flush(), DROPS_DELAY_MS);
    this.flushing.unref();
  }

  private flush(): void {
    clearTimeout(this.flushing);
    this.flushing = undefined;
    if (this.changes.size === 0) return;
    const hold: [string, string][] = [];
    const drop: string[] = [];
    for (const [runId, token] of this.changes) {
      if (token === null) drop.push(runId);
      else hold.push([runId, token]);
    }
    this.changes.clear();
    this.send({ type: 'changes', hold, drop });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.flushing);
    clearTimeout(this.restart);
    clearInterval(this.alive);
    const thread = this.thread;
    this.thread = null;
    if (!thread) return;
    const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
    thread.postMessage({ type: 'close' } satisfies ToThread);
    const timer = setTimeout(() => void thread.terminate(), CLOSE_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
}

export interface LeaseKeeperThreadOptions extends SchemaOption {
  /**
   * @unit milliseconds — how long the main thread may be blocked before its leases are left to lapse.
   * Default: 3 × the lease, or the tool timeout plus a lease when that is longer — a tool blocking
   * the loop can be that slow and still finish.
   */
  stallLimitMs?: number;
  /** Whether its statement is prepared by name on its connection; false behind a transaction pooler. Default true. */
  prepared?: boolean;
}

/** A lease keeper on its own thread and connection to the database at `url`. */
export function leaseKeeperThread(url: string, opts: LeaseKeeperThreadOptions = {}): LeaseKeeperFactory {
  const { RENEW_LEASES } = leaseRenewalSql(schemaSql(opts.schema));
  const statement = opts.prepared === false ? { text: RENEW_LEASES.text } : RENEW_LEASES;
  return (owner, intervalMs, listener) =>
    new ThreadLeaseKeeper(url, statement, owner, intervalMs, listener, opts.stallLimitMs ?? 3 * owner.leaseMs);
}
