/**
 * What a workspace costs: saving a one-file change in a workspace of 10 and of 10,000 files (what a
 * tool call adds to its step), rebuilding a 10,000-file, 100 MB workspace on a worker that claims the
 * run, and starting a command in the sandbox next to a plain child process. Skipped (with a note) where
 * bubblewrap cannot run.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import type { RunId } from '../src/domain/types.ts';
import type { RunRecords } from '../src/store/run-records.ts';
import { fileRows, WorkspaceFiles } from '../src/store/workspace-files.ts';
import { workspaceSettings } from '../src/workspace/options.ts';
import { AgentWorkspaces } from '../src/workspace/run-workspace.ts';
import { checkSandbox, runCommand } from '../src/workspace/sandbox.ts';

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, d = 2) => Number(x.toFixed(d));
const never = new AbortController().signal;

async function timed(n: number, fn: () => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  return round(p50(ms));
}

/** Writes `files` files of `bytes` random bytes each under `dir`, 100 to a directory. */
function fill(dir: string, files: number, bytes: number): void {
  for (let i = 0; i < files; i++) {
    const sub = path.join(dir, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, `f${i}.txt`), randomBytes(bytes));
  }
}

export async function benchWorkspace(
  pool: pg.Pool,
  records: RunRecords,
): Promise<{ results: Record<string, number | string>; rows: [string, string, string][] }> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'da-bench-ws-'));
  const files = new WorkspaceFiles(pool);
  const settings = workspaceSettings({ maxFiles: 1_000_000, maxBytes: 1024 ** 3 });
  const workspaces = new AgentWorkspaces({ store: files, root, settings });
  const newRun = async () =>
    (await records.create({ agent: 'bench', input: 'bench', model: 'bench', tokenBudget: 1e6, timeoutSeconds: 3600, maxSteps: 1000 }))
      .id as RunId;
  const results: Record<string, number> = {};
  try {
    // A one-file change, saved (scan, hash what changed, its content written), in workspaces of two sizes.
    for (const size of [10, 10_000]) {
      const ws = await workspaces.open(await newRun(), never);
      fill(ws.dir, size, 1024);
      await ws.save();
      ws.saved();
      // Past the racy window: the files the first save saw are trusted from now on.
      await new Promise((r) => setTimeout(r, 1100));
      await ws.save();
      ws.saved();
      let i = 0;
      // As write_file or edit_file leave it (the save looks at the path they name), and as bash does (it looks at everything).
      for (const [tool, key] of [
        ['write_file', 'workspaceSaveByFileToolP50MsAt'],
        ['bash', 'workspaceSaveByCommandP50MsAt'],
      ] as const) {
        results[`${key}${size}`] = await timed(31, async () => {
          fs.writeFileSync(path.join(ws.dir, 'd0', 'f0.txt'), `change ${i++}`);
          const changes = await ws.save({ name: tool, input: tool === 'bash' ? { command: '…' } : { path: 'd0/f0.txt' } });
          ws.saved();
          if (!Array.isArray(changes) || changes.length !== 1) throw new Error(`expected one change, got ${JSON.stringify(changes)}`);
        });
      }
      await ws.close();
    }

    // A 10,000-file, 100 MB workspace as saved by its steps, rebuilt on a worker that claims the run.
    {
      const runId = await newRun();
      const source = await workspaces.open(runId, never);
      fill(source.dir, 10_000, 10 * 1024);
      const changes = await source.save();
      if (!Array.isArray(changes)) throw new Error(changes.overLimit);
      await pool.query(
        `INSERT INTO durable_agent.run_file (run_id, seq, path, kind, mode, size, sha256, target)
         SELECT $1, 2, f.path, f.kind, f.mode, f.size, f.sha256, f.target
         FROM json_to_recordset($2::json) AS f (path text, kind text, mode int, size bigint, sha256 text, target text)`,
        [runId, JSON.stringify(fileRows(changes))],
      );
      await source.close();
      const elsewhere = new AgentWorkspaces({ store: files, root: path.join(root, 'other-worker'), settings });
      const ms: number[] = [];
      for (let i = 0; i < 3; i++) {
        const t = performance.now();
        const ws = await elsewhere.open(runId, never);
        ms.push(performance.now() - t);
        await ws.close();
      }
      results.workspaceRebuildP50MsAt10000Files100Mb = round(p50(ms));
    }

    // Starting a command: a plain child process, the same command unsandboxed (bash with the limits), in bubblewrap.
    const dir = fs.mkdtempSync(path.join(root, 'cmd-'));
    const plain = () =>
      new Promise<void>((resolve, reject) =>
        spawn('/bin/true', { stdio: 'ignore' })
          .once('exit', () => resolve())
          .once('error', reject),
      );
    results.commandPlainSpawnP50Ms = await timed(31, plain);
    const run = (sandbox: 'none' | 'bubblewrap') => () =>
      runCommand({ command: 'true', dir, settings: workspaceSettings({ sandbox }), timeoutMs: 10_000, signal: never, hidden: [] });
    results.commandUnsandboxedP50Ms = await timed(31, run('none'));
    const sandboxed = await checkSandbox().then(
      () => true,
      () => false,
    );
    if (sandboxed) results.commandSandboxedP50Ms = await timed(31, run('bubblewrap'));
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  const rows: [string, string, string][] = [
    [
      'save after write_file, 10 / 10k files',
      `${results.workspaceSaveByFileToolP50MsAt10} / ${results.workspaceSaveByFileToolP50MsAt10000} ms`,
      `${round(results.workspaceSaveByFileToolP50MsAt10000! / results.workspaceSaveByFileToolP50MsAt10!)}× for a one-file change (the path it names is looked at)`,
    ],
    [
      'save after bash, 10 / 10k files',
      `${results.workspaceSaveByCommandP50MsAt10} / ${results.workspaceSaveByCommandP50MsAt10000} ms`,
      `${round(results.workspaceSaveByCommandP50MsAt10000! / results.workspaceSaveByCommandP50MsAt10!)}× for a one-file change (every path is lstat'ed)`,
    ],
    ['workspace rebuild, 10,000 files', `${results.workspaceRebuildP50MsAt10000Files100Mb} ms`, '100 MB fetched, written and checked'],
    [
      'command start: plain / bash / bwrap',
      `${results.commandPlainSpawnP50Ms} / ${results.commandUnsandboxedP50Ms} / ${results.commandSandboxedP50Ms ?? '–'} ms`,
      results.commandSandboxedP50Ms === undefined
        ? 'bubblewrap cannot run here'
        : 'p50 of `true`: child process, with limits, in the sandbox',
    ],
  ];
  return { results, rows };
}

// `npm run bench:workspace`: these figures alone, in a scratch database.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { withScratchDatabase } = await import('./scratch-database.ts');
  const { RunRecords } = await import('../src/store/run-records.ts');
  await withScratchDatabase(async (_url, pool, description) => {
    const { rows } = await benchWorkspace(pool, new RunRecords(pool));
    console.log(`workspace bench on ${description}\n`);
    for (const [k, v, note] of rows) console.log(`${k.padEnd(38)} ${v.padStart(24)}   ${note}`);
  });
  process.exit(0);
}
