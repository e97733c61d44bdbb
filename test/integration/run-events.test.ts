/**
 * A run's live events end to end: a worker streaming through AnthropicClient from the fake Messages API, an
 * API process serving the stream from PostgreSQL. Reconnects miss nothing and repeat nothing, a
 * retried stream is marked abandoned and folds to the output, hundreds of readers share one LISTEN
 * connection and the pool, the JSON form agrees with SSE, and a real EventSource follows the run.
 */
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ai6 from 'ai';
import * as ai7 from 'ai-7';
import type { UIMessage, UIMessageChunk } from 'ai';
import { foldEvents } from '../../src/events/fold.ts';
import { followRun } from '../../src/events/follow.ts';
import { createLlmClient } from '../../src/llm/index.ts';
import type { Worker } from '../../src/engine/worker.ts';
import type { RunId } from '../../src/domain/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { startEventsApi, readSse, type EventsApi, type SseEvent } from '../support/events-api.ts';
import { fake, startFakeAnthropic, warmUp, type FakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-events-0123456789abcdef';
const ANSWER = 'The three overdue tickets are ACME-101, ACME-102 and ACME-107, all waiting on the vendor.';
const VOID = 'Overdue are ACME-999 and some others';
const usage = { input_tokens: 800, output_tokens: 40 };

let db: TestDatabase;
let model: FakeAnthropic;
let api: EventsApi;
let worker: Worker;

beforeAll(async () => {
  db = await testDatabase();
  model = await startFakeAnthropic({ apiKey: API_KEY });
  await warmUp(model, API_KEY);
  api = await startEventsApi(db.url);
  const llm = createLlmClient({
    llmProvider: 'anthropic',
    anthropicApiKey: API_KEY,
    anthropicBaseUrl: model.url,
    demoLatencyMs: 0,
    llmStreaming: true,
    stepTimeoutMs: 10_000,
    maxAttempts: 3,
    retryBaseMs: 10,
    retryCapMs: 50,
  });
  worker = testWorker(db.store, llm, [], { name: 'events-worker', leaseMs: 5_000, pollIntervalMs: 50, databaseUrl: db.url });
  await worker.start();
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await model?.close();
  await db?.close();
});

const eventsUrl = (id: string) => `${api.url}/api/runs/${id}/events`;

async function runWith(...answers: Parameters<FakeAnthropic['enqueue']>): Promise<RunId> {
  model.reset();
  model.enqueue(...answers);
  return (await newRun(db.records)).id;
}

async function finished(id: RunId) {
  return waitFor(
    `run ${id} to end`,
    async () => {
      const run = await db.records.state(id);
      return ['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(run.status) && run;
    },
    30_000,
  );
}

const strip = (events: SseEvent[]) => events.map((e) => ({ id: e.id, type: e.type, data: e.data }));

describe('the event stream of a run', () => {
  it('a model stream that fails after a few deltas is retried: attempt 1 abandoned, the fold equals the output', async () => {
    const id = await runWith(fake.streamError({ ...fake.text(VOID, usage), stream: { deltaDelayMs: 10 } }, 3), {
      ...fake.text(ANSWER, usage),
      stream: { deltaDelayMs: 10 },
    });
    const seen: { id: number; type: string; data: unknown }[] = [];
    for await (const e of followRun(api.url, id)) seen.push(e);
    const run = await finished(id);
    expect(run.output).toBe(ANSWER);
    const types = seen.map((e) => e.type);
    expect(types[0]).toBe('run.started');
    expect(types.at(-1)).toBe('run.finished');
    expect(types.filter((t) => t === 'run.finished')).toHaveLength(1);
    const abandoned = seen.filter((e) => e.type === 'attempt.abandoned');
    expect(abandoned.map((e) => e.data)).toEqual([{ seq: 1, attempt: 1, reason: 'retry', error: 'overloaded_error (529)' }]);
    const deltas = seen.filter((e) => e.type === 'text.delta').map((e) => e.data as { attempt: number; text: string });
    expect(deltas.some((d) => d.attempt === 1)).toBe(true);
    expect(
      deltas
        .filter((d) => d.attempt === 2)
        .map((d) => d.text)
        .join(''),
    ).toBe(ANSWER);
    // Every delta of attempt 1 precedes its abandonment; step.finished follows the last delta.
    const ids = (p: (e: (typeof seen)[number]) => boolean) => seen.filter(p).map((e) => e.id);
    expect(Math.max(...ids((e) => e.type === 'text.delta' && (e.data as { attempt: number }).attempt === 1))).toBeLessThan(
      abandoned[0]!.id,
    );
    expect(Math.max(...ids((e) => e.type === 'text.delta'))).toBeLessThan(ids((e) => e.type === 'step.finished')[0]!);
    expect(foldEvents(seen).text).toBe(run.output);
    expect(seen.find((e) => e.type === 'run.finished')!.data).toEqual({
      status: 'SUCCEEDED',
      output: ANSWER,
      error: null,
      stopReason: 'end_turn',
    });
    // Ids strictly increase.
    expect(seen.every((e, i) => i === 0 || e.id > seen[i - 1]!.id)).toBe(true);
  });

  it('a reader that disconnects after k events and reconnects with Last-Event-ID sees every event exactly once, with the ids of a full replay', async () => {
    const id = await runWith({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 40 } });
    const first = await readSse(eventsUrl(id), {}, 3);
    expect(first.events).toHaveLength(3);
    const rest = await readSse(eventsUrl(id), { 'last-event-id': String(first.events[2]!.id) });
    expect(rest.closedByServer).toBe(true);
    const joined = [...first.events, ...rest.events];
    const full = await readSse(eventsUrl(id));
    expect(strip(joined)).toEqual(strip(full.events));
    expect(new Set(joined.map((e) => e.id)).size).toBe(joined.length);
    expect(full.events.at(-1)!.type).toBe('run.finished');
    expect(foldEvents(full.events).text).toBe((await finished(id)).output);
    // ?after works as Last-Event-ID does.
    const after = await readSse(`${eventsUrl(id)}?after=${first.events[2]!.id}`);
    expect(strip(after.events)).toEqual(strip(rest.events));
  });

  it('the JSON form pages correctly and agrees with SSE', async () => {
    const id = await runWith({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 5 } });
    await finished(id);
    const sse = await readSse(eventsUrl(id));
    const pages: { events: SseEvent[]; finished: boolean }[] = [];
    let after = 0;
    for (;;) {
      const res = await fetch(`${eventsUrl(id)}?after=${after}&limit=2`, { headers: { accept: 'application/json' } });
      expect(res.status).toBe(200);
      const page = (await res.json()) as { events: SseEvent[]; finished: boolean };
      pages.push(page);
      if (page.events.length === 0 || page.finished) break;
      after = page.events.at(-1)!.id;
    }
    expect(pages.flatMap((p) => p.events)).toEqual(strip(sse.events));
    expect(pages.every((p) => p.events.length <= 2)).toBe(true);
    expect(pages.map((p) => p.finished)).toEqual([...pages.slice(1).map(() => false), true]);
    const unknown = await fetch(`${api.url}/api/runs/00000000-0000-4000-8000-000000000000/events`, {
      headers: { accept: 'text/event-stream' },
    });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('hundreds of concurrent readers of one live run all get the whole stream; the database connections do not grow with them', async () => {
    const connections = async () =>
      Number(
        (await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()`)).rows[0]!.n,
      );
    const id = await runWith({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 60 } });
    const listeners = async () =>
      Number(
        (
          await db.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'durable-agent-listener' AND query LIKE 'LISTEN%'`,
          )
        ).rows[0]!.n,
      );
    let oneServed = false;
    const one = readSse(eventsUrl(id), {}, Infinity, () => (oneServed = true));
    // One reader served and the hub's LISTEN connection up (beside the worker's): what a first reader costs.
    await waitFor("the first reader's first event", () => oneServed, 10_000);
    await waitFor("the hub's LISTEN connection", async () => (await listeners()) >= 2, 10_000);
    const withOne = await connections();
    const served = new Set<number>();
    const readers = Array.from({ length: 300 }, (_, i) => readSse(eventsUrl(id), {}, Infinity, () => served.add(i)));
    await waitFor("every reader's first event", () => served.size === 300, 20_000);
    const withMany = await connections();
    const all = await Promise.all([one, ...readers]);
    const reference = strip((await readSse(eventsUrl(id))).events);
    for (const r of all) expect(strip(r.events)).toEqual(reference);
    // The API's pool has 4 connections: whatever the readers do, no more than those are added.
    expect(withMany - withOne).toBeLessThanOrEqual(4);
    expect(api.hub.followedRuns).toBe(0);
  });

  it('a real EventSource follows the run and reconnects with Last-Event-ID when the connection drops', async () => {
    const id = await runWith({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 50 } });
    const got: { id: number; type: string; data: unknown }[] = [];
    let opens = 0;
    await new Promise<void>((resolve, reject) => {
      const source = new EventSource(eventsUrl(id));
      source.onopen = () => opens++;
      for (const type of ['run.started', 'step.started', 'text.delta', 'step.finished', 'run.finished', 'attempt.abandoned']) {
        source.addEventListener(type, (m) => {
          got.push({ id: Number(m.lastEventId), type, data: JSON.parse(m.data) });
          if (got.length === 3) api.dropConnections();
          if (type === 'run.finished') {
            source.close();
            resolve();
          }
        });
      }
      setTimeout(() => reject(new Error(`timed out with ${got.length} events`)), 20_000);
    });
    expect(opens).toBeGreaterThanOrEqual(2);
    const full = await readSse(eventsUrl(id));
    expect(got).toEqual(strip(full.events));
    expect(foldEvents(got).text).toBe(ANSWER);
  });

  it.each([
    ['6', ai6.readUIMessageStream],
    ['7', ai7.readUIMessageStream as unknown as typeof ai6.readUIMessageStream],
  ])(
    'the UI message stream, read by the AI SDK %s, shows the answer once and none of the abandoned text',
    async (_, readUIMessageStream) => {
      const id = await runWith(fake.streamError({ ...fake.text(VOID, usage), stream: { deltaDelayMs: 10 } }, 3), {
        ...fake.text(ANSWER, usage),
        stream: { deltaDelayMs: 10 },
      });
      const res = await fetch(`${api.url}/api/runs/${id}/ui-stream`);
      expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const chunks = sseChunks(res.body!);
      let last: UIMessage | undefined;
      for await (const message of readUIMessageStream({ stream: chunks, terminateOnError: true })) last = message;
      const text = last!.parts
        .filter((p) => p.type === 'text')
        .map((p) => (p as { text: string }).text)
        .join('');
      expect(text).toBe((await finished(id)).output);
      expect(text).not.toContain('ACME-999');
      // Replayed after the end, the abandoned attempt's text is not sent at all.
      const replay = await (await fetch(`${api.url}/api/runs/${id}/ui-stream`)).text();
      expect(replay).not.toContain('ACME-999');
      expect(replay.trimEnd().endsWith('data: [DONE]')).toBe(true);
    },
  );
});

/** SSE `data:` lines as the AI SDK's chunk stream (what its transports do). */
function sseChunks(body: ReadableStream<Uint8Array>): ReadableStream<UIMessageChunk> {
  let buffer = '';
  return body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).pipeThrough(
    new TransformStream<string, UIMessageChunk>({
      transform(text, controller) {
        buffer += text;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of frame.split('\n')) {
            if (!line.startsWith('data: ')) continue;
            const data = line.slice(6);
            if (data !== '[DONE]') controller.enqueue(JSON.parse(data) as UIMessageChunk);
          }
        }
      },
    }),
  );
}

describe('keep-alive', () => {
  it('an idle stream gets comment lines between events', async () => {
    const quiet = await startEventsApi(db.url, { keepAliveMs: 40 });
    try {
      const id = await runWith({ ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 150 } });
      const { comments, closedByServer } = await readSse(`${quiet.url}/api/runs/${id}/events`);
      expect(closedByServer).toBe(true);
      expect(comments).toBeGreaterThan(2);
    } finally {
      await quiet.close();
    }
  });
});

describe('tenants', () => {
  it("another tenant's run answers 404 on the event routes, exactly as a run that does not exist", async () => {
    const { authByHook } = await import('../../src/api/auth.ts');
    const tenantApi = await startEventsApi(db.url, { auth: authByHook((req) => (req.headers['x-tenant'] as string | undefined) ?? null) });
    try {
      // Queued for later, so the worker leaves it alone; cancelled, so its stream is whole.
      const { rows } = await db.pool.query<{ id: RunId }>(
        `INSERT INTO durable_agent.run (id, input, model, token_budget, max_steps, deadline_at, run_at, tenant)
         VALUES (gen_random_uuid(), 'mine', 'm', 1000, 5, now() + interval '1 day', now() + interval '1 hour', 'acme') RETURNING id`,
      );
      const mine = { id: rows[0]!.id };
      await db.records.cancel(mine.id);
      for (const path of ['events', 'ui-stream']) {
        const other = await fetch(`${tenantApi.url}/api/runs/${mine.id}/${path}`, {
          headers: { 'x-tenant': 'globex', accept: 'text/event-stream' },
        });
        expect(other.status).toBe(404);
        expect(await other.json()).toEqual({ error: { code: 'not_found', message: `run ${mine.id} not found` } });
        const own = await fetch(`${tenantApi.url}/api/runs/${mine.id}/${path}`, { headers: { 'x-tenant': 'acme' } });
        expect(own.status).toBe(200);
        await own.text();
      }
      // A queued run cancelled by the API ends with run.finished too (written by the transaction that ends it).
      const page = (await (await fetch(`${tenantApi.url}/api/runs/${mine.id}/events`, { headers: { 'x-tenant': 'acme' } })).json()) as {
        events: SseEvent[];
        finished: boolean;
      };
      expect(page.finished).toBe(true);
      expect(page.events.map((e) => e.type)).toEqual(['run.finished']);
      expect(page.events[0]!.data).toMatchObject({ status: 'CANCELLED', output: null });
    } finally {
      await tenantApi.close();
    }
  });
});
