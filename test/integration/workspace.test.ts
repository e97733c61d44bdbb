/**
 * Workspaces in-process, on real PostgreSQL and the real bubblewrap sandbox: an agent with
 * `workspace` gets the built-in tools, its files are saved with each step and seen through the API,
 * a run claimed by another runtime (another WORKSPACE_ROOT) finds them rebuilt, forks and follow-ups
 * start from the files of the step they continue, and what would leave the workspace is refused.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime, type CreateRuntimeOptions } from '../../src/runtime/create-runtime.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { WorkspaceFiles } from '../../src/store/workspace-files.ts';
import { workspaceSettings } from '../../src/workspace/options.ts';
import { AgentWorkspaces } from '../../src/workspace/run-workspace.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { plan, planLlm, type PlannedCall } from '../support/plan-llm.ts';
import { silentLogger } from '../support/engine.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
const roots: string[] = [];
const runtimes: AgentRuntime[] = [];

beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await db.close();
  for (const r of roots.splice(0)) fs.rmSync(r, { recursive: true, force: true });
});

const newRoot = () => {
  const r = fs.mkdtempSync(path.join(os.tmpdir(), 'da-ws-'));
  roots.push(r);
  return r;
};

const coder = (workspace: Parameters<typeof defineAgent>[0]['workspace'] = true, tools: Parameters<typeof defineAgent>[0]['tools'] = []) =>
  defineAgent({ name: 'coder', system: 'You write code.', workspace, tools });

async function start(options: Partial<CreateRuntimeOptions> = {}): Promise<AgentRuntime> {
  const rt = await createRuntime({
    api: { port: 0 },
    databaseUrl: db.url,
    logger: silentLogger,
    llm: planLlm(),
    agents: [coder()],
    workspaceRoot: newRoot(),
    ...options,
  });
  runtimes.push(rt);
  return rt;
}

interface Result {
  isError: boolean;
  content: string;
}

/** Runs `calls` as one run to its end and returns the tool results the model saw. */
async function runPlan(
  rt: AgentRuntime,
  calls: PlannedCall[],
  extra: Record<string, unknown> = {},
): Promise<{ id: string; results: Result[] }> {
  const run = await rt.runs.create({ input: plan(calls), ...extra });
  const done = await rt.runs.wait(run.id, { timeoutMs: 30_000 });
  expect(done.status, done.error ?? '').toBe('SUCCEEDED');
  return { id: run.id, results: JSON.parse(done.output!) as Result[] };
}

async function waitingRun(rt: AgentRuntime, id: string) {
  let run: Awaited<ReturnType<AgentRuntime['runs']['get']>> = null;
  await waitFor('the run to wait', async () => (run = await rt.runs.get(id))?.status === 'WAITING', 30_000);
  return run!;
}

const bash = (command: string): PlannedCall => ({ name: 'bash', input: { command } });
const write = (p: string, content: string): PlannedCall => ({ name: 'write_file', input: { path: p, content } });
const read = (p: string): PlannedCall => ({ name: 'read_file', input: { path: p } });
const bashOut = (r: Result) => JSON.parse(r.content) as { exitCode: number; stdout: string; stderr: string };

async function files(rt: AgentRuntime, id: string, atSeq?: number) {
  const res = await fetch(`${rt.url}/api/runs/${id}/files${atSeq === undefined ? '' : `?atSeq=${atSeq}`}`);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    atSeq: number | null;
    files: { path: string; type: string; size: number; sha256: string | null; mode: number; target?: string }[];
    changed?: { path: string; change: string }[];
  };
}

describe('a run with a workspace', () => {
  it('works in its directory with the built-in tools, and the API shows its files step by step, byte for byte', async () => {
    const rt = await start();
    const { id, results } = await runPlan(rt, [
      write('src/app.txt', 'hello\n'),
      bash("printf 'a\\x00\\xff' > data.bin && ln -s src/app.txt link && mkdir -p empty && chmod 755 src && pwd && ls"),
      { name: 'edit_file', input: { path: 'src/app.txt', oldText: 'hello', newText: 'hello, world' } },
      read('src/app.txt'),
      { name: 'list_files', input: {} },
      bash('rm data.bin'),
    ]);
    expect(results.map((r) => r.isError)).toEqual([false, false, false, false, false, false]);
    expect(bashOut(results[1]!)).toMatchObject({ exitCode: 0, stdout: '/workspace\ndata.bin\nempty\nlink\nsrc\n', stderr: '' });
    expect(results[3]!.content).toBe('hello, world');
    expect(results[4]!.content).toBe(
      'data.bin (3 bytes)\nempty/\nlink -> src/app.txt\nsrc/\nsrc/app.txt (6 bytes)'.replace('6 bytes', '13 bytes'),
    );

    // Steps: 1 model, 2 write, 3 model, 4 bash, 5 model, 6 edit, … 12 the rm.
    const atBash = await files(rt, id, 4);
    expect(atBash.files.map((f) => [f.path, f.type])).toEqual([
      ['data.bin', 'file'],
      ['empty', 'dir'],
      ['link', 'symlink'],
      ['src', 'dir'],
      ['src/app.txt', 'file'],
    ]);
    expect(atBash.files.find((f) => f.path === 'link')).toMatchObject({ target: 'src/app.txt', sha256: null });
    expect(atBash.changed).toEqual([
      { path: 'data.bin', change: 'added' },
      { path: 'empty', change: 'added' },
      { path: 'link', change: 'added' },
    ]);
    const bin = await fetch(`${rt.url}/api/runs/${id}/files/data.bin?atSeq=4`);
    expect(bin.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await bin.arrayBuffer())).toEqual(Buffer.from([0x61, 0x00, 0xff]));
    const before = await fetch(`${rt.url}/api/runs/${id}/files/src/app.txt?atSeq=4`);
    expect(before.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await before.text()).toBe('hello\n');

    const latest = await files(rt, id);
    expect(latest.atSeq).toBeNull();
    expect(latest.files.map((f) => f.path)).toEqual(['empty', 'link', 'src', 'src/app.txt']);
    expect(await (await fetch(`${rt.url}/api/runs/${id}/files/src/app.txt`)).text()).toBe('hello, world\n');
    expect((await files(rt, id, 12)).changed).toEqual([{ path: 'data.bin', change: 'deleted' }]);
    const gone = await fetch(`${rt.url}/api/runs/${id}/files/data.bin`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { message: string } }).error.message).toMatch(/holds no data\.bin/);
    expect((await fetch(`${rt.url}/api/runs/${id}/files/..%2Fetc%2Fpasswd`)).status).toBe(400);
    expect((await files(rt, id, 0)).files).toEqual([]);
  });

  it('is rebuilt from what was saved when another runtime, with another WORKSPACE_ROOT, takes the run over', async () => {
    // An approval makes the run wait, holding nothing: the first runtime closes, a second one continues it.
    const approve = tool({
      name: 'deploy',
      description: 'Deploys.',
      input: z.object({}),
      needsApproval: true,
      execute: async (_input, ctx) => fs.readdirSync(ctx.workspace!).sort().join(','),
    });
    const agents = [coder(true, [approve])];
    const first = await start({ agents });
    const run = await first.runs.create({
      input: plan([write('a.txt', 'one'), bash('mkdir d && echo two > d/b.txt'), { name: 'deploy', input: {} }, read('d/b.txt')]),
    });
    const waiting = await waitingRun(first, run.id);
    await first.close();
    const second = await start({ agents });
    await second.runs.decide(run.id, waiting.waiting!.toolCalls[0]!.toolUseId, { decision: 'approve' });
    const done = await second.runs.wait(run.id, { timeoutMs: 30_000 });
    expect(done.status, done.error ?? '').toBe('SUCCEEDED');
    const results = JSON.parse(done.output!) as Result[];
    expect(results[2]).toEqual({ isError: false, content: 'a.txt,d' });
    expect(results[3]).toEqual({ isError: false, content: 'two' });
  });

  it('refuses what would leave the workspace, and commands see neither the worker nor its database', async () => {
    const rt = await start();
    const port = new URL(db.url).port || '5432';
    const { results } = await runPlan(rt, [
      write('../outside.txt', 'x'),
      read('/etc/hostname'),
      bash('ln -s /etc etc-link && ln -s /nowhere dangling'),
      read('etc-link/passwd'),
      write('dangling', 'x'),
      bash(`echo "url=[$DATABASE_URL] home=$HOME path=$PATH"; env | sort | cut -d= -f1 | tr '\\n' ' '`),
      bash(`(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>&1 && echo connected || echo refused`),
      bash('echo hi > /etc/durable-agent-probe; echo "exit=$?"; ls /run | wc -l'),
    ]);
    expect(results[0]).toMatchObject({ isError: true, content: expect.stringMatching(/uses "\.\."/) });
    expect(results[1]).toMatchObject({ isError: true, content: expect.stringMatching(/outside the workspace/) });
    expect(results[3]).toMatchObject({ isError: true, content: expect.stringMatching(/outside the workspace/) });
    expect(results[4]).toMatchObject({ isError: true, content: expect.stringMatching(/points nowhere/) });
    expect(fs.existsSync('/nowhere')).toBe(false);
    expect(bashOut(results[5]!).stdout).toBe(
      'url=[] home=/workspace path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nHOME LANG PATH PWD SHLVL TMPDIR _ ',
    );
    expect(bashOut(results[6]!).stdout).toMatch(/refused/);
    expect(bashOut(results[7]!).stdout).toBe('exit=1\n0\n');
    expect(bashOut(results[7]!).stderr).toMatch(/Read-only file system/);
  });

  it('a fork after step N starts from the files as of N; a follow-up from the files its previous run ended with', async () => {
    const rt = await start();
    const source = await runPlan(rt, [write('f.txt', 'v1'), write('f.txt', 'v2'), write('g.txt', 'g')]);
    // Steps: 1 model, 2 write v1, 3 model, 4 write v2, … A fork after step 2 sees v1 and no g.txt.
    // The fork's input takes the place of the source's first message: its plan goes on after the write it inherits.
    const fork = await rt.runs.fork(source.id, { afterSeq: 2, input: plan([write('f.txt', 'v1'), bash('cat f.txt; ls')]) });
    const forked = await rt.runs.wait(fork.id, { timeoutMs: 30_000 });
    expect(forked.status, forked.error ?? '').toBe('SUCCEEDED');
    expect(bashOut((JSON.parse(forked.output!) as Result[])[1]!).stdout).toBe('v1f.txt\n');
    const follow = await runPlan(rt, [bash('cat f.txt g.txt')], { previousRunId: source.id });
    expect(bashOut(follow.results[0]!).stdout).toBe('v2g');
    // The source's files are unchanged by what its fork and follow-up did.
    expect((await files(rt, source.id)).files.map((f) => f.path)).toEqual(['f.txt', 'g.txt']);
  });

  it('keeps excluded paths out of what is saved, and undoes a call that goes over a limit, saying which', async () => {
    const rt = await start({ agents: [coder({ exclude: ['node_modules/', '*.log'], maxFiles: 5 })] });
    const { id, results } = await runPlan(rt, [
      bash('mkdir -p node_modules/x && touch node_modules/x/i.js build.log keep.txt'),
      bash('touch a b c d e f g'),
      bash('ls'),
    ]);
    expect(results[1]).toMatchObject({
      isError: true,
      content: expect.stringMatching(/8 files .*over its limit of 5 files \(workspace.maxFiles\).*undone/),
    });
    expect(bashOut(results[2]!).stdout).toBe('build.log\nkeep.txt\nnode_modules\n');
    expect((await files(rt, id)).files.map((f) => f.path)).toEqual(['keep.txt']);
  });

  it('stops the run with the cause when a saved content is missing, instead of working on half a tree', async () => {
    const approve = tool({ name: 'ok', description: 'Asks.', input: z.object({}), needsApproval: true, execute: async () => 'ok' });
    const rt = await start({ agents: [coder(true, [approve])] });
    const run = await rt.runs.create({ input: plan([write('a.txt', 'A'), { name: 'ok', input: {} }]) });
    const waiting = await waitingRun(rt, run.id);
    await db.pool.query('DELETE FROM durable_agent.workspace_blob');
    await rt.runs.decide(run.id, waiting.waiting!.toolCalls[0]!.toolUseId, { decision: 'approve' });
    const done = await rt.runs.wait(run.id, { timeoutMs: 30_000 });
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatch(/workspace cannot be rebuilt: the saved content of a\.txt \(sha256 [0-9a-f]{64}\) is missing/);
  });

  it('deleting a run removes the contents only it referred to; the sweep removes contents no step refers to', async () => {
    const rt = await start();
    const a = await runPlan(rt, [write('shared.txt', 'same in both'), write('own.txt', 'only in a')]);
    await runPlan(rt, [write('shared.txt', 'same in both')]);
    const contents = async () =>
      (await db.pool.query<{ size: string }>('SELECT size FROM durable_agent.workspace_blob ORDER BY size')).rows.map((r) =>
        Number(r.size),
      );
    expect(await contents()).toEqual([9, 12]);
    // Saved long enough ago that no save in flight could be about to refer to them.
    await db.pool.query(`UPDATE durable_agent.workspace_blob SET touched_at = now() - interval '2 hours'`);
    expect((await fetch(`${rt.url}/api/runs/${a.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await contents()).toEqual([12]);
    // A content a crashed step saved before its checkpoint: referred to by no step.
    await new WorkspaceFiles(db.pool).putBlobs([{ sha256: 'f'.repeat(64), content: Buffer.from('orphan') }]);
    expect(await new WorkspaceFiles(db.pool).sweep()).toBe(0); // too young
    expect(await new WorkspaceFiles(db.pool).sweep(1000, 0)).toBe(1);
    expect(await contents()).toEqual([12]);
  });

  it("gives each attempt its own copy: one ending late never removes the next one's; copies of dead processes go", async () => {
    const root = newRoot();
    fs.mkdirSync(path.join(root, '999999999-0123abcd', 'left-by-a-kill'), { recursive: true });
    const workspaces = new AgentWorkspaces({ store: new WorkspaceFiles(db.pool), root, settings: workspaceSettings(true) });
    const run = await db.records.create({ input: 'x', model: 'm', tokenBudget: 1000, timeoutSeconds: 60, maxSteps: 5 });
    const never = new AbortController().signal;
    const late = await workspaces.open(run.id, never);
    const next = await workspaces.open(run.id, never);
    expect(late.dir).not.toBe(next.dir);
    expect(fs.existsSync(path.join(root, '999999999-0123abcd'))).toBe(false);
    fs.writeFileSync(path.join(next.dir, 'mine'), 'next attempt');
    await late.close();
    expect(fs.readFileSync(path.join(next.dir, 'mine'), 'utf8')).toBe('next attempt');
    await next.close();
    expect(fs.existsSync(next.dir)).toBe(false);
  });
});
