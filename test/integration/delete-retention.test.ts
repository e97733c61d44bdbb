/**
 * Deleting runs, by request and by age, against a real PostgreSQL with real workers: nothing of a
 * deleted run remains in any table, shared texts stay while another run refers to them, live runs are
 * never touched, and a purge skips rows another transaction holds instead of waiting for them.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.ts';
import { loadConfig } from '../../src/config/environment.ts';
import type { RunId } from '../../src/domain/types.ts';
import type { Worker } from '../../src/engine/worker.ts';
import { startRuntime } from '../../src/runtime/start-runtime.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker, waitFor } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const lookup = defineTool({
  name: 'lookup',
  description: 'Finds tickets',
  inputSchema: { type: 'object' },
  execute: async () => 'T-1: printer on fire',
});
const extra = defineTool({ name: 'extra', description: 'Another tool', inputSchema: { type: 'object' }, execute: async () => 'ok' });

/** A model that asks for `lookup` once, then answers. */
const llm = () =>
  new ScriptedLlm(async (req) =>
    req.messages.length === 1
      ? response(
          [{ type: 'tool_use', id: `toolu_${Math.random().toString(36).slice(2)}`, name: 'lookup', input: {} }],
          'tool_use',
          usage(10, 5),
        )
      : response([{ type: 'text', text: 'done' }], 'end_turn', usage(20, 5)),
  );

let db: TestDatabase;
let deletion: RunDeletion;

async function finished(worker: Worker, n: number): Promise<RunId[]> {
  const ids: RunId[] = [];
  for (let i = 0; i < n; i++) {
    const run = await newRun(db.records, `task ${i}`);
    ids.push(run.id);
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');
  }
  return ids;
}

/** Rows that mention the run in every table of the schema that has a run_id column, and the run row itself. */
async function leftOf(id: RunId): Promise<Record<string, number>> {
  const { rows: tables } = await db.pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns WHERE table_schema = 'durable_agent' AND column_name = 'run_id' ORDER BY table_name`,
  );
  expect(tables.map((t) => t.table_name)).toContain('run_step');
  expect(tables.map((t) => t.table_name)).toContain('run_event');
  const left: Record<string, number> = {};
  for (const { table_name } of tables) {
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM durable_agent.${table_name} WHERE run_id = $1`, [
      id,
    ]);
    left[table_name] = rows[0]!.n;
  }
  left.run = (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run WHERE id = $1', [id])).rows[0]!.n;
  return left;
}

async function digestsOf(id: RunId): Promise<string[]> {
  const { rows } = await db.pool.query<{ d: string }>(
    `SELECT DISTINCT d FROM durable_agent.run_step, LATERAL (VALUES (request ->> 'systemDigest'), (request ->> 'toolsDigest')) v (d)
     WHERE run_id = $1 AND kind = 'MODEL' AND d IS NOT NULL ORDER BY d`,
    [id],
  );
  return rows.map((r) => r.d);
}

async function blobExists(digest: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM durable_agent.content_blob WHERE digest = $1', [digest]);
  return rows.length === 1;
}

beforeAll(async () => {
  db = await testDatabase();
  deletion = new RunDeletion(db.pool);
});
afterAll(async () => {
  await db.close();
});

describe('DELETE /api/runs/{id}', () => {
  let app: FastifyInstance;
  beforeAll(() => {
    app = createServer({
      store: db.records,
      listing: new RunListing(db.pool),
      deletion,
      defaults: { agent: 'a', model: 'test-model', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 10 },
      checkDatabase: async () => {},
      logger: false,
    });
  });
  afterAll(async () => {
    await app.close();
  });

  it('204: nothing of the run remains in any table, and its texts go unless another run refers to them', async () => {
    const a = testWorker(db.store, llm(), [lookup], { name: 'w-a' });
    const b = testWorker(db.store, llm(), [lookup, extra], { name: 'w-b' });
    const [shared] = await finished(a, 1);
    const [own] = await finished(b, 1);
    await a.stop();
    await b.stop();
    const [system, toolsA] = await digestsOf(shared!);
    const ownDigests = await digestsOf(own!);
    expect(ownDigests).toHaveLength(2);
    const onlyOwn = ownDigests.filter((d) => !(d === system || d === toolsA));
    expect(onlyOwn).toHaveLength(1); // the same system prompt, tools of its own
    expect(Object.values(await leftOf(own!)).some((n) => n > 0)).toBe(true);
    expect((await leftOf(own!)).run_event).toBeGreaterThan(0); // its events, run.started to run.finished

    const res = await app.inject({ method: 'DELETE', url: `/api/runs/${own}` });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(Object.values(await leftOf(own!))).toEqual(Object.values(await leftOf(own!)).map(() => 0));
    expect(await blobExists(onlyOwn[0]!)).toBe(false);
    // The shared prompt is still referred to by the other run, which is whole.
    for (const d of await digestsOf(shared!)) expect(await blobExists(d)).toBe(true);
    expect((await leftOf(shared!)).run_step).toBe(3);

    expect((await app.inject({ method: 'DELETE', url: `/api/runs/${own}` })).statusCode).toBe(404);
    expect((await app.inject(`/api/runs/${own}`)).statusCode).toBe(404);
  });

  it('409 while QUEUED or RUNNING ("cancel first"), and the run stays whole', async () => {
    const queued = await newRun(db.records, 'not yet');
    const running = await newRun(db.records, 'in flight');
    await db.pool.query(
      `UPDATE durable_agent.run SET status = 'RUNNING', locked_by = 'w', locked_until = now() + interval '1 minute' WHERE id = $1`,
      [running.id],
    );
    for (const run of [queued, running]) {
      const res = await app.inject({ method: 'DELETE', url: `/api/runs/${run.id}` });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.message).toMatch(/cancel it first/);
      expect((await leftOf(run.id)).run).toBe(1);
    }
    // Cancelled, it can go.
    expect((await app.inject({ method: 'POST', url: `/api/runs/${queued.id}/cancel` })).statusCode).toBe(202);
    expect((await app.inject({ method: 'DELETE', url: `/api/runs/${queued.id}` })).statusCode).toBe(204);
  });

  it('a worker stores its texts again when the last run referring to them is deleted while it serves', async () => {
    const tool = defineTool({
      name: 'only_here',
      description: 'A tool no other worker has',
      inputSchema: { type: 'object' },
      execute: async () => 'x',
    });
    const w = testWorker(db.store, llm(), [lookup, tool], { name: 'w-live', subscribeUrl: db.url });
    await w.start();
    try {
      const run = await newRun(db.records, 'one');
      await waitFor('the run to finish', async () => (await db.records.get(run.id))?.status === 'SUCCEEDED');
      const { rows } = await db.pool.query<{ d: string }>(
        `SELECT DISTINCT request ->> 'toolsDigest' AS d FROM durable_agent.run_step WHERE run_id = $1 AND kind = 'MODEL'`,
        [run.id],
      );
      const tools = rows[0]!.d;
      // Its tool definitions are its own (no other run has this tool): they go with it...
      expect((await deletion.deleteRun(run.id)).blobs).toBeGreaterThanOrEqual(1);
      // ...and the notification of that reaches the worker, which serves them: they are stored again.
      await waitFor('the tool definitions to be stored again', () => blobExists(tools));
      // And a run it drives next refers to texts that exist.
      const next = await newRun(db.records, 'two');
      await waitFor('the next run to finish', async () => (await db.records.get(next.id))?.status === 'SUCCEEDED');
      for (const d of await digestsOf(next.id)) expect(await blobExists(d)).toBe(true);
    } finally {
      await w.stop();
    }
  });
});

describe('retention', () => {
  /** A run in `status` that was created and (when finished) finished `daysAgo` days ago. */
  async function aged(status: string, daysAgo: number): Promise<RunId> {
    const run = await newRun(db.records, `${status} ${daysAgo}d`);
    await db.pool.query(
      `UPDATE durable_agent.run SET status = $2, created_at = now() - $3 * interval '1 day',
              finished_at = CASE WHEN $2 IN ('QUEUED', 'RUNNING') THEN NULL ELSE now() - $3 * interval '1 day' END
       WHERE id = $1`,
      [run.id, status, daysAgo],
    );
    return run.id;
  }

  it('deletes finished runs older than the cutoff only, in batches; live and recent runs stay', async () => {
    await db.pool.query('DELETE FROM durable_agent.run');
    const old = await Promise.all(['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT', 'SUCCEEDED'].map((s) => aged(s, 40)));
    const keep = await Promise.all([aged('SUCCEEDED', 10), aged('FAILED', 29), aged('QUEUED', 40), aged('RUNNING', 40)]);
    const batches: number[] = [];
    const deleted = await deletion.purge(new Date(Date.now() - 30 * 86_400_000), { batchSize: 2, onBatch: (b) => batches.push(b.runs) });
    expect(deleted.runs).toBe(5);
    expect(batches).toEqual([2, 2, 1]);
    for (const id of old) expect((await leftOf(id)).run).toBe(0);
    for (const id of keep) expect((await leftOf(id)).run).toBe(1);
  });

  it('only the given tenant when asked', async () => {
    const theirs = await aged('SUCCEEDED', 50);
    await db.pool.query(`UPDATE durable_agent.run SET tenant = 'globex' WHERE id = $1`, [theirs]);
    const ours = await aged('SUCCEEDED', 50);
    expect((await deletion.purge(new Date(Date.now() - 30 * 86_400_000), { tenant: 'globex' })).runs).toBe(1);
    expect((await leftOf(theirs)).run).toBe(0);
    expect((await leftOf(ours)).run).toBe(1);
  });

  it('skips a run another transaction holds instead of waiting for it', async () => {
    const held = await aged('SUCCEEDED', 60);
    const free = await aged('SUCCEEDED', 60);
    const other = await db.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM durable_agent.run WHERE id = $1 FOR UPDATE', [held]);
      const deleted = await deletion.purge(new Date(Date.now() - 30 * 86_400_000));
      expect(deleted.runs).toBeGreaterThanOrEqual(1);
      expect((await leftOf(free)).run).toBe(0);
      expect((await leftOf(held)).run).toBe(1);
    } finally {
      await other.query('ROLLBACK');
      other.release();
    }
  });

  it('RETENTION_DAYS: a worker deletes what is past it when it starts', async () => {
    const old = await aged('SUCCEEDED', 31);
    const recent = await aged('SUCCEEDED', 2);
    const runtime = await startRuntime(
      loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent', RETENTION_DAYS: '30', LLM_PROVIDER: 'demo' }),
      { api: false, worker: true, llm: llm(), agent: { system: 'You are a test agent.', tools: [lookup] as Tool[] } },
    );
    try {
      await waitFor('the old run to be deleted', async () => (await leftOf(old)).run === 0);
      expect((await leftOf(recent)).run).toBe(1);
    } finally {
      await runtime.close();
    }
  });
});
