/**
 * Owner liveness with real worker processes: a worker killed with SIGKILL is noticed through its
 * session lock, not its lease; a worker whose liveness session is terminated while it lives stops
 * driving and comes back; a worker stopped past its lease writes nothing after it wakes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
const children: ChildProcess[] = [];
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query('CREATE TABLE public.tool_effect (key text PRIMARY KEY, worker text NOT NULL)');
});
afterEach(async () => {
  const exited = children.map((c) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r))));
  for (const c of children.splice(0)) {
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
  await Promise.all(exited);
  // A test that failed leaves its runs unfinished: the next test's workers must not pick them up.
  await db.pool.query(
    `UPDATE durable_agent.run SET status = 'CANCELLED', finished_at = now(), locked_by = NULL WHERE status IN ('QUEUED', 'RUNNING', 'WAITING')`,
  );
});
afterAll(async () => {
  await db.close();
});

interface Started {
  child: ChildProcess;
  ready: Promise<void>;
  /** Idempotency keys of the tool calls this process started. */
  toolKeys: string[];
  /** Those of its calls that ended (their effect written). */
  toolsDone: string[];
}

function startWorker(name: string, env: Record<string, string> = {}): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/worker-process.ts')], {
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      WORKER_NAME: name,
      LEASE_MS: '30000',
      SLOW_TOOL_MS: '3000',
      EFFECT_TABLE: 'public.tool_effect',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const toolKeys: string[] = [];
  const toolsDone: string[] = [];
  const ready = new Promise<void>((resolve) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = JSON.parse(line) as { event: string; key?: string };
      if (m.event === 'ready') resolve();
      if (m.event === 'tool') toolKeys.push(m.key!);
      if (m.event === 'tool done') toolsDone.push(m.key!);
    });
  });
  return { child, ready, toolKeys, toolsDone };
}

/** Workers A and B, both started (slowly on a loaded machine); B is stopped (SIGSTOP) so A claims the next run. */
async function bothReady(): Promise<[Started, Started]> {
  const a = startWorker('worker-A');
  const b = startWorker('worker-B');
  await Promise.all([a.ready, b.ready]);
  b.child.kill('SIGSTOP');
  return [a, b];
}

const toolStarted = (runId: RunId) => async () => (await db.store.steps(runId)).some((s) => s.kind === 'TOOL' && s.status === 'STARTED');
/** The process's state letter in /proc (T: stopped). */
function processState(pid: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** The liveness locks held now, by key. */
const livenessKeys = async () =>
  (
    await db.pool.query<{ key: number }>(
      `SELECT objid::int AS key FROM pg_locks
      WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND classid = hashtext('durable_agent.worker_liveness')::oid
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    )
  ).rows.map((r) => r.key);
const ownerLock = async (runId: RunId) =>
  (await db.pool.query<{ owner_lock: number | null }>('SELECT owner_lock FROM durable_agent.run WHERE id = $1', [runId])).rows[0]!
    .owner_lock;

/** The timeline is whole: seqs 1..n, each tool call recorded once, by whom. */
async function wholeTimeline(runId: RunId) {
  const steps = await db.store.steps(runId);
  expect(steps.map((s) => s.seq)).toEqual(steps.map((_, i) => i + 1));
  const toolIds = steps.filter((s) => s.kind === 'TOOL').map((s) => s.toolUseId);
  expect(new Set(toolIds).size).toBe(toolIds.length);
  return steps.map((s) => [s.kind, s.status, s.worker]);
}

/** The effects of the run's tool calls (by their idempotency keys). */
async function effects(runId: RunId): Promise<{ key: string; worker: string }[]> {
  const keys = (await db.store.steps(runId)).filter((s) => s.kind === 'TOOL').map((s) => s.toolUseId);
  return (
    await db.pool.query<{ key: string; worker: string }>('SELECT key, worker FROM public.tool_effect WHERE key = ANY ($1) ORDER BY key', [
      keys,
    ])
  ).rows;
}

it('a worker killed with SIGKILL under the default 30 s lease has its run resumed by a live worker within seconds', async () => {
  const [a, b] = await bothReady();
  const run = await newRun(db.records, 'survive a kill -9 with the default lease');
  await waitFor('worker A to start the tool', toolStarted(run.id), 30_000);
  expect(await ownerLock(run.id)).not.toBeNull(); // the run carries its owner's lock
  b.child.kill('SIGCONT');
  await waitFor('worker B to run again', () => processState(b.child.pid!) !== 'T', 5_000);
  a.child.kill('SIGKILL');
  await new Promise((r) => a.child.once('exit', r));
  const killedAt = Date.now();
  await waitFor('worker B to take the run over', async () => (await db.records.state(run.id)).lockedBy === 'worker-B', 30_000);
  const resumeMs = Date.now() - killedAt;
  // About a second on an idle machine; the bound is generous for a loaded one, and far below the lease.
  expect(resumeMs).toBeLessThan(5_000);
  await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
  expect(await wholeTimeline(run.id)).toEqual([
    ['MODEL', 'DONE', 'worker-A'],
    ['TOOL', 'DONE', 'worker-B'],
    ['MODEL', 'DONE', 'worker-B'],
  ]);
}, 90_000);

it('a worker whose liveness session is terminated while it lives stops driving, is fenced, and comes back under a new lock', async () => {
  const [a, b] = await bothReady();
  const run = await newRun(db.records, 'survive a lost liveness session');
  await waitFor('worker A to start the tool', toolStarted(run.id), 30_000);
  b.child.kill('SIGCONT');
  const key = (await ownerLock(run.id))!;
  const before = new Set(await livenessKeys());
  // Terminate A's liveness session and keep its lock from it (held here until A has given it up).
  const holder = await db.pool.connect();
  try {
    await holder.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks
        WHERE locktype = 'advisory' AND objsubid = 2 AND objid = $1::int::oid AND classid = hashtext('durable_agent.worker_liveness')::oid
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [key],
    );
    await holder.query(`SELECT pg_advisory_lock(hashtext('durable_agent.worker_liveness'), $1)`, [key]);
    // Past its grace, A gives the lock up, stops driving and takes a new one.
    await waitFor('worker A to take a new liveness lock', async () => (await livenessKeys()).some((k) => !before.has(k)), 15_000);
    await holder.query(`SELECT pg_advisory_unlock(hashtext('durable_agent.worker_liveness'), $1)`, [key]);
  } finally {
    holder.release();
  }
  // Nobody holds the run's owner lock now: it is taken over at once (by B, or by A under its new
  // lock), not at the end of the 30 s lease.
  await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 15_000);
  const timeline = await wholeTimeline(run.id);
  expect(timeline.map(([kind, status]) => [kind, status])).toEqual([
    ['MODEL', 'DONE'],
    ['TOOL', 'DONE'], // recorded once: the result of the attempt that stopped driving was fenced off
    ['MODEL', 'DONE'],
  ]);
  // A's own tool call ends meanwhile; its effect is the key's.
  await waitFor("worker A's tool calls to end", () => a.toolKeys.every((k) => a.toolsDone.includes(k)), 15_000);
  expect((await effects(run.id)).length).toBe(1);
  expect(a.child.exitCode).toBeNull(); // A lived through it

  // A came back: with B gone, it drives the next run alone.
  b.child.kill('SIGKILL');
  const next = await newRun(db.records, 'after the lost session');
  await waitFor('worker A to finish the next run', async () => (await db.records.state(next.id)).status === 'SUCCEEDED', 60_000);
  expect((await db.store.steps(next.id)).every((s) => s.worker === 'worker-A')).toBe(true);
  expect(await ownerLock(next.id)).not.toBe(key); // under a new lock
}, 180_000); // above the sum of its waits (30 + 2.5 + 15 + 1 + 60 s) and two worker starts on a loaded machine

it('a worker stopped (SIGSTOP) past its lease writes nothing after SIGCONT, and the tool takes effect once', async () => {
  const run = await newRun(db.records, 'survive a stalled worker');
  const a = startWorker('worker-A', { LEASE_MS: '1500' });
  await waitFor('worker A to start the tool', toolStarted(run.id), 30_000);
  a.child.kill('SIGSTOP'); // its session lock stays held: only the lease can tell
  const b = startWorker('worker-B', { LEASE_MS: '1500' });
  await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
  a.child.kill('SIGCONT');
  // A wakes in the middle of its tool call: the call ends, and its result is fenced off.
  await waitFor('A to give back the attempt its stall cost', async () => (await db.records.state(run.id)).attempts === 1, 15_000);
  expect(await wholeTimeline(run.id)).toEqual([
    ['MODEL', 'DONE', 'worker-A'],
    ['TOOL', 'DONE', 'worker-B'],
    ['MODEL', 'DONE', 'worker-B'],
  ]);
  const toolKey = (await db.store.steps(run.id))[1]!.toolUseId!;
  expect(a.toolKeys).toEqual([toolKey]);
  expect(b.toolKeys).toEqual([toolKey]); // run again under the same key: at least once
  expect(await effects(run.id)).toEqual([{ key: toolKey, worker: 'worker-B' }]); // and it took effect once
}, 90_000);
