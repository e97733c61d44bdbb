import pg from 'pg';
import { PG_TYPES } from './pg-types.ts';

/** A run became claimable (queued, or handed back). The payload is empty, so a burst folds into one. */
export const RUN_QUEUED_CHANNEL = 'durable_agent_run_queued';
/** Payload: the id of a run that just reached a terminal status. */
export const RUN_FINISHED_CHANNEL = 'durable_agent_run_finished';
/** A cancel was requested for a RUNNING run; the payload is its id (see migration 0004). */
export const RUN_CANCEL_CHANNEL = 'durable_agent_run_cancel';
/** New events of a followed run were committed; the payload is "<run id> <highest event id>" (see migration 0014). */
export const RUN_EVENT_CHANNEL = 'durable_agent_run_event';
/** An event hub began to follow a run's live events; the payload is its id (see migration 0015). */
export const RUN_FOLLOWED_CHANNEL = 'durable_agent_run_followed';
/** An API key was revoked (or deleted); the payload is its id (see migration 0017). */
export const KEY_REVOKED_CHANNEL = 'durable_agent_key_revoked';
/** A run some event hub follows was deleted; the payload is its id (see migration 0017). */
export const RUN_DELETED_CHANNEL = 'durable_agent_run_deleted';
/** A schedule was made, changed or deleted (see migration 0021); the payload is empty. */
export const SCHEDULE_CHANGED_CHANNEL = 'durable_agent_schedule_changed';
/** A shared text of content_blob was deleted; the payload is its digest (see migration 0008). */
export const BLOB_DELETED_CHANNEL = 'durable_agent_blob_deleted';

/**
 * @unit milliseconds — how often what a LISTEN would have announced is looked for where no session can
 * LISTEN (a transaction pooler and no DATABASE_DIRECT_URL).
 */
export const POLL_WITHOUT_LISTEN_MS = 1000;

export interface Subscription {
  close(): Promise<void>;
}

export interface ListenOptions {
  /**
   * Called after every (re)connect: notifications sent while disconnected are lost, so whoever
   * listens must look for what it may have missed.
   */
  onConnect?: () => void;
  /** The connection failed or broke; the next try is `retryInMs` from now. */
  onError: (e: Error, retryInMs: number) => void;
  /** @unit milliseconds — first wait before reconnecting; it doubles per failure in a row. Default 500. */
  initialDelayMs?: number;
  /** @unit milliseconds — the wait never grows past this. Default 30000. */
  maxDelayMs?: number;
}

/**
 * LISTENs on channels with a dedicated connection (LISTEN does not survive a pooled client being
 * handed to someone else), reconnecting after a failure with a backoff that starts again from the
 * beginning after each successful connect. Each handler receives its notification's payload.
 *
 * With no `url` to hold a session on, nothing is announced: `onConnect`, which looks for whatever may
 * have been missed, is called every POLL_WITHOUT_LISTEN_MS instead.
 */
export function listen(
  url: string | null,
  handlers: Readonly<Record<string, (payload: string) => void>>,
  opts: ListenOptions,
): Subscription {
  if (url === null) return pollInstead(opts);
  const initialDelayMs = opts.initialDelayMs ?? 500;
  const maxDelayMs = opts.maxDelayMs ?? 30_000;
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let delayMs = initialDelayMs;

  const failed = (e: Error) => {
    client = null;
    if (closed) return;
    opts.onError(e, delayMs);
    retry = setTimeout(() => void connect(), delayMs);
    delayMs = Math.min(delayMs * 2, maxDelayMs);
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url, application_name: 'durable-agent-listener', types: PG_TYPES });
    c.on('notification', (n) => handlers[n.channel]?.(n.payload ?? ''));
    c.on('error', (e) => {
      c.end().catch(() => {});
      if (client === c) failed(e);
    });
    c.on('end', () => {
      if (client === c) failed(new Error('LISTEN connection ended'));
    });
    try {
      await c.connect();
      for (const channel of Object.keys(handlers)) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (e) {
      await c.end().catch(() => {});
      failed(e as Error);
      return;
    }
    if (closed) {
      await c.end().catch(() => {});
      return;
    }
    client = c;
    delayMs = initialDelayMs;
    opts.onConnect?.();
  };

  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}

function pollInstead(opts: ListenOptions): Subscription {
  const poll = setInterval(() => opts.onConnect?.(), POLL_WITHOUT_LISTEN_MS);
  poll.unref();
  const first = setImmediate(() => opts.onConnect?.());
  return {
    close() {
      clearInterval(poll);
      clearImmediate(first);
      return Promise.resolve();
    },
  };
}

/**
 * What a worker hears, on one connection: runs queued, cancels of RUNNING runs, runs an event hub
 * began to follow, and shared texts deleted. After every (re)connect, anything may have happened:
 * "queued" and "deleted" are announced; missed cancels and follows reach the worker with its next
 * lease renewal.
 */
export function listenForWorker(
  url: string | null,
  on: {
    runQueued(): void;
    cancelRequested(runId: string): void;
    runFollowed?(runId: string): void;
    blobDeleted?(digest: string | null): void;
  },
  onError: ListenOptions['onError'],
): Subscription {
  return listen(
    url,
    {
      [RUN_QUEUED_CHANNEL]: () => on.runQueued(),
      [BLOB_DELETED_CHANNEL]: (digest) => on.blobDeleted?.(digest),
      [RUN_FOLLOWED_CHANNEL]: (runId) => on.runFollowed?.(runId),
      // Last: a LISTEN on it as the connection's latest statement says the connection is ready (tests wait for that).
      [RUN_CANCEL_CHANNEL]: (runId) => on.cancelRequested(runId),
    },
    {
      onConnect: () => {
        on.runQueued();
        on.blobDeleted?.(null);
      },
      onError,
    },
  );
}
