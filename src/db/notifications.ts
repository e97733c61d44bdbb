import pg from 'pg';
import { PG_TYPES } from './pg-types.ts';

export const RUN_QUEUED_CHANNEL = 'durable_agent_run_queued';
/** Payload: the id of a run that just reached a terminal status. */
export const RUN_FINISHED_CHANNEL = 'durable_agent_run_finished';

export interface Subscription {
  close(): Promise<void>;
}

/**
 * LISTENs on a channel with a dedicated connection (LISTEN does not survive a pooled client being
 * handed to someone else), reconnecting after a failure. `onNotify` gets each notification's payload,
 * and is also called without one after every (re)connect, since notifications sent while
 * disconnected are lost.
 */
export function subscribe(url: string, channel: string, onNotify: (payload?: string) => void, onError: (e: Error) => void): Subscription {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (delayMs: number): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url, application_name: 'durable-agent-listener', types: PG_TYPES });
    c.on('notification', (n) => onNotify(n.payload));
    c.on('error', (e) => {
      onError(e);
      c.end().catch(() => {});
      if (client === c) schedule(Math.min(delayMs * 2, 30_000));
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (closed) {
        await c.end();
        return;
      }
      client = c;
      onNotify();
    } catch (e) {
      onError(e as Error);
      await c.end().catch(() => {});
      schedule(Math.min(delayMs * 2, 30_000));
    }
  };
  const schedule = (delayMs: number) => {
    client = null;
    if (!closed) retry = setTimeout(() => void connect(delayMs), delayMs);
  };

  void connect(500);
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
