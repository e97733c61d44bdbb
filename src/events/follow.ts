/**
 * `followRun`: a run's events as an async iterator, over the SSE form of GET /api/runs/{id}/events.
 * A dropped connection is reconnected with Last-Event-ID, so every event comes exactly once, in
 * order; the iterator ends after run.finished. Runs anywhere `fetch` does (Node 20, browsers).
 */
import { isFinished, type RunEvent, type UnknownRunEvent } from './protocol.ts';

export interface FollowRunOptions {
  /** Start after this event id (default: from the beginning). */
  after?: number;
  /** An API key, sent as `Authorization: Bearer`. */
  apiKey?: string;
  signal?: AbortSignal;
  /** @unit milliseconds — wait before reconnecting (doubling up to 30 s while the server cannot be reached). Default 1000. */
  retryMs?: number;
  /** Told of each reconnect and why (the stream broke, the server could not be reached). */
  onReconnect?: (error: Error, after: number) => void;
  fetch?: typeof fetch;
}

/** The server refused the request (a 4xx: unknown run, bad key): reconnecting would not help. */
export class FollowRunError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'FollowRunError';
  }
}

/** Parses Server-Sent Events from text chunks; calls `on` for each event with an id. */
export class SseParser {
  private buffer = '';
  private id: string | null = null;
  private event = 'message';
  private data: string[] = [];

  constructor(private readonly on: (e: { id: string | null; event: string; data: string }) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.on({ id: this.id, event: this.event, data: this.data.join('\n') });
      this.event = 'message';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id') this.id = value;
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });

export async function* followRun(baseUrl: string, id: string, opts: FollowRunOptions = {}): AsyncGenerator<RunEvent | UnknownRunEvent> {
  const fetchFn = opts.fetch ?? fetch;
  const base = opts.retryMs ?? 1000;
  let after = opts.after ?? 0;
  let wait = base;
  for (;;) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (after > 0) headers['last-event-id'] = String(after);
    if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
    let failure: Error;
    try {
      const res = await fetchFn(`${baseUrl.replace(/\/$/, '')}/api/runs/${encodeURIComponent(id)}/events`, {
        headers,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      if (res.status >= 400 && res.status < 500) {
        const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
        throw new FollowRunError(body?.error?.message ?? `HTTP ${res.status}`, res.status);
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      wait = base;
      const queue: (RunEvent | UnknownRunEvent)[] = [];
      const parser = new SseParser((e) => {
        if (e.id === null) return;
        queue.push({ id: Number(e.id), type: e.event, data: JSON.parse(e.data) } as RunEvent);
      });
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        parser.push(decoder.decode(chunk, { stream: true }));
        while (queue.length > 0) {
          const e = queue.shift()!;
          if (e.id <= after) continue;
          after = e.id;
          yield e;
          if (isFinished(e)) return;
        }
      }
      failure = new Error('the stream ended before run.finished');
    } catch (e) {
      if (e instanceof FollowRunError || opts.signal?.aborted) throw e;
      failure = e as Error;
    }
    opts.onReconnect?.(failure, after);
    await sleep(wait, opts.signal);
    wait = Math.min(wait * 2, 30_000);
  }
}
