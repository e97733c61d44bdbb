/** An API server with the run events routes on a real port, for stream tests. */
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { EventHub } from '../../src/api/event-hub.ts';
import { createServer } from '../../src/api/server.ts';
import type { Authenticator } from '../../src/api/auth.ts';
import { createPool } from '../../src/db/pool.ts';
import { ReaderAccess } from '../../src/store/reader-access.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunEvents } from '../../src/store/run-events.ts';
import { RunRecords } from '../../src/store/run-records.ts';

export interface EventsApi {
  url: string;
  hub: EventHub;
  pool: pg.Pool;
  /** Cuts every open connection (readers must reconnect). */
  dropConnections(): void;
  close(): Promise<void>;
}

/** The API as one process would run it: its own small pool and one event hub (one LISTEN connection). */
export async function startEventsApi(
  databaseUrl: string,
  opts: { poolSize?: number; auth?: Authenticator; keepAliveMs?: number; pollMs?: number; listen?: boolean } = {},
): Promise<EventsApi> {
  const pool = createPool(databaseUrl, opts.poolSize ?? 4);
  const events = new RunEvents(pool);
  const hub = new EventHub(events, {
    databaseUrl: opts.listen === false ? null : databaseUrl,
    access: new ReaderAccess(pool),
    ...(opts.pollMs ? { pollMs: opts.pollMs } : {}),
  });
  const app = createServer({
    store: new RunRecords(pool),
    listing: new RunListing(pool),
    deletion: new RunDeletion(pool),
    defaults: { agent: 'demo', model: 'claude-sonnet-4-6', tokenBudget: 100_000, timeoutSeconds: 600, maxSteps: 10 },
    checkDatabase: async () => {},
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    logger: false,
    runEvents: { events, hub, keepAliveMs: opts.keepAliveMs },
    ...(opts.auth ? { auth: opts.auth } : {}),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hub,
    pool,
    dropConnections: () => app.server.closeAllConnections(),
    async close() {
      await hub.close();
      await app.close();
      await pool.end();
    },
  };
}

export interface SseEvent {
  id: number;
  type: string;
  data: Record<string, unknown>;
}

/** Reads an SSE response to its end (or until `stopAfter` events), parsing frames; `onEvent` hears each as it comes. */
export async function readSse(
  url: string,
  headers: Record<string, string> = {},
  stopAfter = Infinity,
  onEvent?: (e: SseEvent) => void,
): Promise<{ events: SseEvent[]; comments: number; closedByServer: boolean }> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const events: SseEvent[] = [];
  let comments = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(
          frame
            .split('\n')
            .filter((l) => !l.startsWith(':'))
            .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
        );
        if (frame.startsWith(':')) comments++;
        if (fields.id === undefined) continue;
        events.push({ id: Number(fields.id), type: fields.event!, data: JSON.parse(fields.data!) });
        onEvent?.(events.at(-1)!);
        if (events.length >= stopAfter) {
          controller.abort();
          return { events, comments, closedByServer: false };
        }
      }
    }
  } catch (e) {
    if (!controller.signal.aborted) throw e;
  }
  return { events, comments, closedByServer: true };
}
