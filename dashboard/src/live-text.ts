/**
 * Follows a run's events (GET /api/runs/{id}/events as Server-Sent Events) and folds them with the
 * server's own EventFold: for each model step only the latest attempt that was not abandoned counts,
 * so the text shown is the text that stands. EventSource cannot send the API key as a header, so the
 * stream is read with fetch(); after a drop it resumes with Last-Event-ID from the last event folded.
 * It ends at run.finished (or when stopped).
 */
import { apiKey } from './api.ts';
import { EventFold, type RunFold } from './events/fold.ts';

export interface RunEventsListener {
  /** The fold after each event that changes the text, and at run.finished. */
  text(fold: RunFold): void;
  /** An event that changes the run's steps or status (a step started or finished, waiting, resumed, finished). */
  changed(type: string): void;
  /** Whether the stream is connected: while it is not, the page polls. */
  connected(ok: boolean): void;
}

/** @unit milliseconds — the wait before reconnecting after a drop. */
const RETRY_MS = 1000;
const CHANGES = new Set(['step.started', 'step.finished', 'run.waiting', 'run.resumed', 'run.finished']);

interface Frame {
  id: number;
  type: string;
  data: unknown;
}

/** Parses the complete frames at the start of `buffer`; returns them and the incomplete rest. */
export function parseFrames(buffer: string): { frames: Frame[]; rest: string } {
  const frames: Frame[] = [];
  const blocks = buffer.replace(/\r\n?/g, '\n').split('\n\n');
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    let id = 0;
    let type = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = Number(value);
      else if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
    }
    if (id > 0 && data.length) frames.push({ id, type, data: JSON.parse(data.join('\n')) as unknown });
  }
  return { frames, rest };
}

export function followRunEvents(runId: string, listener: RunEventsListener): () => void {
  const fold = new EventFold();
  const abort = new AbortController();
  let done = false;
  let drawn = '';

  const onFrame = (f: Frame) => {
    fold.add(f);
    const r = fold.result;
    const key = `${r.finished ? 'end' : ''}:${r.steps.length}:${r.text}`;
    if (key !== drawn) listener.text(r);
    drawn = key;
    if (CHANGES.has(f.type)) listener.changed(f.type);
    if (f.type === 'run.finished') done = true;
  };

  const once = async () => {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    const key = apiKey.get();
    if (key) headers.authorization = `Bearer ${key}`;
    const lastId = fold.result.lastId;
    if (lastId > 0) headers['last-event-id'] = String(lastId);
    const res = await fetch(`/api/runs/${encodeURIComponent(runId)}/events`, {
      headers,
      signal: abort.signal,
      credentials: 'same-origin',
      cache: 'no-store',
    });
    if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
    listener.connected(true);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done: ended } = await reader.read();
      if (ended) break;
      const parsed = parseFrames(buffer + value);
      buffer = parsed.rest;
      for (const f of parsed.frames) onFrame(f);
      if (done) {
        await reader.cancel().catch(() => {});
        return;
      }
    }
  };

  void (async () => {
    while (!done && !abort.signal.aborted) {
      try {
        await once();
      } catch {
        if (abort.signal.aborted) return;
      }
      if (done || abort.signal.aborted) return;
      // Dropped (a restart, a proxy's timeout) or refused: the page polls meanwhile; then try again.
      listener.connected(false);
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  })();

  return () => abort.abort();
}
