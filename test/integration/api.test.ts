import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiDeps, createServer } from '../../src/api/server.ts';
import type { RunId } from '../../src/domain/types.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const DEFAULTS = { agent: 'demo', model: 'default-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 };
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

function server(db: TestDatabase, extra: Partial<ApiDeps> = {}): FastifyInstance {
  const metrics = createMetrics(new RunStats(db.pool), { models: ['test-model'] });
  return createServer({
    store: db.records,
    listing: new RunListing(db.pool),
    defaults: DEFAULTS,
    checkDatabase: async () => {
      await db.pool.query('SELECT 1');
    },
    metrics: () => metrics.render(),
    logger: false,
    ...extra,
  });
}

const post = (app: FastifyInstance, url: string, body?: unknown) =>
  app.inject({
    method: 'POST',
    url,
    ...(body === undefined ? {} : { payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });

async function runCount(db: TestDatabase): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run');
  return rows[0]!.n;
}

let db: TestDatabase;
let app: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  app = server(db);
});
afterAll(async () => {
  await app.close();
  await db.close();
});

describe('POST /api/runs and GET /api/runs/{id}', () => {
  it('queues a run with the server defaults', async () => {
    const res = await post(app, '/api/runs', { input: 'Which acme tickets are overdue?' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({ id: expect.any(String), status: 'QUEUED' });
    expect(res.headers.location).toBe(`/api/runs/${body.id}`);
    const { rows } = await db.pool.query(
      `SELECT status, input, model, token_budget, max_steps, metadata, deadline_at - created_at AS timeout FROM durable_agent.run WHERE id = $1`,
      [body.id],
    );
    expect(rows[0]).toMatchObject({
      status: 'QUEUED',
      input: 'Which acme tickets are overdue?',
      model: 'default-model',
      token_budget: 5_000,
      max_steps: 20,
      metadata: {},
    });
    expect(rows[0].timeout).toMatchObject({ minutes: 2 });
  });

  it('keeps what the request sets, and shows the run', async () => {
    const created = await post(app, '/api/runs', {
      input: 'find x',
      model: 'claude-x',
      tokenBudget: 777,
      timeoutSeconds: 60,
      maxSteps: 3,
      metadata: { team: 'acme', tags: [1, 2] },
    });
    expect(created.statusCode).toBe(201);
    const res = await app.inject(`/api/runs/${created.json().id}`);
    expect(res.statusCode).toBe(200);
    const run = res.json();
    expect(run).toMatchObject({
      id: created.json().id,
      status: 'QUEUED',
      input: 'find x',
      model: 'claude-x',
      tokenBudget: 777,
      tokensUsed: 0,
      costUsd: 0,
      maxSteps: 3,
      finishedAt: null,
      output: null,
      error: null,
      stopReason: null,
      attempts: 0,
      cancelRequested: false,
      metadata: { team: 'acme', tags: [1, 2] },
    });
    expect(Date.parse(run.deadlineAt) - Date.parse(run.createdAt)).toBe(60_000);
    expect(run.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(run).not.toHaveProperty('lockedBy');
  });

  it('answers 404 for a run that does not exist', async () => {
    const res = await app.inject(`/api/runs/${UNKNOWN_ID}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'not_found', message: expect.stringContaining(UNKNOWN_ID) } });
  });
});

describe('GET /api/runs', () => {
  it('pages newest first with a status filter, and a cursor keeps microseconds', async () => {
    const own = await testDatabase();
    const api = server(own);
    try {
      const runs = [];
      for (let i = 0; i < 8; i++) runs.push(await newRun(own.records, `run ${i}`));
      // Five CANCELLED, three QUEUED; created one microsecond apart, which a millisecond cursor would lose.
      for (const [i, r] of runs.entries()) {
        await own.pool.query(
          `UPDATE durable_agent.run SET created_at = '2025-01-01T00:00:00.000000Z'::timestamptz + $2 * interval '1 microsecond' WHERE id = $1`,
          [r.id, i],
        );
        if (i % 3 !== 0) await own.records.cancel(r.id);
      }
      const cancelled = runs
        .filter((_, i) => i % 3 !== 0)
        .reverse()
        .map((r) => r.id);

      const pages: string[][] = [];
      let cursor: string | null = null;
      do {
        const res = await api.inject(`/api/runs?status=CANCELLED&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.statusCode).toBe(200);
        const page = res.json() as { runs: { id: string; status: string }[]; nextCursor: string | null };
        expect(page.runs.every((r) => r.status === 'CANCELLED')).toBe(true);
        pages.push(page.runs.map((r) => r.id));
        cursor = page.nextCursor;
      } while (cursor);
      expect(pages).toEqual([cancelled.slice(0, 2), cancelled.slice(2, 4), cancelled.slice(4)]);

      const all = await api.inject('/api/runs');
      expect(all.json().runs.map((r: { id: string }) => r.id)).toEqual(runs.map((r) => r.id).reverse());
      expect(all.json().nextCursor).toBeNull();
      expect((await api.inject('/api/runs?status=RUNNING')).json()).toEqual({ runs: [], nextCursor: null });
    } finally {
      await api.close();
      await own.close();
    }
  });

  it('orders runs created at the same instant by id, without skipping or repeating one', async () => {
    const own = await testDatabase();
    const api = server(own);
    try {
      for (let i = 0; i < 5; i++) await newRun(own.records, `same ${i}`);
      await own.pool.query(`UPDATE durable_agent.run SET created_at = '2025-06-01T12:00:00.123456Z'`);
      const seen: string[] = [];
      let url = '/api/runs?limit=2';
      for (;;) {
        const page = (await api.inject(url)).json();
        seen.push(...page.runs.map((r: { id: string }) => r.id));
        if (!page.nextCursor) break;
        url = `/api/runs?limit=2&cursor=${page.nextCursor}`;
      }
      const { rows } = await own.pool.query<{ id: string }>('SELECT id FROM durable_agent.run ORDER BY id DESC');
      expect(seen).toEqual(rows.map((r) => r.id));
    } finally {
      await api.close();
      await own.close();
    }
  });
});

describe('timeline and steps', () => {
  it('shows the steps of a driven run and rebuilds each request from the log', async () => {
    const own = await testDatabase();
    const api = server(own);
    try {
      const lookup = defineTool({
        name: 'lookup',
        description: 'looks x up',
        inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
        async execute() {
          return 'found';
        },
      });
      const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', { q: 'x' }, 100, 20).thenText('done', 150, 5);
      const id = (await post(api, '/api/runs', { input: 'find x', model: 'test-model' })).json().id as string;
      expect(await testWorker(own.store, llm, [lookup], { name: 'W' }).runOnce()).toEqual({ runId: id, status: 'SUCCEEDED' });

      const timeline = await api.inject(`/api/runs/${id}/timeline`);
      expect(timeline.statusCode).toBe(200);
      const items = timeline.json() as Record<string, unknown>[];
      expect(items.map((s) => [s.seq, s.kind, s.status, s.toolName, s.toolUseId, s.stopReason])).toEqual([
        [1, 'MODEL', 'DONE', null, null, 'tool_use'],
        [2, 'TOOL', 'DONE', 'lookup', 'toolu_1', null],
        [3, 'MODEL', 'DONE', null, null, 'end_turn'],
      ]);
      expect(items[0]).toMatchObject({
        inputTokens: 100,
        outputTokens: 20,
        cacheCreationInputTokens: 0,
        cacheReadInputTokens: 0,
        worker: 'W',
        attempts: 1,
      });
      expect(items[0]!.latencyMs).toEqual(expect.any(Number));
      expect(items[0]!.startedAt).toEqual(expect.stringMatching(/Z$/));
      for (const item of items) expect(Object.keys(item)).not.toEqual(expect.arrayContaining(['request']));
      for (const item of items) expect(item).not.toHaveProperty('response');

      const step3 = (await api.inject(`/api/runs/${id}/steps/3`)).json();
      const toolUse = { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } };
      expect(step3).toMatchObject({ seq: 3, kind: 'MODEL', response: [{ type: 'text', text: 'done' }] });
      expect(step3.request).toEqual({
        model: 'test-model',
        max_tokens: 1024,
        system: 'You are a test agent.',
        tools: [{ name: 'lookup', description: 'looks x up', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }],
        messages: [
          { role: 'user', content: 'find x' },
          { role: 'assistant', content: [toolUse] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found' }] },
        ],
      });
      // Exactly what the engine sent for that step.
      expect(step3.request.messages).toEqual(llm.seen[1]!.messages);

      const step1 = (await api.inject(`/api/runs/${id}/steps/1`)).json();
      expect(step1.request.messages).toEqual([{ role: 'user', content: 'find x' }]);
      expect(step1.response).toEqual([toolUse]);
      const step2 = (await api.inject(`/api/runs/${id}/steps/2`)).json();
      expect(step2).toMatchObject({
        seq: 2,
        kind: 'TOOL',
        request: { toolUseId: 'toolu_1', name: 'lookup', input: { q: 'x' } },
        response: 'found',
      });

      expect((await api.inject(`/api/runs/${id}/steps/4`)).statusCode).toBe(404);
      expect((await api.inject(`/api/runs/${UNKNOWN_ID}/steps/1`)).statusCode).toBe(404);
      expect((await api.inject(`/api/runs/${UNKNOWN_ID}/timeline`)).statusCode).toBe(404);
    } finally {
      await api.close();
      await own.close();
    }
  });
});

describe('POST /api/runs/{id}/cancel', () => {
  it('cancels a queued run at once; a second cancel is a conflict', async () => {
    const run = await newRun(db.records);
    const res = await post(app, `/api/runs/${run.id}/cancel`);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ id: run.id, status: 'CANCELLED', cancelRequested: true });
    expect((await db.records.state(run.id)).status).toBe('CANCELLED');
    const again = await post(app, `/api/runs/${run.id}/cancel`);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ error: { code: 'conflict', message: expect.stringContaining('CANCELLED') } });
    // A JSON content type with an empty body is still a cancel, not a 400.
    const unknown = await app.inject({
      method: 'POST',
      url: `/api/runs/${UNKNOWN_ID}/cancel`,
      headers: { 'content-type': 'application/json' },
    });
    expect(unknown.statusCode).toBe(404);
  });

  it('asks a running run to stop, and the engine stops at its next guard', async () => {
    const own = await testDatabase();
    const api = server(own);
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const llm = new ScriptedLlm().then(async () => {
        await gate;
        return response([{ type: 'tool_use', id: 'toolu_9', name: 'lookup', input: {} }], 'tool_use', usage(10, 5));
      });
      const run = await newRun(own.records);
      const attempt = testWorker(own.store, llm, [], { name: 'W' }).runOnce();
      await waitFor('the model call', async () => llm.seen.length > 0);

      const res = await post(api, `/api/runs/${run.id}/cancel`);
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ id: run.id, status: 'RUNNING', cancelRequested: true });
      expect((await post(api, `/api/runs/${run.id}/cancel`)).statusCode).toBe(409);
      release();
      expect(await attempt).toEqual({ runId: run.id, status: 'CANCELLED' });
      expect((await own.store.steps(run.id as RunId)).map((s) => s.kind)).toEqual(['MODEL']); // the tool never ran
    } finally {
      await api.close();
      await own.close();
    }
  });
});

describe('what a client can get wrong', () => {
  const json = { 'content-type': 'application/json' };
  const body = (b: unknown) => ({ method: 'POST' as const, url: '/api/runs', payload: JSON.stringify(b), headers: json });
  const raw = (payload: string, headers: Record<string, string> = json) => ({
    method: 'POST' as const,
    url: '/api/runs',
    payload,
    headers,
  });
  const get = (url: string) => ({ method: 'GET' as const, url });
  const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const nested = (depth: number) => JSON.parse(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);

  // [what, request, status, error code, the field `issues` must name]
  const cases: [string, InjectOptions, number, string, string?][] = [
    ['malformed JSON', raw('{"input": '), 400, 'invalid_json'],
    ['prototype poisoning', raw('{"input":"x","__proto__":{"admin":true}}'), 400, 'invalid_json'],
    ['text/plain', raw('find x', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type'],
    ['a form', raw('input=x', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type'],
    ['no content type', raw('{"input":"x"}', {}), 415, 'unsupported_media_type'],
    ['a body over 48 MiB', body({ input: 'x'.repeat(49 * 1_048_576) }), 413, 'payload_too_large'],
    ['an empty body', raw(''), 400, 'invalid_request', 'body'],
    ['null', raw('null'), 400, 'invalid_request', 'body'],
    ['an array', body([{ input: 'x' }]), 400, 'invalid_request', 'body'],
    ['a string', body('find x'), 400, 'invalid_request', 'body'],
    ['no input', body({ model: 'm' }), 400, 'invalid_request', 'input'],
    ['input null', body({ input: null }), 400, 'invalid_request', 'input'],
    ['input a number', body({ input: 42 }), 400, 'invalid_request', 'input'],
    ['input empty', body({ input: '' }), 400, 'invalid_request', 'input'],
    ['input blank', body({ input: ' \n\t' }), 400, 'invalid_request', 'input'],
    ['input with NUL', body({ input: 'a\u0000b' }), 400, 'invalid_request', 'input'],
    ['input with an unpaired surrogate', raw('{"input":"a\\udc00b"}'), 400, 'invalid_request', 'input'],
    ['input with a reversed surrogate pair', raw('{"input":"\\ude00\\ud83d"}'), 400, 'invalid_request', 'input'],
    [
      'a body that is not UTF-8',
      raw(Buffer.concat([Buffer.from('{"input":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}')]) as never),
      400,
      'invalid_request',
      'body',
    ],
    [
      'a body with an overlong UTF-8 encoding',
      raw(Buffer.from([0x7b, 0x22, 0x69, 0x6e, 0x70, 0x75, 0x74, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d]) as never),
      400,
      'invalid_request',
      'body',
    ],
    ['input over 100,000 chars', body({ input: 'x'.repeat(100_001) }), 400, 'invalid_request', 'input'],
    ['an unknown field', body({ input: 'x', priority: 1 }), 400, 'invalid_request', 'priority'],
    ['a number as a string', body({ input: 'x', tokenBudget: '100' }), 400, 'invalid_request', 'tokenBudget'],
    ['tokenBudget 0', body({ input: 'x', tokenBudget: 0 }), 400, 'invalid_request', 'tokenBudget'],
    ['tokenBudget negative', body({ input: 'x', tokenBudget: -5 }), 400, 'invalid_request', 'tokenBudget'],
    ['tokenBudget fractional', body({ input: 'x', tokenBudget: 1.5 }), 400, 'invalid_request', 'tokenBudget'],
    ['tokenBudget too large', body({ input: 'x', tokenBudget: 10_000_001 }), 400, 'invalid_request', 'tokenBudget'],
    ['tokenBudget 1e400', raw('{"input":"x","tokenBudget":1e400}'), 400, 'invalid_request', 'tokenBudget'],
    ['timeoutSeconds over a day', body({ input: 'x', timeoutSeconds: 86_401 }), 400, 'invalid_request', 'timeoutSeconds'],
    ['maxSteps over 1,000', body({ input: 'x', maxSteps: 1_001 }), 400, 'invalid_request', 'maxSteps'],
    ["maxSteps over the server's cap", body({ input: 'x', maxSteps: 21 }), 400, 'invalid_request', 'maxSteps'],
    ['model empty', body({ input: 'x', model: '' }), 400, 'invalid_request', 'model'],
    ['model null', body({ input: 'x', model: null }), 400, 'invalid_request', 'model'],
    ['model over 200 chars', body({ input: 'x', model: 'm'.repeat(201) }), 400, 'invalid_request', 'model'],
    ['model with an unpaired surrogate', raw('{"input":"x","model":"claude-\\ud800"}'), 400, 'invalid_request', 'model'],
    ['metadata an array', body({ input: 'x', metadata: [1] }), 400, 'invalid_request', 'metadata'],
    ['metadata null', body({ input: 'x', metadata: null }), 400, 'invalid_request', 'metadata'],
    ['metadata over 16 KiB', body({ input: 'x', metadata: { blob: 'x'.repeat(16_400) } }), 400, 'invalid_request', 'metadata'],
    ['metadata nested deeply', body({ input: 'x', metadata: nested(1000) }), 400, 'invalid_request', 'metadata'],
    ['metadata with NUL', body({ input: 'x', metadata: { 'k\u0000': 1 } }), 400, 'invalid_request', 'metadata'],
    ['metadata with NUL deep inside', body({ input: 'x', metadata: { a: [{ b: 'x\u0000' }] } }), 400, 'invalid_request', 'metadata'],
    [
      'metadata with an unpaired surrogate',
      raw('{"input":"x","metadata":{"token":"t","bad":"\\ud800"}}'),
      400,
      'invalid_request',
      'metadata',
    ],
    ['metadata with an unpaired surrogate in a key', raw('{"input":"x","metadata":{"\\udfff":1}}'), 400, 'invalid_request', 'metadata'],
    ['limit 0', get('/api/runs?limit=0'), 400, 'invalid_request', 'limit'],
    ['limit negative', get('/api/runs?limit=-1'), 400, 'invalid_request', 'limit'],
    ['limit 101', get('/api/runs?limit=101'), 400, 'invalid_request', 'limit'],
    ['limit not a number', get('/api/runs?limit=ten'), 400, 'invalid_request', 'limit'],
    ['limit twice', get('/api/runs?limit=1&limit=2'), 400, 'invalid_request', 'limit'],
    ['an unknown status', get('/api/runs?status=DONE'), 400, 'invalid_request', 'status'],
    ['an unknown query parameter', get('/api/runs?sort=asc'), 400, 'invalid_request', 'sort'],
    ['a garbage cursor', get('/api/runs?cursor=garbage!!'), 400, 'invalid_request', 'cursor'],
    ['a cursor of the wrong shape', get(`/api/runs?cursor=${cursor([1, 2])}`), 400, 'invalid_request', 'cursor'],
    [
      'a cursor with a bad date',
      get(`/api/runs?cursor=${cursor({ createdAt: '2025-02-30T00:00:00.000000Z', id: UNKNOWN_ID })}`),
      400,
      'invalid_request',
      'cursor',
    ],
    [
      'a cursor with a bad id',
      get(`/api/runs?cursor=${cursor({ createdAt: '2025-01-30T00:00:00.000000Z', id: "1' OR 1=1" })}`),
      400,
      'invalid_request',
      'cursor',
    ],
    ['a non-UUID id', get('/api/runs/123'), 400, 'invalid_request', 'id'],
    ['an SQL-ish id', get(`/api/runs/${encodeURIComponent("1' OR '1'='1")}`), 400, 'invalid_request', 'id'],
    ['an overlong id', get(`/api/runs/${'a'.repeat(500)}`), 400, 'invalid_request'],
    ['a non-UUID id in timeline', get('/api/runs/abc/timeline'), 400, 'invalid_request', 'id'],
    ['a non-UUID id in cancel', { method: 'POST', url: '/api/runs/abc/cancel' }, 400, 'invalid_request', 'id'],
    ['seq 0', get(`/api/runs/${UNKNOWN_ID}/steps/0`), 400, 'invalid_request', 'seq'],
    ['seq negative', get(`/api/runs/${UNKNOWN_ID}/steps/-1`), 400, 'invalid_request', 'seq'],
    ['seq fractional', get(`/api/runs/${UNKNOWN_ID}/steps/1.5`), 400, 'invalid_request', 'seq'],
    ['seq beyond an integer', get(`/api/runs/${UNKNOWN_ID}/steps/99999999999`), 400, 'invalid_request', 'seq'],
    ['seq not a number', get(`/api/runs/${UNKNOWN_ID}/steps/last`), 400, 'invalid_request', 'seq'],
    ['bad percent-encoding', get('/api/runs/%E0%A4%A'), 400, 'bad_request'],
    ['an unknown route', get('/api/nope'), 404, 'not_found'],
    ['a method the path does not take', { method: 'DELETE', url: '/api/runs' }, 405, 'method_not_allowed'],
    ['a method a run path does not take', { method: 'PUT', url: `/api/runs/${UNKNOWN_ID}` }, 405, 'method_not_allowed'],
    ['an unknown method on an unknown path', { method: 'DELETE', url: '/api/nope' }, 404, 'not_found'],
    ['a run path with a trailing slash', get(`/api/runs/${UNKNOWN_ID}/`), 404, 'not_found'],
    ['the runs path with a trailing slash', get('/api/runs/'), 404, 'not_found'],
    ["a run's timeline with a trailing slash", get(`/api/runs/${UNKNOWN_ID}/timeline/`), 404, 'not_found'],
    ['a path below a run that is no route', get(`/api/runs/${UNKNOWN_ID}/nope`), 404, 'not_found'],
    ['a path like a known one but for its dot', { method: 'POST', url: '/openapiXjson' }, 404, 'not_found'],
  ];

  const named = cases.map(([what, request, status, code, field]) => ({ what, request, status, code, field }));
  it.each(named)('$what → $status', async ({ request, status, code, field }) => {
    const before = await runCount(db);
    const res = await app.inject(request);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const err = res.json().error;
    expect(err).toEqual({
      code,
      message: expect.any(String),
      ...(status === 400 && code === 'invalid_request' && field ? { issues: expect.any(Array) } : {}),
    });
    if (field) expect(err.issues.map((i: { path: string }) => i.path)).toContain(field);
    expect(await runCount(db)).toBe(before);
  });

  it('stores text exactly as sent: surrogate pairs, U+FFFD and a backslash-u in text are not refused', async () => {
    const input = 'emoji 😀, replacement \uFFFD, and a literal \\u0000 and \\ud800 in text';
    const metadata = { note: 'path C:\\u0000', face: '🙂', '😀': ['\\udfff'] };
    const res = await post(app, '/api/runs', { input, model: 'claude-😀', metadata });
    expect(res.statusCode).toBe(201);
    const run = (await app.inject(`/api/runs/${res.json().id}`)).json();
    expect(run).toMatchObject({ input, model: 'claude-😀', metadata });
  });

  it('names the methods a path takes when another is used', async () => {
    const res = await app.inject({ method: 'DELETE', url: '/api/runs' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST, GET');
    expect(res.json().error.message).toBe('DELETE is not allowed on /api/runs; use POST or GET');
  });

  it('a known path with a trailing slash is no route (404), whatever the method, while the path itself keeps its methods', async () => {
    const id = (await post(app, '/api/runs', { input: 'x' })).json().id as string;
    expect((await app.inject(`/api/runs/${id}`)).statusCode).toBe(200);
    for (const method of ['GET', 'DELETE', 'POST'] as const) {
      const res = await app.inject({ method, url: `/api/runs/${id}/` });
      expect(res.statusCode).toBe(404);
      expect(res.headers.allow).toBeUndefined();
      expect(res.json()).toEqual({ error: { code: 'not_found', message: `no route ${method} /api/runs/${id}/` } });
    }
    const wrong = await app.inject({ method: 'POST', url: `/api/runs/${id}` });
    expect(wrong.statusCode).toBe(405);
    expect(wrong.headers.allow).toBe('GET');
  });

  it('never shows the cause of an internal error', async () => {
    const failing = { ...db.store, get: async () => Promise.reject(new Error('connect ECONNREFUSED postgres://admin:hunter2@db/x')) };
    const broken = server(db, { store: Object.assign(Object.create(db.store), failing) });
    const res = await broken.inject(`/api/runs/${UNKNOWN_ID}`);
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: { code: 'internal_error', message: 'internal server error' } });
    expect(res.body).not.toContain('hunter2');
    await broken.close();
  });
});

describe('operations', () => {
  it('healthz is ok while the database answers, 503 when it does not', async () => {
    expect((await app.inject('/healthz')).json()).toEqual({ ok: true });
    const down = server(db, { checkDatabase: () => Promise.reject(new Error('password authentication failed for user "hunter2"')) });
    const res = await down.inject('/healthz');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ ok: false, error: { code: 'database_unavailable', message: expect.any(String) } });
    expect(res.body).not.toContain('hunter2');
    const hung = server(db, { checkDatabase: () => new Promise(() => {}), healthTimeoutMs: 50 });
    expect((await hung.inject('/healthz')).statusCode).toBe(503);
    await Promise.all([down.close(), hung.close()]);
  });

  it('serves the Prometheus metrics, with the gauges read from the database, and 404 when there are none', async () => {
    const own = await testDatabase();
    const api = server(own);
    try {
      for (let i = 0; i < 3; i++) await newRun(own.records);
      await own.records.cancel((await newRun(own.records)).id);
      const res = await api.inject('/metrics');
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(res.body).toContain('# TYPE agent_runs gauge');
      expect(res.body).toMatch(/^agent_runs\{status="QUEUED"\} 3$/m);
      expect(res.body).toMatch(/^agent_runs\{status="CANCELLED"\} 1$/m);
      expect(res.body).toMatch(/^agent_runs\{status="SUCCEEDED"\} 0$/m);
      expect(res.body).toMatch(/^agent_queue_depth\{agent="demo"\} 3$/m);
      expect(res.body).toContain('# TYPE agent_step_latency_seconds histogram');
      expect(res.body).toMatch(/^process_cpu_user_seconds_total \d/m);
    } finally {
      await api.close();
      await own.close();
    }
    const none = server(db, { metrics: undefined });
    expect((await none.inject('/metrics')).statusCode).toBe(404);
    await none.close();
  });

  it('describes every route in /openapi.json, from the zod schemas', async () => {
    const res = await app.inject('/openapi.json');
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual([
      'GET /api/overview',
      'GET /api/runs',
      'GET /api/runs/{id}',
      'GET /api/runs/{id}/steps/{seq}',
      'GET /api/runs/{id}/timeline',
      'GET /healthz',
      'GET /metrics',
      'GET /openapi.json',
      'POST /api/runs',
      'POST /api/runs/{id}/cancel',
      'POST /api/runs/{id}/fork',
      'POST /api/runs/{id}/tool-calls/{toolUseId}/decision',
    ]);
    for (const op of operations) {
      const [method, path] = op.split(' ') as ['GET' | 'POST', string];
      expect(app.hasRoute({ method, url: path.replace(/\{(\w+)\}/g, ':$1') })).toBe(true);
    }
    const create = doc.components.schemas.CreateRunRequest;
    expect(create.required).toEqual(['input']);
    expect(create.additionalProperties).toBe(false);
    expect(create.properties.input.anyOf[0]).toMatchObject({ type: 'string', minLength: 1, maxLength: 100_000 });
    expect(create.properties.input.anyOf[1]).toMatchObject({ type: 'array', minItems: 1, maxItems: 100 });
    expect(create.properties.modelOptions).toMatchObject({ type: 'object', additionalProperties: false });
    expect(create.properties.tokenBudget).toMatchObject({ type: 'integer', minimum: 1, maximum: 10_000_000 });
    expect(doc.paths['/api/runs'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreateRunRequest',
    });
    expect(doc.paths['/api/runs'].post.responses).toHaveProperty('415');
    expect(doc.paths['/api/runs/{id}/cancel'].post.responses).toHaveProperty('409');
    expect(doc.paths['/api/runs/{id}/cancel'].post.responses).toHaveProperty('403');
    expect(doc.paths['/api/runs'].post.responses).toHaveProperty('503');
    expect(doc.paths['/openapi.json'].get.responses).not.toHaveProperty('503');
    expect(doc.paths['/api/runs/{id}/steps/{seq}'].get.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual([
      'path:id',
      'path:seq',
    ]);
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Run', 'RunPage', 'TimelineStep', 'StepDetail', 'Error']));
    expect(doc.components.schemas.Timeline.items).toEqual({ $ref: '#/components/schemas/TimelineStep' });
    expect(create.properties.costBudgetUsd).toMatchObject({ type: 'number', exclusiveMinimum: 0, maximum: 10_000 });
    const fork = doc.components.schemas.ForkRunRequest;
    expect(fork.required).toEqual(['afterSeq']);
    expect(doc.paths['/api/runs/{id}/fork'].post.responses['201'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ForkedRun',
    });
  });
});
