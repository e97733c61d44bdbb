import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
const children: ChildProcess[] = [];
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await db.close();
});

interface Line {
  event?: string;
  runId?: string;
  key?: string;
  msg?: string;
  [field: string]: unknown;
}

function startWorker(name: string, lines: Line[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/stall-worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, LEASE_MS: '1000', BLOCK_MS: '2500', MAX_RUN_ATTEMPTS: '3', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  readline.createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l) as Line);
    } catch {
      // not ours
    }
  });
  children.push(child);
  return child;
}

it('a tool that blocks the event loop longer than the lease fails no innocent run and runs no tool twice', async () => {
  const lines: Line[] = [];
  // Two blocking tools can run back to back on one worker (the second one's model reply is handled
  // before the loop gets back to its timers), so the loop may look blocked for 5 s: the stall limit
  // is set, as the runtime sets it from the tool timeout, well above that.
  const a = startWorker('stall-A', lines, { STALL_LIMIT_MS: '30000' });
  const b = startWorker('stall-B', lines, { STALL_LIMIT_MS: '30000' });
  await waitFor('both workers to be ready', async () => lines.filter((l) => l.event === 'ready').length === 2, 30_000);
  const blockers = new Set<string>();
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const run = await newRun(db.records, i % 5 === 0 ? `block ${i}` : `innocent ${i}`);
    ids.push(run.id);
    if (i % 5 === 0) blockers.add(run.id);
  }
  await waitFor(
    'every run to end',
    async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM durable_agent.run WHERE id = ANY($1) AND finished_at IS NOT NULL`,
        [ids],
      );
      return rows[0]!.n === 30;
    },
    90_000,
  );
  for (const c of [a, b]) c.kill('SIGTERM');
  await Promise.all([a, b].map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))));

  const { rows } = await db.pool.query<{ id: string; status: string; attempts: number }>(
    `SELECT id, status, attempts FROM durable_agent.run WHERE id = ANY($1)`,
    [ids],
  );
  const starts = new Map<string, number>();
  for (const l of lines) if (l.event === 'tool') starts.set(l.key!, (starts.get(l.key!) ?? 0) + 1);
  const innocent = rows.filter((r) => !blockers.has(r.id));
  expect({
    innocentSucceeded: innocent.filter((r) => r.status === 'SUCCEEDED').length,
    blockersSucceeded: rows.filter((r) => blockers.has(r.id) && r.status === 'SUCCEEDED').length,
    toolKeys: starts.size,
    keysStartedMoreThanOnce: [...starts.values()].filter((n) => n > 1).length,
    maxAttempts: Math.max(...rows.map((r) => r.attempts)),
  }).toEqual({ innocentSucceeded: 24, blockersSucceeded: 6, toolKeys: 30, keysStartedMoreThanOnce: 0, maxAttempts: 1 });

  // The workers said what blocked them: each blocking tool call, by its run.
  const blamed = lines.filter((l) => l.event === 'event_loop_blocked').map((l) => l.suspect as { run_id: string; tool: string });
  expect(blamed.map((b) => b.tool)).toEqual(Array(6).fill('work'));
  expect(new Set(blamed.map((b) => b.run_id))).toEqual(blockers);
});

it('a stall of the runtime itself blames no tool, though a slow tool is in flight meanwhile', async () => {
  const lines: Line[] = [];
  const a = startWorker('runtime-stall', lines, { WORK_MS: '6000', MODEL_BLOCK_MS: '1500', LEASE_MS: '5000' });
  try {
    await waitFor('the worker to be ready', async () => lines.some((l) => l.event === 'ready'), 30_000);
    const waiting = await newRun(db.records, 'innocent, waiting on the network');
    await waitFor('its tool to be in flight', async () => lines.some((l) => l.event === 'tool' && l.runId === waiting.id), 30_000);
    await newRun(db.records, 'model-block');
    await waitFor('the stall to be reported', async () => lines.some((l) => l.event === 'event_loop_blocked'), 30_000);
    expect(lines.some((l) => l.event === 'unblocked')).toBe(false);
    const [report] = lines.filter((l) => l.event === 'event_loop_blocked');
    expect(report!.suspect).toBeUndefined();
    expect(report!.msg).toMatch(/^event loop blocked for \d+ ms by the runtime itself, not by a tool/);
    // Where the last sample found it: the busy loop in the model call, or (on a loaded machine) the
    // runtime's own work on the reply that follows it in the same stall; never a tool.
    expect((report!.running as string[])[0]).toMatch(/(stall-worker-process|\/src\/[\w/-]+)\.ts:\d+\)$/);
  } finally {
    a.kill('SIGKILL');
  }
});

it('a worker blocked for good gives its runs up: past the stall limit another worker takes them over', async () => {
  // Lease 500 ms, so the keeper's stall limit is 1.5 s; the tool blocks A's loop for 90 s, far longer
  // than B takes to start even on a loaded machine (the test ends as soon as B finishes the run).
  const lines: Line[] = [];
  const a = startWorker('stuck-A', lines, { LEASE_MS: '500', BLOCK_MS: '90000' });
  await waitFor('A to be ready', async () => lines.some((l) => l.event === 'ready'), 30_000);
  const run = await newRun(db.records, 'block forever');
  await waitFor('A to start the blocking tool', async () => lines.some((l) => l.event === 'tool' && l.runId === run.id), 30_000);
  const b = startWorker('rescuer-B', lines, { LEASE_MS: '500', BLOCKS: '0' });
  try {
    await waitFor('B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 80_000);
    // Finished by B while A was still stuck in its tool.
    expect(lines.some((l) => l.event === 'unblocked')).toBe(false);
    const steps = await db.store.steps(run.id);
    expect(steps.at(-1)).toMatchObject({ kind: 'MODEL', worker: 'rescuer-B' });
  } finally {
    for (const c of [a, b]) c.kill('SIGKILL');
  }
}, 120_000);
