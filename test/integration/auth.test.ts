/**
 * API keys and tenants against a real PostgreSQL: every route of the API (read from its own
 * /openapi.json, so a route added later is covered too) × {no key, wrong key, revoked key, another
 * tenant's key, the right key}. Refused requests are 401 or 404 and change nothing in any table.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authByHook, authByKeys, authFor, type Authenticator } from '../../src/api/auth.ts';
import { loadDashboard } from '../../src/api/dashboard.ts';
import { type ApiDeps, createServer } from '../../src/api/server.ts';
import type { RunId } from '../../src/domain/types.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { ApiKeys, type NewApiKey } from '../../src/store/api-keys.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { loadConfig } from '../../src/config/environment.ts';
import { startRuntime } from '../../src/runtime/start-runtime.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunOverview } from '../../src/store/run-overview.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const DEFAULTS = { agent: 'demo', model: 'test-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 };

let db: TestDatabase;
let keys: ApiKeys;
let mine: NewApiKey;
let theirs: NewApiKey;
let revoked: NewApiKey;

function server(auth: Authenticator, extra: Partial<ApiDeps> = {}): FastifyInstance {
  const metrics = createMetrics(new RunStats(db.pool), { models: ['test-model'] });
  return createServer({
    store: db.records,
    listing: new RunListing(db.pool),
    deletion: new RunDeletion(db.pool),
    overview: new RunOverview(db.pool),
    defaults: DEFAULTS,
    checkDatabase: async () => {
      await db.pool.query('SELECT 1');
    },
    metrics: () => metrics.render(),
    dashboard: loadDashboard(),
    logger: false,
    auth,
    ...extra,
  });
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Everything in the schema that a request could change, as one comparable value. */
async function snapshot(): Promise<unknown> {
  const q = async (sql: string) => (await db.pool.query(sql)).rows;
  return {
    runs: await q(`SELECT id, tenant, status, cancel_requested, updated_at, finished_at FROM durable_agent.run ORDER BY id`),
    steps: await q(`SELECT run_id, seq, status FROM durable_agent.run_step ORDER BY run_id, seq`),
    blobs: await q(`SELECT digest FROM durable_agent.content_blob ORDER BY digest`),
    keys: await q(`SELECT id, revoked_at FROM durable_agent.api_key ORDER BY id`),
  };
}

async function createRun(app: FastifyInstance, key: string | null, input = 'find x'): Promise<RunId> {
  const res = await app.inject({
    method: 'POST',
    url: '/api/runs',
    headers: { 'content-type': 'application/json', ...(key ? bearer(key) : {}) },
    payload: JSON.stringify({ input }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as RunId;
}

/** One model step for the run, so the step route has something to show. */
async function addStep(id: RunId): Promise<void> {
  await db.pool.query(
    `INSERT INTO durable_agent.run_step (run_id, seq, kind, status, request, response, latency_ms)
     VALUES ($1, 1, 'MODEL', 'DONE', '{"model":"test-model","maxTokens":10,"systemDigest":null,"toolsDigest":null}', '[{"type":"text","text":"hi"}]', 5)`,
    [id],
  );
}

beforeAll(async () => {
  db = await testDatabase();
  keys = new ApiKeys(db.pool);
  mine = await keys.create('acme', 'ci');
  theirs = await keys.create('globex');
  revoked = await keys.create('acme', 'old laptop');
  await keys.revoke(revoked.id);
});
afterAll(async () => {
  await db.close();
});

describe('keys', () => {
  it('are URL-safe, 32 random bytes behind a recognisable prefix, and stored only as a hash', async () => {
    expect(mine.key).toMatch(/^dak_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(mine.key.slice(4), 'base64url')).toHaveLength(32);
    const { rows } = await db.pool.query(`SELECT * FROM durable_agent.api_key`);
    expect(rows).toHaveLength(3);
    const everything = JSON.stringify(rows);
    for (const k of [mine, theirs, revoked]) {
      expect(everything).not.toContain(k.key);
      expect(everything).not.toContain(k.key.slice(4));
    }
    const row = rows.find((r) => r.id === mine.id);
    expect(row).toMatchObject({ tenant: 'acme', label: 'ci', hash: createHash('sha256').update(mine.key).digest('hex'), revoked_at: null });
  });
});

describe('every route × {no key, wrong key, revoked key, other tenant, right key}', () => {
  let app: FastifyInstance;
  let routes: { method: string; path: string; open: boolean }[];
  let run: RunId;
  let othersRun: RunId;

  beforeAll(async () => {
    app = server(authByKeys(keys, { alwaysRequired: false }));
    const doc = (await app.inject('/openapi.json')).json() as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        open: Array.isArray(op.security) && op.security.length === 0,
      })),
    );
    run = await createRun(app, mine.key, 'the right tenant');
    await addStep(run);
    othersRun = await createRun(app, theirs.key, 'another tenant');
    await addStep(othersRun);
  });
  afterAll(async () => {
    await app.close();
  });

  /** The body each route that takes one is sent: a new run, a decision, or a fork after the run's one step. */
  const bodies: Record<string, unknown> = {
    '/api/runs': { input: 'refused?' },
    '/api/runs/{id}/tool-calls/{toolUseId}/decision': { decision: 'approve' },
    '/api/runs/{id}/fork': { afterSeq: 1 },
  };
  const request = (r: { method: string; path: string }, headers: Record<string, string>): InjectOptions => {
    const body = r.method === 'POST' ? bodies[r.path] : undefined;
    return {
      method: r.method as InjectOptions['method'],
      url: r.path.replace('{id}', run).replace('{seq}', '1').replace('{toolUseId}', 'toolu_auth'),
      headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { payload: JSON.stringify(body) } : {}),
    };
  };

  it('knows the routes it covers', () => {
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining([
        'POST /api/runs',
        'GET /api/runs',
        'GET /api/runs/{id}',
        'DELETE /api/runs/{id}',
        'GET /api/runs/{id}/timeline',
        'GET /api/runs/{id}/steps/{seq}',
        'POST /api/runs/{id}/cancel',
        'POST /api/runs/{id}/fork',
        'GET /api/overview',
        'GET /metrics',
        'GET /healthz',
        'GET /openapi.json',
      ]),
    );
    expect(
      routes
        .filter((r) => r.open)
        .map((r) => r.path)
        .sort(),
    ).toEqual(['/healthz', '/openapi.json']);
  });

  it('without a valid key: 401 with WWW-Authenticate: Bearer on every route but the open ones, and nothing changes', async () => {
    const before = await snapshot();
    const wrong = `dak_${'A'.repeat(43)}`;
    for (const [what, headers] of [
      ['no key', {}],
      ['a wrong key', bearer(wrong)],
      ['a revoked key', bearer(revoked.key)],
      ['not a bearer token', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
    ] as const) {
      for (const r of routes.filter((x) => !x.open)) {
        const res = await app.inject(request(r, headers));
        expect(res.statusCode, `${what}: ${r.method} ${r.path}`).toBe(401);
        expect(res.headers['www-authenticate'], `${what}: ${r.method} ${r.path}`).toMatch(/^Bearer realm="durable-agent"/);
        expect(res.json().error.code).toBe('unauthorized');
      }
    }
    expect(await snapshot()).toEqual(before);
  });

  it("another tenant's key: 404 for the run on every route of one run, as for a run that does not exist; nothing changes", async () => {
    const before = await snapshot();
    for (const r of routes.filter((x) => x.path.startsWith('/api/runs/{id}'))) {
      const res = await app.inject(request(r, bearer(theirs.key)));
      expect(res.statusCode, `${r.method} ${r.path}`).toBe(404);
      expect(res.json().error).toEqual({ code: 'not_found', message: `run ${run} not found` });
    }
    expect(await snapshot()).toEqual(before);
  });

  it("another tenant's key lists, counts and creates only its own runs", async () => {
    const list = (await app.inject({ url: '/api/runs', headers: bearer(theirs.key) })).json();
    expect(list.runs.map((r: { id: string }) => r.id)).toEqual([othersRun]);
    const overview = (await app.inject({ url: '/api/overview', headers: bearer(theirs.key) })).json();
    expect(overview.runsByStatus.QUEUED).toBe(1);
    expect(overview.day.totals.steps).toBe(1);
    const created = await createRun(app, theirs.key, 'one more');
    const { rows } = await db.pool.query('SELECT tenant FROM durable_agent.run WHERE id = $1', [created]);
    expect(rows[0].tenant).toBe('globex');
    const mineNow = (await app.inject({ url: '/api/runs', headers: bearer(mine.key) })).json();
    expect(mineNow.runs.map((r: { id: string }) => r.id)).toEqual([run]);
  });

  it('the open routes and the dashboard page answer without a key', async () => {
    for (const url of ['/healthz', '/openapi.json', '/', '/runs/whatever']) {
      const res = await app.inject(url);
      expect([200, 503], url).toContain(res.statusCode);
      if (url.startsWith('/runs') || url === '/') expect(res.headers['content-type']).toMatch(/^text\/html/);
    }
  });

  it('the right key: 2xx on every route, and its tenant on the runs it creates', async () => {
    // A run route at a time, the changing ones last: a decision (the run waits for one), cancel (the
    // decision queued the run again), then delete (now CANCELLED).
    await db.pool.query(
      `UPDATE durable_agent.run SET status = 'WAITING', run_at = 'infinity',
              waiting = jsonb_build_object('kind', 'approval', 'since', now(), 'toolCalls', jsonb_build_array(jsonb_build_object('toolUseId', 'toolu_auth', 'toolName', 't', 'input', '{}'::jsonb)))
       WHERE id = $1`,
      [run],
    );
    await db.pool.query(`INSERT INTO durable_agent.tool_decision (run_id, tool_use_id, kind) VALUES ($1, 'toolu_auth', 'approval')`, [run]);
    const order = (r: { method: string; path: string }) =>
      r.path.endsWith('/decision') ? 0.5 : ({ GET: 0, POST: 1, DELETE: 2 }[r.method as 'GET'] ?? 0);
    for (const r of [...routes].sort((a, b) => order(a) - order(b))) {
      const res = await app.inject(request(r, bearer(mine.key)));
      expect(res.statusCode, `${r.method} ${r.path}: ${res.body}`).toBeGreaterThanOrEqual(200);
      expect(res.statusCode, `${r.method} ${r.path}: ${res.body}`).toBeLessThan(300);
      if (r.path.endsWith('/fork')) {
        // The fork is the caller's tenant's too; it goes again, or the run it refers to could not be deleted.
        const { rows } = await db.pool.query('DELETE FROM durable_agent.run WHERE id = $1 RETURNING tenant', [res.json().id]);
        expect(rows).toEqual([{ tenant: 'acme' }]);
      }
    }
    const { rows } = await db.pool.query(`SELECT tenant, count(*)::int AS n FROM durable_agent.run GROUP BY tenant ORDER BY tenant`);
    // Run deleted, one created by "POST /api/runs" above; the other tenant's two untouched.
    expect(rows).toEqual([
      { tenant: 'acme', n: 1 },
      { tenant: 'globex', n: 2 },
    ]);
    const last = await db.pool.query(`SELECT last_used_at FROM durable_agent.api_key WHERE id = $1`, [mine.id]);
    expect(last.rows[0].last_used_at).toBeInstanceOf(Date);
  });
});

describe('when a key is required', () => {
  it('a loopback server with no key lets requests in (seeing every tenant) until the first key, then within a second requires one', async () => {
    const fresh = await testDatabase();
    try {
      let clock = 0;
      const freshKeys = new ApiKeys(fresh.pool);
      const auth = authByKeys(freshKeys, { alwaysRequired: false, now: () => clock });
      const caller = await auth.authenticate({ headers: {} });
      expect(caller).toEqual({ tenant: null, keyId: null });
      await freshKeys.create('acme');
      clock += 500;
      expect(await auth.required()).toBe(false); // believed for up to a second
      clock += 600;
      expect(await auth.required()).toBe(true);
      await expect(auth.authenticate({ headers: {} })).rejects.toThrow('an API key is required');
    } finally {
      await fresh.close();
    }
  });

  it('from the start off loopback (0.0.0.0, a public name or address) or with AUTH=on; never with AUTH=off', async () => {
    const none = { holder: async () => null, anyExist: async () => false };
    for (const host of ['0.0.0.0', '10.0.0.5', 'example.com', '::']) {
      expect(await authFor({ auth: null, host }, none).required(), host).toBe(true);
    }
    for (const host of ['127.0.0.1', 'localhost', '::1']) expect(await authFor({ auth: null, host }, none).required(), host).toBe(false);
    expect(await authFor({ auth: 'on', host: '127.0.0.1' }, none).required()).toBe(true);
    const off = authFor({ auth: 'off', host: '0.0.0.0' }, none);
    expect(off.mode).toBe('off');
    expect(await off.authenticate({ headers: bearer('anything') })).toEqual({ tenant: null, keyId: null });
  });

  it("a library's authenticate hook decides the tenant; null is a 401", async () => {
    const app = server(authByHook((req) => (req.headers['x-team'] as string | undefined) ?? null));
    try {
      expect((await app.inject('/api/runs')).statusCode).toBe(401);
      const res = await app.inject({
        method: 'POST',
        url: '/api/runs',
        headers: { 'content-type': 'application/json', 'x-team': 'initech' },
        payload: '{"input":"hello"}',
      });
      expect(res.statusCode).toBe(201);
      const { rows } = await db.pool.query('SELECT tenant FROM durable_agent.run WHERE id = $1', [res.json().id]);
      expect(rows[0].tenant).toBe('initech');
      const other = await app.inject({ url: `/api/runs/${res.json().id}`, headers: { 'x-team': 'acme' } });
      expect(other.statusCode).toBe(404);
    } finally {
      await app.close();
    }
  });
});

describe("a worker's own /metrics (METRICS_PORT)", () => {
  it('wants a key as the API does', async () => {
    const runtime = await startRuntime(loadConfig({ DATABASE_URL: db.url, METRICS_PORT: '0', LOG_LEVEL: 'silent', LLM_PROVIDER: 'demo' }), {
      api: false,
      worker: true,
      llm: new ScriptedLlm(),
      agent: { system: null, tools: [] },
    });
    try {
      const none = await fetch(`${runtime.url}/metrics`);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      const wrong = await fetch(`${runtime.url}/metrics`, { headers: bearer(revoked.key) });
      expect(wrong.status).toBe(401);
      const ok = await fetch(`${runtime.url}/metrics`, { headers: bearer(theirs.key) });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('agent_runs');
    } finally {
      await runtime.close();
    }
  });

  it('without it (and without the API) nothing can read metrics, and none are kept', async () => {
    const runtime = await startRuntime(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent', LLM_PROVIDER: 'demo' }), {
      api: false,
      worker: true,
      llm: new ScriptedLlm(),
      agent: { system: null, tools: [] },
    });
    try {
      expect(runtime.url).toBeNull();
      expect(runtime.metrics).toBeNull();
    } finally {
      await runtime.close();
    }
  });
});
