/**
 * A run's live events: `GET /api/runs/{id}/events` as Server-Sent Events (Accept: text/event-stream)
 * or as JSON pages, and `GET /api/runs/{id}/ui-stream` in the AI SDK's UI message stream protocol.
 * The run is found and checked to be the caller's before these handlers run (run-access.ts). Streams
 * end after run.finished; a client that drops reconnects with Last-Event-ID (or ?after) and misses
 * nothing. A stream also ends, at once, when the API key it was opened with is revoked or its run is
 * deleted (event-hub.ts): what a new request would be refused is not served by an old one either.
 */
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { isFinished, KEEP_ALIVE_MS, sseFrame } from '../events/protocol.ts';
import { UI_MESSAGE_STREAM_HEADER, UI_STREAM_DONE, uiFrame, UiStreamMapper } from '../events/ui-stream.ts';
import type { RunEvents, StoredEvent } from '../store/run-events.ts';
import type { Caller } from './auth.ts';
import type { EventHub } from './event-hub.ts';
import { defineRunRoute, type ApiRoute, type RouteResult } from './route.ts';
import { RunParams } from './schemas.ts';
import { EventsQuery, lastEventId, RunEventPage } from './schemas-events.ts';
import { z } from 'zod';

export interface EventsDeps {
  events: Pick<RunEvents, 'page'> & Partial<Pick<RunEvents, 'watch'>>;
  hub: EventHub;
  /** @unit milliseconds — how often an idle stream gets a comment line; default KEEP_ALIVE_MS (15 s). */
  keepAliveMs?: number | undefined;
}

/** A reader this far behind (bytes not yet taken by its socket) is cut off; it reconnects from its last id. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

const SSE_HEADERS = { 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' };

/** Each event's SSE frame is built once, however many readers it goes to. */
const frames = new WeakMap<StoredEvent, string>();
function frameOf(e: StoredEvent): string {
  let f = frames.get(e);
  if (f === undefined) frames.set(e, (f = sseFrame(e.id, e.type, e.data)));
  return f;
}

/**
 * A stream that follows the run from `after` for `caller`, writes what `write` makes of each batch,
 * and ends after run.finished, or when the caller may no longer read the run.
 */
function follow(
  { hub, keepAliveMs }: EventsDeps,
  caller: Caller,
  runId: string,
  after: number,
  first: string,
  write: (events: readonly StoredEvent[], finished: boolean) => string,
): PassThrough {
  const out = new PassThrough();
  out.write(first);
  const keepAlive = setInterval(() => out.write(': keep-alive\n\n'), keepAliveMs ?? KEEP_ALIVE_MS);
  const following = hub.follow(
    runId as never,
    after,
    {
      deliver(events) {
        if (out.destroyed || out.writableEnded) return;
        const end = events.findIndex(isFinished);
        const batch = end === -1 ? events : events.slice(0, end + 1);
        out.write(write(batch, end !== -1));
        if (end !== -1) out.end();
        else if (out.writableLength > MAX_BUFFERED_BYTES) out.destroy();
      },
      failed() {
        // The client reconnects (EventSource does by itself) and resumes from its last id.
        out.end();
      },
      withdrawn(reason) {
        // A comment line, which every SSE reader skips, says why to whoever reads the raw stream; the
        // client's reconnect is then refused (401 or 404), which stops an EventSource for good.
        if (!out.destroyed && !out.writableEnded) out.end(`: closed: ${reason}\n\n`);
      },
    },
    { keyId: caller.keyId },
  );
  out.on('close', () => {
    clearInterval(keepAlive);
    following.close();
  });
  out.on('finish', () => {
    clearInterval(keepAlive);
    following.close();
  });
  return out;
}

function streamResult(body: PassThrough, headers: Record<string, string> = {}): RouteResult {
  return { body, contentType: 'text/event-stream; charset=utf-8', headers: { ...SSE_HEADERS, ...headers } };
}

const wantsEventStream = (accept: string | undefined) => accept !== undefined && /\btext\/event-stream\b/i.test(accept);

/** The watcher the JSON page readers of this process register runs under (an event hub has its own). */
const JSON_READERS = randomUUID();
/** @unit milliseconds — how long a JSON page read keeps its run followed: a poller reads far more often. */
const JSON_FOLLOW_MS = 60_000;

export function eventRoutes(deps: EventsDeps): ApiRoute[] {
  const { events } = deps;
  return [
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/events',
      operationId: 'getRunEvents',
      summary:
        "The run's live events. With Accept: text/event-stream, Server-Sent Events (id, event, data) from after Last-Event-ID or ?after: " +
        'what is stored, then live, a comment line every 15 s, closed after run.finished (or at once when the key it was opened with is revoked or the run deleted). Otherwise one JSON page after ?after.',
      params: RunParams,
      query: EventsQuery,
      responses: { 200: { description: 'A page of events (JSON form), or the event stream (text/event-stream).', schema: RunEventPage } },
      async handle({ run, query, headers, raw, caller }) {
        const after = lastEventId(headers['last-event-id']) ?? query.after ?? 0;
        if (wantsEventStream(headers.accept)) {
          raw?.socket.setTimeout(0); // long-lived: the keep-alive comments show the peer is still there
          return streamResult(follow(deps, caller, run.id, after, 'retry: 1000\n\n', (batch) => batch.map(frameOf).join('')));
        }
        const page = await events.page(run.id, after, query.limit);
        const finished = page.length > 0 && isFinished(page[page.length - 1]!);
        // A reader polling the pages follows the run as a stream's reader does: its text is written
        // as it streams while the polls keep coming (see JSON_FOLLOW_MS).
        if (!finished) await events.watch?.([run.id], JSON_READERS, JSON_FOLLOW_MS).catch(() => {});
        // Assembled as text: the data are stored as JSON text already.
        const items = page.map((e) => `{"id":${e.id},"type":${JSON.stringify(e.type)},"data":${e.data}}`).join(',');
        return { body: `{"events":[${items}],"finished":${finished}}`, contentType: 'application/json; charset=utf-8' };
      },
    }),
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/ui-stream',
      operationId: 'getRunUiStream',
      summary:
        "The run in the AI SDK's UI message stream protocol (header x-vercel-ai-ui-message-stream: v1), from its start: point useChat's " +
        'transport here to show a run, live and resumable.',
      params: RunParams,
      responses: {
        200: {
          description: 'UI message stream chunks as Server-Sent Events, ending with [DONE].',
          contentType: 'text/event-stream',
          schema: z.string(),
        },
      },
      async handle({ run, raw, caller }) {
        raw?.socket.setTimeout(0);
        const mapper = new UiStreamMapper(run.id);
        const body = follow(deps, caller, run.id, 0, ': durable-agent run\n\n', (batch, finished) => {
          const chunks = mapper.map(batch.map((e) => ({ type: e.type, data: JSON.parse(e.data) as unknown })));
          return chunks.map(uiFrame).join('') + (finished ? UI_STREAM_DONE : '');
        });
        return streamResult(body, UI_MESSAGE_STREAM_HEADER);
      },
    }),
  ];
}
