/**
 * An open stream lasts only while a new request would be let in: its key revoked (the way `keys
 * revoke` does it, from another connection) or its run deleted (DELETE, or the retention purge), the
 * server ends the stream within 5 s, SSE and UI message stream alike; streams of other keys go on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authByKeys } from '../../src/api/auth.ts';
import { loadConfig } from '../../src/config/environment.ts';
import type { RunId } from '../../src/domain/types.ts';
import { ApiKeys, type NewApiKey } from '../../src/store/api-keys.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { startRuntime } from '../../src/runtime/start-runtime.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';
import { startEventsApi, type EventsApi } from '../support/events-api.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

/** @unit milliseconds — how soon a stream must end after its key or run is gone. */
const LIMIT_MS = 5_000;

let db: TestDatabase;
let keys: ApiKeys;
/** Its poll is far away: what ends its streams within the limit is the announcement alone. */
let api: EventsApi;

beforeAll(async () => {
  db = await testDatabase();
  keys = new ApiKeys(db.pool);
  api = await startEventsApi(db.url, { auth: authByKeys(keys, { alwaysRequired: true }), pollMs: 60_000 });
});
afterAll(async () => {
  await api?.close();
  await db?.close();
});

interface OpenStream {
  /** The whole body once the server ends the response. */
  body: Promise<string>;
  close(): void;
}

async function openStream(url: string, key: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  const controller = new AbortController();
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${key}`, ...headers },
    signal: controller.signal,
  });
  expect(res.status, await (res.ok ? '' : res.text())).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const body = (async () => {
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  body.catch(() => {});
  return { body, close: () => controller.abort() };
}

/** The stream's body if the server ends it within `ms`, else null (the stream is then dropped). */
async function endsWithin(stream: OpenStream, ms: number): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    const body = await Promise.race([stream.body, deadline]);
    if (body === null) stream.close();
    return body;
  } finally {
    clearTimeout(timer);
  }
}

const bearer = (key: NewApiKey) => ({ authorization: `Bearer ${key.key}` });

/** A finished run and the id of its last event (run.finished). */
async function finishedRun(tenant: string): Promise<{ id: RunId; last: number }> {
  const run = await newRun(db.records, 'find x', { tenant });
  await db.records.cancel(run.id);
  const { rows } = await db.pool.query<{ last: string }>('SELECT max(id) AS last FROM durable_agent.run_event WHERE run_id = $1', [run.id]);
  return { id: run.id, last: Number(rows[0]!.last) };
}

/** Deletion announces only runs an event hub follows: the hub registers its run just after the stream opens. */
const followed = (id: RunId) =>
  waitFor(
    'the run to be followed',
    async () => (await db.pool.query('SELECT 1 FROM durable_agent.run_event_watch WHERE run_id = $1', [id])).rowCount,
  );

describe.each([
  ['SSE', 'events'],
  ['the UI message stream', 'ui-stream'],
])('%s of a run', (_, route) => {
  const url = (id: string) => `${api.url}/api/runs/${id}/${route}`;

  it("ends within 5 s of its key being revoked; a stream of another key goes on to the run's end, and the revoked key cannot reconnect", async () => {
    // A run no worker has claimed: its streams stay open, with nothing to end them.
    const run = await newRun(db.records);
    const revoked = await keys.create('default', `revoked ${route}`);
    const kept = await keys.create('default', `kept ${route}`);
    const doomed = await openStream(url(run.id), revoked.key);
    const other = await openStream(url(run.id), kept.key);

    const revokedAt = Date.now();
    await keys.revoke(revoked.id);
    const body = await endsWithin(doomed, LIMIT_MS);
    expect(body, 'the stream of the revoked key was still open after 5 s').not.toBeNull();
    expect(Date.now() - revokedAt).toBeLessThan(LIMIT_MS);
    expect(body).toContain(': closed: the API key was revoked');

    const cancel = await fetch(`${api.url}/api/runs/${run.id}/cancel`, { method: 'POST', headers: bearer(kept) });
    expect(cancel.status).toBe(202);
    const rest = await endsWithin(other, 10_000);
    expect(rest).toContain(route === 'events' ? 'event: run.finished' : '[DONE]');
    expect(rest).not.toContain(': closed:');

    const again = await fetch(url(run.id), { headers: { accept: 'text/event-stream', ...bearer(revoked) } });
    expect(again.status).toBe(401);
  });
});

describe('a deleted run', () => {
  it('ends an SSE stream within 5 s of DELETE /api/runs/{id}: a reader that came back after run.finished (as an EventSource does) is not left open', async () => {
    const key = await keys.create('default', 'deleter');
    const run = await finishedRun('default');
    const stream = await openStream(`${api.url}/api/runs/${run.id}/events`, key.key, { 'last-event-id': String(run.last) });
    await followed(run.id);

    const deletedAt = Date.now();
    const res = await fetch(`${api.url}/api/runs/${run.id}`, { method: 'DELETE', headers: bearer(key) });
    expect(res.status).toBe(204);
    const body = await endsWithin(stream, LIMIT_MS);
    expect(body, 'the stream of the deleted run was still open after 5 s').not.toBeNull();
    expect(Date.now() - deletedAt).toBeLessThan(LIMIT_MS);
    expect(body).toContain(': closed: the run was deleted');

    const again = await fetch(`${api.url}/api/runs/${run.id}/events`, { headers: { accept: 'text/event-stream', ...bearer(key) } });
    expect(again.status).toBe(404);
  });

  it('ends a UI message stream within 5 s of the retention purge taking the run (one finished before its events were recorded)', async () => {
    const key = await keys.create('purged', 'reader');
    const run = await finishedRun('purged');
    // What a database upgraded across the events migration holds for the runs it had finished.
    await db.pool.query('DELETE FROM durable_agent.run_event WHERE run_id = $1', [run.id]);
    const stream = await openStream(`${api.url}/api/runs/${run.id}/ui-stream`, key.key);
    await followed(run.id);

    const purgedAt = Date.now();
    const purged = await new RunDeletion(db.pool).purge(new Date(Date.now() + 60_000), { tenant: 'purged' });
    expect(purged.runs).toBe(1);
    const body = await endsWithin(stream, LIMIT_MS);
    expect(body, 'the stream of the purged run was still open after 5 s').not.toBeNull();
    expect(Date.now() - purgedAt).toBeLessThan(LIMIT_MS);
    expect(body).toContain(': closed: the run was deleted');
  });
});

describe('without announcements', () => {
  it('an API process that cannot LISTEN finds the revoked key on its poll and ends the stream', async () => {
    const polling = await startEventsApi(db.url, { auth: authByKeys(keys, { alwaysRequired: true }), listen: false, pollMs: 200 });
    try {
      const run = await newRun(db.records);
      const key = await keys.create('default', 'unannounced');
      const stream = await openStream(`${polling.url}/api/runs/${run.id}/events`, key.key);
      await keys.revoke(key.id);
      const body = await endsWithin(stream, LIMIT_MS);
      expect(body, 'the stream of the revoked key was still open after 5 s').not.toBeNull();
      expect(body).toContain(': closed: the API key was revoked');
    } finally {
      await polling.close();
    }
  });
});

describe('the API process as `serve` starts it', () => {
  it('ends a stream when its key is revoked from another connection, as `keys revoke` does', async () => {
    const runtime = await startRuntime(
      loadConfig({ DATABASE_URL: db.url, PORT: '0', AUTH: 'on', LOG_LEVEL: 'silent', LLM_PROVIDER: 'demo' }),
      {
        api: true,
        worker: false,
        llm: new ScriptedLlm(),
        agent: { system: null, tools: [] },
      },
    );
    try {
      const key = await keys.create('default', 'served');
      const created = await fetch(`${runtime.url}/api/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...bearer(key) },
        body: JSON.stringify({ input: 'x' }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const stream = await openStream(`${runtime.url}/api/runs/${id}/events`, key.key);
      await keys.revoke(key.id);
      const body = await endsWithin(stream, LIMIT_MS);
      expect(body, 'the stream of the revoked key was still open after 5 s').not.toBeNull();
      expect(body).toContain(': closed: the API key was revoked');
    } finally {
      await runtime.close();
    }
  });
});
