/**
 * A fleet behind a real PgBouncer in transaction mode: an API process and three `durable-agent worker`
 * processes drive 100 runs and a fork of one (tools, an approval, sleeps, a cancel, a fork, live events) to the end with
 * nothing but the pooler to reach PostgreSQL; with DATABASE_DIRECT_URL as well, a worker killed with
 * SIGKILL is noticed through its session lock, long before its lease lapses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, CliProcesses, cleanEnv, freePort, type Proc, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { readSse } from '../support/events-api.ts';
import { runApi } from '../support/run-api.ts';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.ts';

let db: TestDatabase;
let bouncer: PgBouncer;
beforeAll(async () => {
  db = await testDatabase();
  bouncer = await startPgBouncer(db.url, { mode: 'transaction', poolSize: 10 });
});
afterAll(async () => {
  await bouncer?.stop();
  await db?.close();
});

interface Fleet {
  procs: CliProcesses;
  base: string;
  api: Proc;
  workers: Proc[];
}

async function startFleet(extra: Record<string, string>, workerCount: number): Promise<Fleet> {
  const procs = new CliProcesses();
  const port = await freePort();
  const env = (name: string) =>
    cleanEnv({
      DATABASE_URL: bouncer.url,
      PORT: String(port),
      LLM_PROVIDER: 'demo',
      WORKER_NAME: name,
      LOG_LEVEL: 'info',
      ...extra,
    });
  const api = procs.start('api', ['serve', '--no-worker'], env('api'));
  const workers = Array.from({ length: workerCount }, (_, i) => procs.start(`worker-${i + 1}`, ['worker'], env(`worker-${i + 1}`)));
  await waitForOutput(api, /Then: curl/, 60_000);
  for (const w of workers) await waitForOutput(w, /worker worker-\d started/, 60_000);
  return { procs, base: `http://127.0.0.1:${port}`, api, workers };
}

/** What the processes logged at warn (40) or above, but the expected word on the pooler; and any mention of a prepared statement. */
function problems(fleet: Fleet): string[] {
  const lines = fleet.procs.all.flatMap((p) => `${p.out}\n${p.err}`.split('\n'));
  return lines.filter(
    (l) =>
      /prepared statement|42P05|26000/.test(l) ||
      (/"level":(4|5|6)0/.test(l) && !/goes through a pooler in transaction mode/.test(l)) ||
      /^(Error|TypeError)/.test(l),
  );
}

describe('behind PgBouncer in transaction mode, without a direct URL', () => {
  let fleet: Fleet;
  beforeAll(async () => {
    // Model calls slow enough, and slots few enough, that runs still wait in the queue when every worker
    // polls (once a second: nothing is announced through the pooler); at 20 ms and 32 slots two workers
    // drained it between the third's polls.
    fleet = await startFleet({ DEMO_LATENCY_MS: '250', WORKER_CONCURRENCY: '20' }, 3);
  }, 120_000);
  afterAll(async () => {
    await fleet?.procs.killAll();
  });

  it('an API and three workers drive 100 runs and a fork to the end: tools, an approval, sleeps, a cancel, a fork and live events', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(fleet.procs.transcript()));
    const { post, status } = runApi(fleet.base);
    // Each process says once what the pooler costs it, and how many connections it may open.
    for (const p of [fleet.api, ...fleet.workers]) {
      expect(p.out.match(/DATABASE_DIRECT_URL is unset/g)).toHaveLength(1);
    }
    expect(fleet.api.out).toMatch(/up to \d+ connections \(a pool of \d+, 0 sessions\)/);

    const plain = await Promise.all(
      Array.from({ length: 95 }, (_, i) => post('/api/runs', { input: `Which acme tickets are overdue? (${i})` })),
    );
    expect(plain.map((r) => r.status)).toEqual(plain.map(() => 201));
    const watched = plain[0]!.body.id as string;
    const approvals = await Promise.all(
      [104, 105].map((n) => post('/api/runs', { input: `Close ticket ACME-${n} because the fix shipped` })),
    );
    const sleepers = await Promise.all([1, 2].map((s) => post('/api/runs', { input: `Check back in ${s} seconds` })));
    const cancelled = await post('/api/runs', { input: 'Wait 1 hour, then check again' });

    // A stream of a finished run is replayed to its end.
    const replayed = await readSse(`${fleet.base}/api/runs/${watched}/events`);
    expect(replayed.closedByServer).toBe(true);
    expect(replayed.events.map((e) => e.type)).toEqual(expect.arrayContaining(['tool.started', 'tool.finished', 'run.finished']));

    // A stream open while its run waits for approval gets what comes after, with nothing to announce it but the poll.
    const first = approvals[0]!.body.id as string;
    await status(first, 'WAITING');
    const live = readSse(`${fleet.base}/api/runs/${first}/events`);
    await until(
      'the API to follow the waiting run',
      async () => (await db.pool.query('SELECT 1 FROM durable_agent.run_event_watch WHERE run_id = $1', [first])).rowCount,
      30_000,
    );
    for (const a of approvals) {
      const waiting = await status(a.body.id, 'WAITING');
      const toolUseId = waiting.waiting.toolCalls[0].toolUseId as string;
      expect((await post(`/api/runs/${a.body.id}/tool-calls/${toolUseId}/decision`, { decision: 'approve' })).status).toBe(202);
    }
    const followed = await live;
    expect(followed.closedByServer).toBe(true);
    const types = followed.events.map((e) => e.type);
    expect(types.indexOf('run.resumed')).toBeGreaterThan(types.indexOf('run.waiting'));
    expect(types.slice(types.indexOf('run.resumed'))).toEqual(expect.arrayContaining(['tool.started', 'tool.finished', 'run.finished']));
    expect(types.at(-1)).toBe('run.finished');

    await status(cancelled.body.id, 'WAITING');
    expect((await post(`/api/runs/${cancelled.body.id}/cancel`, {})).status).toBe(202);
    await status(cancelled.body.id, 'CANCELLED');

    for (const r of [...plain, ...approvals, ...sleepers]) await status(r.body.id, 'SUCCEEDED');
    const fork = await post(`/api/runs/${watched}/fork`, { afterSeq: 2 });
    expect(fork.status).toBe(201);
    await status(fork.body.id, 'SUCCEEDED');

    const { rows } = await db.pool.query(`SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status ORDER BY status`);
    expect(rows).toEqual([
      { status: 'CANCELLED', n: 1 },
      { status: 'SUCCEEDED', n: 100 },
    ]);
    // The work was shared: every worker drove runs.
    const { rows: by } = await db.pool.query<{ worker: string }>(`SELECT DISTINCT worker FROM durable_agent.run_step ORDER BY worker`);
    expect(by.map((r) => r.worker)).toEqual(['worker-1', 'worker-2', 'worker-3']);
    // Each approved ticket was closed once.
    const { rows: tickets } = await db.pool.query(
      `SELECT id, status FROM durable_agent.demo_ticket WHERE id IN ('ACME-104', 'ACME-105') ORDER BY id`,
    );
    expect(tickets).toEqual([
      { id: 'ACME-104', status: 'closed' },
      { id: 'ACME-105', status: 'closed' },
    ]);
    expect(problems(fleet)).toEqual([]);
    for (const p of fleet.procs.all) expect(alive(p), `${p.name} is still running`).toBe(true);
  }, 240_000);
});

describe('behind PgBouncer in transaction mode, with DATABASE_DIRECT_URL', () => {
  let fleet: Fleet;
  beforeAll(async () => {
    await db.pool.query(`DELETE FROM durable_agent.run`);
    // Each model call takes 3 s, so the run is surely mid-call when its worker is killed; the lease is a minute.
    fleet = await startFleet({ DATABASE_DIRECT_URL: db.url, DEMO_LATENCY_MS: '3000', LEASE_SECONDS: '60' }, 2);
  }, 120_000);
  afterAll(async () => {
    await fleet?.procs.killAll();
  });

  it("a worker killed with SIGKILL mid-run is noticed through its session lock: another takes the run over within 3 s, long before the lease's minute", async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(fleet.procs.transcript()));
    const { post, status } = runApi(fleet.base);
    expect(fleet.api.out).not.toMatch(/DATABASE_DIRECT_URL is unset/);
    const run = await post('/api/runs', { input: 'Which acme tickets are overdue?' });
    await status(run.body.id, 'RUNNING', 30_000);
    const { rows } = await db.pool.query<{ locked_by: string }>('SELECT locked_by FROM durable_agent.run WHERE id = $1', [run.body.id]);
    const victim = fleet.workers.find((w) => w.name === rows[0]!.locked_by);
    expect(victim, `the run's owner (${rows[0]!.locked_by}) is one of the workers`).toBeDefined();
    const killedAt = Date.now();
    victim!.child.kill('SIGKILL');
    await until(
      'another worker to take the run over',
      async () =>
        (
          await db.pool.query('SELECT 1 FROM durable_agent.run WHERE id = $1 AND locked_by IS NOT NULL AND locked_by <> $2', [
            run.body.id,
            victim!.name,
          ])
        ).rowCount,
      30_000,
    );
    const takeoverMs = Date.now() - killedAt;
    console.log(`taken over ${takeoverMs} ms after the SIGKILL (lease 60 s)`);
    // Resumed within 3 s, as through a direct connection: the lease alone would take a minute.
    expect(takeoverMs).toBeLessThanOrEqual(3_000);
    await status(run.body.id, 'SUCCEEDED', 60_000);
    expect(fleet.procs.transcript()).not.toMatch(/prepared statement|42P05|26000/);
  }, 180_000);
});
