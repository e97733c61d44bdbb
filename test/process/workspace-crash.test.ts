/**
 * The red box survives the worker: a worker process is SIGKILLed while a sandboxed command runs; a
 * second worker process, with another WORKSPACE_ROOT (another machine, as far as files go), takes the
 * run over. It rebuilds the workspace as of the last checkpoint — the files of earlier steps, none of
 * what the killed command wrote — runs the command again (once), and the steps after it see its result.
 * The killed command's whole process tree died with the worker: it never finished writing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { waitFor } from '../support/wait-for.ts';
import { plan } from '../support/plan-llm.ts';

let db: TestDatabase;
const children: ChildProcess[] = [];
const roots: string[] = [];

beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await db?.close();
  for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
});

function startWorker(name: string, root: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/workspace-worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, WORKSPACE_ROOT: root, LEASE_SECONDS: '2' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => c.toString().includes('"ready"') && resolve(child));
    child.once('exit', (code) => reject(new Error(`worker ${name} exited with ${code}`)));
  });
}

const tempRoot = () => {
  const r = fs.mkdtempSync(path.join(os.tmpdir(), 'da-ws-crash-'));
  roots.push(r);
  return r;
};

it('a worker SIGKILLed during a bash command: another, elsewhere, rebuilds the workspace and runs the command again once', async () => {
  const rootA = tempRoot();
  const rootB = tempRoot();
  const a = await startWorker('worker-A', rootA);
  const command = 'ls; echo partial > partial.txt; sleep 4; echo done > result.txt';
  const run = await db.records.create({
    agent: 'coder',
    input: plan([
      { name: 'write_file', input: { path: 'keep.txt', content: 'from step 2' } },
      { name: 'bash', input: { command } },
      { name: 'read_file', input: { path: 'result.txt' } },
    ]),
    model: 'test-model',
    tokenBudget: 100_000,
    timeoutSeconds: 300,
    maxSteps: 50,
  });
  // The command is under way on A: its first write is there (in A's copy: <root>/<pid>-<random>/<run id>-<n>).
  const copyOf = (root: string) =>
    fs
      .readdirSync(root)
      .flatMap((p) => fs.readdirSync(path.join(root, p)).map((d) => path.join(root, p, d)))
      .find((d) => path.basename(d).startsWith(`${run.id}-`));
  const inA = await waitFor(
    'the command to start on worker-A',
    () => {
      const d = copyOf(rootA);
      return d && fs.existsSync(path.join(d, 'partial.txt')) && d;
    },
    30_000,
  );
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));

  await startWorker('worker-B', rootB);
  const done = await waitFor(
    'the run to finish on worker-B',
    async () => {
      const r = await db.records.get(run.id);
      return r && ['SUCCEEDED', 'FAILED'].includes(r.status) ? r : null;
    },
    60_000,
  );
  expect(done.status, done.error ?? '').toBe('SUCCEEDED');
  const results = JSON.parse(done.output!) as { isError: boolean; content: string }[];
  // The command saw the workspace as of step 2 (keep.txt, no partial.txt), and finished there.
  expect(JSON.parse(results[1]!.content)).toMatchObject({ exitCode: 0, stdout: 'keep.txt\n' });
  expect(results[2]).toEqual({ isError: false, content: 'done' });

  const steps = await db.records.timeline(run.id);
  const bashStep = steps.find((s) => s.kind === 'TOOL' && s.toolName === 'bash')!;
  expect(bashStep).toMatchObject({ status: 'DONE', attempts: 2, worker: 'worker-B' });
  expect(steps.filter((s) => s.kind === 'TOOL').map((s) => s.toolName)).toEqual(['write_file', 'bash', 'read_file']);
  const { rows } = await db.pool.query<{ path: string }>(
    `SELECT path FROM durable_agent.run_file WHERE run_id = $1 AND kind = 'file' ORDER BY path`,
    [run.id],
  );
  expect(rows.map((r) => r.path)).toEqual(['keep.txt', 'partial.txt', 'result.txt']);
  // The killed command's sandbox went with worker-A: it never wrote its result on A's disk.
  await new Promise((r) => setTimeout(r, 5000)); // past the command's own sleep: the scenario
  expect(fs.existsSync(path.join(inA, 'result.txt'))).toBe(false);
  expect(copyOf(rootB)).toBeUndefined(); // B removed its copy when the run ended
}, 120_000);
