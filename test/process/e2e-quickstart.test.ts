/**
 * The quickstart, end to end: `durable-agent serve` with nothing configured but a data directory
 * starts its own embedded PostgreSQL, answers the README's curl with the offline demo model, shares
 * that server with a second `worker` process, stops it when the last process exits, keeps the data
 * across restarts, and recovers when the process that started it (or the server itself) was killed.
 * The tests below run in order and share one data directory.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { stopEmbeddedPostgres } from '../../src/db/embedded.ts';
import { alive, CliProcesses, cleanEnv, exitWithin, freePort, type Proc, until, waitForOutput } from '../support/cli-process.ts';

const QUESTION = 'Which acme tickets are overdue?';
// Generous: on a loaded 2-core machine initdb alone has taken over a minute.
const STEP_TIMEOUT = 240_000;

const procs = new CliProcesses();
let dataDir: string;
let port: number;

/** The quickstart sets nothing but where its data lives and which port it listens on. */
const startCli = (name: string, args: string[]) =>
  procs.start(name, args, cleanEnv({ DATA_DIR: dataDir, PORT: String(port), DEMO_LATENCY_MS: '50' }));

function transcript(): string {
  const log = path.join(dataDir, 'postgres.log');
  const pgLog = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').slice(-40).join('\n') : '(none)';
  return [
    procs.transcript(),
    `----- ${log} (last lines) -----\n${pgLog}`,
    `----- processes -----\n${processes()
      .map((q) => `${q.pid} ${q.ppid} ${q.args}`)
      .join('\n')}`,
  ].join('\n');
}

interface ProcessRow {
  pid: number;
  ppid: number;
  args: string;
}

function processes(): ProcessRow[] {
  return execFileSync('ps', ['-eww', '-o', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[3]! }));
}

/** Processes naming the data directory: the postmaster (`postgres -D <dir>/pg`), and pg_ctl while it runs. */
const mentioningDataDir = () => processes().filter((p) => p.args.includes(dataDir));
/**
 * The servers on the data directory. A backend the postmaster has just forked shows the postmaster's
 * command line until it sets its own title, so a match whose parent is a match is a child, not a server.
 */
function postmasters(): ProcessRow[] {
  const matches = mentioningDataDir().filter((p) => /postgres\s+-D\s/.test(p.args) && !/pg_ctl/.test(p.args));
  return matches.filter((p) => !matches.some((q) => q.pid === p.ppid));
}

function pidFile(): number | null {
  const f = path.join(dataDir, 'pg', 'postmaster.pid');
  return fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8').split('\n')[0]) : null;
}

interface Banner {
  url: string;
  pgPort: number;
  body: string;
}

async function startServe(name: string): Promise<{ proc: Proc; banner: Banner }> {
  const proc = startCli(name, ['serve']);
  // The first start runs initdb (a few seconds); later ones find or start the server.
  await waitForOutput(proc, /Then: curl/, 150_000);
  const url = proc.out.match(/durable-agent listening on (http:\/\/\S+)/)![1]!;
  const pgPort = Number(proc.out.match(/database: embedded PostgreSQL in (.+) \(port (\d+)\)/)?.[2]);
  const body = proc.out.match(/-d '(\{.*\})'/)?.[1] ?? '';
  return { proc, banner: { url, pgPort, body } };
}

type Json = Record<string, any>;
const api = async (url: string, init?: RequestInit): Promise<{ status: number; body: any }> => {
  const res = await fetch(url, init);
  return { status: res.status, body: await res.json() };
};

async function startRun(base: string, body: string): Promise<string> {
  const res = await api(`${base}/api/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  expect(res.body.status).toBe('QUEUED');
  return res.body.id as string;
}

async function finished(base: string, id: string): Promise<Json> {
  return until(
    `run ${id} to finish`,
    async () => {
      const { body } = await api(`${base}/api/runs/${id}`);
      return body.status !== 'QUEUED' && body.status !== 'RUNNING' && (body as Json);
    },
    30_000,
  );
}

async function stopped(p: Proc, signal: NodeJS.Signals = 'SIGTERM') {
  p.child.kill(signal);
  return exitWithin(p, 30_000);
}

/** Waits until no process names the data directory: the embedded server is down. */
async function serverGone(timeoutMs = 15_000) {
  await until('the embedded PostgreSQL to stop', () => mentioningDataDir().length === 0, timeoutMs);
}

const timings: Record<string, number> = {};
async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings[what] = Date.now() - t0;
  }
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-quickstart-'));
  // Under root the embedded server runs as an unprivileged user, who must be able to enter the directory.
  fs.chmodSync(dataDir, 0o755);
  port = await freePort();
});

afterAll(async () => {
  await procs.killAll();
  if (dataDir) {
    await stopEmbeddedPostgres(dataDir).catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`e2e-quickstart timings (ms): ${JSON.stringify(timings)}`);
});

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => console.error(transcript()));
});

// Shared by the tests below, in order.
let firstRunId = '';
let firstOutput = '';
let serverPid = 0;
let pgPort = 0;

it(
  '`serve` with nothing configured starts the embedded PostgreSQL and the demo model answers the README curl',
  async () => {
    const { proc: serve, banner } = await timed('first serve (initdb) to banner', () => startServe('serve#1'));
    expect(banner.url).toBe(`http://127.0.0.1:${port}`);
    expect(serve.out).toContain(`database: embedded PostgreSQL in ${dataDir} (port `);
    expect(serve.out).toContain('model:    demo (offline stand-in; set ANTHROPIC_API_KEY for Claude)');
    expect(serve.out).toContain(`curl -s -X POST ${banner.url}/api/runs -H 'Content-Type: application/json'`);
    // The warning is a log line, written asynchronously: it may arrive just after the banner.
    await waitForOutput(serve, /ANTHROPIC_API_KEY is not set: using the offline demo model/, 10_000);
    // The curl printed is the README's.
    expect(fs.readFileSync('README.md', 'utf8')).toContain(`-d '${banner.body}'`);
    expect(JSON.parse(banner.body)).toEqual({ input: QUESTION, tokenBudget: 50000, timeoutSeconds: 300 });

    // The server lives under DATA_DIR, one postmaster, started by this serve.
    expect(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
    const pms = postmasters();
    expect(pms).toHaveLength(1);
    expect(pidFile()).toBe(pms[0]!.pid);
    serverPid = pms[0]!.pid;
    pgPort = banner.pgPort;

    const health = await api(`${banner.url}/healthz`);
    expect(health).toEqual({ status: 200, body: { ok: true } });

    const id = await timed('first run', async () => {
      const runId = await startRun(banner.url, banner.body);
      await finished(banner.url, runId);
      return runId;
    });
    const { body: run } = await api(`${banner.url}/api/runs/${id}`);
    expect(run.status, JSON.stringify(run)).toBe('SUCCEEDED');
    expect(run.model).toBe('demo');
    expect(run.output).toMatch(/^\[demo model\] /);
    expect(run.output).toMatch(/ACME-\d+/);
    expect(run.tokensUsed).toBeGreaterThan(0);
    expect(run.tokenBudget).toBe(50000);

    const { body: timeline } = await api(`${banner.url}/api/runs/${id}/timeline`);
    expect(timeline.map((s: Json) => [s.seq, s.kind, s.status, s.toolName, s.stopReason])).toEqual([
      [1, 'MODEL', 'DONE', null, 'tool_use'],
      [2, 'TOOL', 'DONE', 'list_tickets', null],
      [3, 'MODEL', 'DONE', null, 'end_turn'],
    ]);
    const { body: firstStep } = await api(`${banner.url}/api/runs/${id}/steps/1`);
    expect(JSON.stringify(firstStep.response)).toContain('"customer":"acme"');
    firstRunId = id;
    firstOutput = run.output;
  },
  STEP_TIMEOUT,
);

it(
  'a second `worker` process shares the running server; both stop on SIGTERM and the server stops with the last',
  async () => {
    const serve = procs.all.find((p) => p.name === 'serve#1')!;
    expect(alive(serve)).toBe(true);
    const worker = startCli('worker', ['worker']);
    const [line] = await timed('worker to start', () => waitForOutput(worker, /\{[^\n]*"msg":"worker [^"\n]+ started"[^\n]*\}/, 90_000));
    const started = JSON.parse(line) as Json;
    expect(started.msg).toBe(`worker ${os.hostname()}-${worker.child.pid} started`);
    // It found the running server rather than starting another.
    expect(started.database).toBe(`embedded PostgreSQL in ${dataDir} (port ${pgPort})`);
    expect(postmasters().map((p) => p.pid)).toEqual([serverPid]);

    // Runs queued now may be taken by either process; they all succeed.
    const base = `http://127.0.0.1:${port}`;
    const ids = await Promise.all(Array.from({ length: 4 }, () => startRun(base, JSON.stringify({ input: QUESTION }))));
    const runs = await Promise.all(ids.map((id) => finished(base, id)));
    expect(runs.map((r) => r.status)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    const names = new Set([`${os.hostname()}-${serve.child.pid}`, `${os.hostname()}-${worker.child.pid}`]);
    for (const id of ids) {
      const { body: steps } = await api(`${base}/api/runs/${id}/timeline`);
      for (const s of steps as Json[]) expect(names).toContain(s.worker);
    }

    // Both asked to stop at the same moment: both exit 0, and the last one out stops the server.
    const [a, b] = await timed('serve and worker to exit', () => Promise.all([stopped(serve), stopped(worker)]));
    expect(a).toEqual({ code: 0, signal: null });
    expect(b).toEqual({ code: 0, signal: null });
    await timed('embedded server to stop', () => serverGone());
    expect(pidFile()).toBeNull();
  },
  STEP_TIMEOUT,
);

it(
  'a restart on the same DATA_DIR keeps the earlier runs',
  async () => {
    const { proc: serve, banner } = await timed('second serve (existing cluster) to banner', () => startServe('serve#2'));
    expect(banner.pgPort).toBe(pgPort); // the port is the cluster's, kept with its data
    const { body: run } = await api(`${banner.url}/api/runs/${firstRunId}`);
    expect(run).toMatchObject({ id: firstRunId, status: 'SUCCEEDED', output: firstOutput });
    const { body: page } = await api(`${banner.url}/api/runs?limit=10`);
    expect(page.runs).toHaveLength(5);
    expect(postmasters()).toHaveLength(1);
    serverPid = postmasters()[0]!.pid;
    expect(alive(serve)).toBe(true);
  },
  STEP_TIMEOUT,
);

it(
  'after SIGKILL of the serve that started it, the orphaned server is reused by the next serve',
  async () => {
    const owner = procs.all.find((p) => p.name === 'serve#2')!;
    expect(await stopped(owner, 'SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    // The server outlives its starter (it runs as its own daemon).
    expect(postmasters().map((p) => p.pid)).toEqual([serverPid]);

    const { banner } = await timed('serve after SIGKILL (orphaned server) to banner', () => startServe('serve#3'));
    expect(postmasters().map((p) => p.pid)).toEqual([serverPid]);
    const { body: run } = await api(`${banner.url}/api/runs/${firstRunId}`);
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: firstOutput });
    const id = await startRun(banner.url, JSON.stringify({ input: QUESTION }));
    expect((await finished(banner.url, id)).status).toBe('SUCCEEDED');
  },
  STEP_TIMEOUT,
);

it(
  'after the server itself is killed (stale postmaster.pid), the next serve starts it again',
  async () => {
    const owner = procs.all.find((p) => p.name === 'serve#3')!;
    expect(await stopped(owner, 'SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    const children = processes()
      .filter((p) => p.ppid === serverPid)
      .map((p) => p.pid);
    process.kill(serverPid, 'SIGKILL');
    // Its backends notice the postmaster's death and exit; only then may a new server use the directory.
    await until(
      'the killed server and its children to be gone',
      () => {
        const pids = new Set(processes().map((p) => p.pid));
        return !pids.has(serverPid) && children.every((c) => !pids.has(c));
      },
      15_000,
    );
    expect(pidFile()).toBe(serverPid); // left behind, naming a dead process

    const { proc: serve, banner } = await timed('serve after the server was killed to banner', () => startServe('serve#4'));
    const pms = postmasters();
    expect(pms).toHaveLength(1);
    expect(pms[0]!.pid).not.toBe(serverPid);
    expect(pidFile()).toBe(pms[0]!.pid);
    const { body: run } = await api(`${banner.url}/api/runs/${firstRunId}`);
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: firstOutput });

    expect(await stopped(serve)).toEqual({ code: 0, signal: null });
    await serverGone();
  },
  STEP_TIMEOUT,
);
