/**
 * The lease keeper off the main thread, with its own connection: a step that blocks the main event loop
 * (a tool doing a long synchronous computation) cannot stop the renewals, so the runs of a live worker
 * are never taken over just because it was busy. One statement per interval keeps every lease the
 * worker holds alive (RENEW_LEASES: it renews those no step renewed lately); the main thread says which
 * runs it holds and hears back which leases were lost and which runs have a cancel pending.
 *
 * It runs on the process's side thread (side-thread.ts), with the stall sampler and any other
 * worker's keeper, and loads `pg` by its resolved path, so it works the same under tsx, under vitest
 * and from the compiled package.
 */
import { createRequire } from 'node:module';
import { runOnSideThread, type SideProgram } from '../util/side-thread.ts';
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

/** The program on the side thread: its `data` is ThreadData, its messages on `port` ToThread/FromThread. */
const THREAD_SOURCE = `
const pg = require(data.pgPath);
const { url, statement, owner, intervalMs, withinMs, stallLimitMs } = data;
// The main thread says it is alive every interval. A main thread blocked for good (a tool stuck in a
// synchronous loop) must not hold its runs for ever: past the limit the leases are left to lapse, and
// other workers take the runs over (the attempt is given back if this worker ever wakes up).
let lastAlive = Date.now();
const held = new Map(data.held); // run id -> lease token
const cancelReported = new Set();
const followReported = new Set();
let client = null;
let connecting = null;
let timer = null;
let closing = false;

// A server that does not answer the goodbye must not keep the socket (and a connection slot) open
// while the thread serves other programs: past a second it is destroyed.
function hangUp(c) {
  const cut = setTimeout(() => c.connection.stream.destroy(), 1000);
  return c.end().catch(() => {}).finally(() => clearTimeout(cut));
}

function disconnect() {
  const c = client;
  client = null;
  if (c) hangUp(c);
}

// One connection: a round that starts while the first connect is under way waits for that one.
function connection() {
  if (client) return Promise.resolve(client);
  return (connecting ??= connect().finally(() => (connecting = null)));
}

async function connect() {
  const c = new pg.Client({ connectionString: url, application_name: 'durable-agent-lease-keeper', query_timeout: Math.max(intervalMs, 1000) });
  c.on('error', () => { if (client === c) disconnect(); });
  await c.connect();
  if (closing) {
    hangUp(c);
    throw new Error('closed');
  }
  client = c;
  return c;
}

// Ends the program: the thread may go on serving others, so nothing of this one may be left running.
function stop() {
  closing = true;
  if (timer) clearTimeout(timer);
  const c = client;
  client = null;
  return c ? hangUp(c) : Promise.resolve();
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
        port.postMessage({ type: 'lost', runId, token });
      });
      for (const r of rows) {
        if (r.followed && !followReported.has(r.id)) {
          followReported.add(r.id);
          port.postMessage({ type: 'followed', runId: r.id });
        }
        if (r.cancel_requested && !cancelReported.has(r.id)) {
          cancelReported.add(r.id);
          port.postMessage({ type: 'cancel', runId: r.id });
        }
      }
    } catch (e) {
      disconnect();
      // A round cut off by this program's own end (its connection hung up under the query) failed nothing.
      if (!closing) port.postMessage({ type: 'failed', message: e && e.message ? e.message : String(e) });
    }
  }
  if (!closing) timer = setTimeout(round, Math.max(0, intervalMs - (Date.now() - started)));
}

port.on('message', (m) => {
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
    stop().finally(() => port.close());
  }
});
port.on('close', () => {
  if (!closing) stop();
});
// Connected before the first claim's lease needs renewing: a connection made at the first round
// (under load, with the main thread busy) could come too late for it.
connection().then(
  () => port.postMessage({ type: 'ready' }),
  (e) => port.postMessage({ type: 'failed', message: e && e.message ? e.message : String(e) }),
);
// A program started again after its thread died (an interval later) holds leases already: as little
// as a third of a lease may be left of them, which another interval's wait could use up; it renews at once.
timer = setTimeout(round, held.size > 0 ? 0 : intervalMs);
`;

const pgPath = createRequire(import.meta.url).resolve('pg');

/** How long close() waits for the program to hang up its connection before letting go of it. */
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
  private program: SideProgram | null = null;
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
    const program = runOnSideThread(THREAD_SOURCE, data);
    program.port.on('message', (m: FromThread) => this.receive(m));
    program.port.unref();
    // Its thread died, or it ended without being told (it failed as it started): start again after an
    // interval (not in a tight loop), with the same leases.
    void program.ended.then((error) => {
      if (this.program !== program || this.closed) return;
      this.program = null;
      program.release();
      if (error) {
        this.markReady();
        this.listener.failed(error);
      }
      this.restart = setTimeout(() => this.spawn(), this.intervalMs);
      this.restart.unref();
    });
    this.program = program;
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
        // Told after close (a round in flight as the program ended): nobody renews any more anyway.
        if (!this.closed) this.listener.failed(new Error(`lease renewal failed: ${m.message}`));
        break;
    }
  }

  private send(m: ToThread): void {
    this.program?.port.postMessage(m);
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
    const program = this.program;
    this.program = null;
    if (!program) return;
    // The program hangs up its connection, then its port; one that has not within CLOSE_TIMEOUT_MS is let go of.
    let timer: NodeJS.Timeout | undefined;
    program.port.postMessage({ type: 'close' } satisfies ToThread);
    await Promise.race([program.ended, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS)))]);
    clearTimeout(timer);
    program.release();
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

/** A lease keeper on the side thread, with its own connection to the database at `url`. */
export function leaseKeeperThread(url: string, opts: LeaseKeeperThreadOptions = {}): LeaseKeeperFactory {
  const { RENEW_LEASES } = leaseRenewalSql(schemaSql(opts.schema));
  const statement = opts.prepared === false ? { text: RENEW_LEASES.text } : RENEW_LEASES;
  return (owner, intervalMs, listener) =>
    new ThreadLeaseKeeper(url, statement, owner, intervalMs, listener, opts.stallLimitMs ?? 3 * owner.leaseMs);
}
