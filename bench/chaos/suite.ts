/**
 * The chaos suite: several real worker processes drive many runs against a model stand-in while they
 * are killed at every named crash point and at random moments, their database backends are
 * terminated, and the PostgreSQL server is restarted (only a server the suite started itself). When
 * every run is terminal, each run is checked (checks.ts) and the figures are returned.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ensureEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { CRASH_POINTS } from '../../src/engine/crash-points.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { type CheckName, CHECKS, checkRun, type RunFacts } from './checks.ts';
import { startChaosModel } from './model.ts';

export interface ChaosOptions {
  runs: number;
  workers: number;
  /** Runs one worker process drives at once. */
  concurrency: number;
  /** @unit milliseconds — a random worker is killed (SIGKILL, at no named point) this often. */
  killEveryMs: number;
  /** @unit milliseconds — a random backend of the workers is terminated this often. */
  terminateEveryMs: number;
  /**
   * @unit milliseconds — only backends at least this old are terminated (default 15 s): sessions in use,
   * not those of a worker still starting up, which gives up on a failed start.
   */
  terminateOlderThanMs?: number;
  /** @unit milliseconds — the server is restarted this often; null: never (always so on a server the suite does not own). */
  restartEveryMs: number | null;
  /** @unit milliseconds — the model's latency, at most. */
  modelLatencyMs: number;
  /** @unit milliseconds — the tool's duration, at most. */
  toolMs: number;
  /** A PostgreSQL to work in (a scratch database, dropped after; never restarted); unset: an embedded one of the suite's own. */
  databaseUrl?: string | null;
  /** @unit milliseconds — the chaos gives up (and reports the runs left) after this long. */
  timeoutMs: number;
  /** Arm the workers' crash points (default true). */
  crashPoints?: boolean;
  /** Lease length of the workers: the default (30 s) proves takeovers do not wait for it. */
  leaseSeconds?: number;
  log?: (line: string) => void;
  /** Where the workers' stderr goes (appended); unset: nowhere. */
  workerLog?: string;
}

export interface ChaosReport {
  runs: number;
  succeeded: number;
  seconds: number;
  kills: Record<string, number>;
  backendsTerminated: number;
  serverRestarts: number;
  claims: number;
  repeatedModelCalls: number;
  repeatedToolRuns: number;
  /** @unit milliseconds — from a worker's death to each of its runs claimed by another, p50 and max. */
  takeoverMs: { p50: number; max: number; count: number };
  /** Per check: runs that passed it. */
  passed: Record<CheckName, number>;
  /** The first failures, for the reader. */
  failures: string[];
}

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(Math.random() * xs.length)];

interface Proc {
  name: string;
  child: ChildProcess;
  crashAt: string | null;
  killed: boolean;
  /** Started and claiming (a random kill is only worth it then). */
  ready: boolean;
}

async function database(opts: ChaosOptions): Promise<{ url: string; restart: (() => Promise<void>) | null; close(): Promise<void> }> {
  if (opts.databaseUrl) {
    const admin = new pg.Client({ connectionString: opts.databaseUrl });
    await admin.connect();
    const name = `durable_agent_chaos_${process.pid}`;
    await admin.query(`CREATE DATABASE ${name}`);
    const u = new URL(opts.databaseUrl);
    u.pathname = `/${name}`;
    return {
      url: u.toString(),
      restart: null,
      close: async () => {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      },
    };
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-chaos-'));
  fs.chmodSync(dataDir, 0o755);
  const cluster = await ensureEmbeddedPostgres(dataDir);
  return {
    url: cluster.adminUrl,
    restart: async () => {
      await stopEmbeddedPostgres(dataDir);
      await sleep(300);
      await ensureEmbeddedPostgres(dataDir);
    },
    close: async () => {
      await stopEmbeddedPostgres(dataDir);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => {});
  const db = await database(opts);
  const model = await startChaosModel(opts.modelLatencyMs);
  const pool = new pg.Pool({ connectionString: db.url, max: 4, application_name: 'chaos-suite' });
  pool.on('error', () => {});
  const procs = new Set<Proc>();
  const claims = new Map<string, { at: number; worker: string }[]>();
  const deaths = new Map<string, number>();
  const kills: Record<string, number> = {};
  let backendsTerminated = 0;
  let serverRestarts = 0;
  let generation = 0;
  let spawned = 0;
  let stopping = false;
  const started = Date.now();

  try {
    await migrate(pool);
    await pool.query(`CREATE SCHEMA chaos;
      CREATE TABLE chaos.execution (key text NOT NULL, run_id uuid NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE TABLE chaos.effect (key text PRIMARY KEY, run_id uuid NOT NULL)`);
    const records = new RunRecords(pool);

    const runIds: string[] = [];
    for (let i = 0; i < opts.runs; i++) {
      runIds.push(
        (
          await records.create({
            input: `chaos run ${i}`,
            model: 'chaos-model',
            tokenBudget: 1_000_000,
            timeoutSeconds: 3600,
            maxSteps: 20,
          })
        ).id,
      );
    }

    /**
     * A new worker process; most are armed at a crash point (in turn), a few are not, so runs make
     * progress. `again`: the generation of a worker that died before it was ready (a backend of its start-up
     * terminated, on a loaded machine); its successor keeps its crash point, or the armed points the
     * first workers hold could all be skipped for ones a short suite never reaches.
     */
    const spawnWorker = (again?: number) => {
      const gen = again ?? generation++;
      const name = `chaos-w${spawned++}`;
      const point = gen % 4 === 3 || opts.crashPoints === false ? null : CRASH_POINTS[gen % CRASH_POINTS.length]!;
      // The hit it fires at is within what a worker sees: a point is reached ~3 times a run or more, and
      // a worker takes about its share of the runs. Drawn up to 3 × the concurrency instead, the short
      // suite's workers (~10 runs each, up to 90) often never reached theirs, and a round could end
      // with no crash at all.
      const hits = Math.min(3 * opts.concurrency, Math.ceil(opts.runs / opts.workers));
      const crashAt = point ? `${point}:${1 + Math.floor(Math.random() * hits)}` : null;
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'worker.ts')], {
        env: {
          ...process.env,
          DATABASE_URL: db.url,
          WORKER_NAME: name,
          WORKER_CONCURRENCY: String(opts.concurrency),
          LEASE_SECONDS: String(opts.leaseSeconds ?? 30),
          LLM_PROVIDER: 'anthropic',
          ANTHROPIC_API_KEY: 'chaos',
          ANTHROPIC_BASE_URL: model.url,
          DEFAULT_MODEL: 'chaos-model',
          MAX_RUN_ATTEMPTS: '1000',
          MAX_ATTEMPTS: '20',
          RETRY_BASE_MS: '50',
          RETRY_CAP_MS: '500',
          POLL_INTERVAL_MS: '500',
          LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'fatal',
          SHUTDOWN_GRACE_SECONDS: '2',
          SHUTDOWN_FORCE_SECONDS: '2',
          CHAOS_TOOL_MS: String(opts.toolMs),
          DURABLE_AGENT_CRASH_AT: crashAt ?? '',
          RETENTION_DAYS: '',
        },
        stdio: ['ignore', 'pipe', opts.workerLog ? fs.openSync(opts.workerLog, 'a') : 'ignore'],
      });
      const p: Proc = { name, child, crashAt, killed: false, ready: false };
      procs.add(p);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const m = JSON.parse(line) as { claimed?: string; ready?: string };
        if (m.ready) p.ready = true;
        else if (!m.claimed && opts.workerLog) fs.appendFileSync(opts.workerLog, `${name} ${line}\n`); // its log lines
        if (m.claimed) {
          const list = claims.get(m.claimed) ?? [];
          list.push({ at: Date.now(), worker: name });
          claims.set(m.claimed, list);
        }
      });
      child.once('exit', (_code, signal) => {
        procs.delete(p);
        deaths.set(name, Date.now());
        if (signal === 'SIGKILL') {
          const why = p.killed ? 'random SIGKILL' : (p.crashAt?.split(':')[0] ?? 'unknown');
          kills[why] = (kills[why] ?? 0) + 1;
        }
        if (!stopping) setTimeout(() => spawnWorker(p.ready ? undefined : gen), 200);
      });
    };
    for (let i = 0; i < opts.workers; i++) spawnWorker();

    const every = (ms: number | null, f: () => Promise<void>) => {
      if (!ms) return () => {};
      let busy = false;
      const t = setInterval(() => {
        if (busy || stopping) return;
        busy = true;
        f()
          .catch((e: Error) => log(`chaos action failed: ${e.message}`))
          .finally(() => (busy = false));
      }, ms);
      return () => clearInterval(t);
    };
    const stopKills = every(opts.killEveryMs || null, async () => {
      const p = pick([...procs].filter((x) => x.ready));
      if (!p) return;
      p.killed = true;
      p.child.kill('SIGKILL');
    });
    const stopTerminations = every(opts.terminateEveryMs || null, async () => {
      const { rowCount } = await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name LIKE 'durable-agent%' AND pid <> pg_backend_pid()
            AND backend_start < now() - $1 * interval '1 millisecond'
          ORDER BY random() LIMIT 1 + (random() * 3)::int`,
        [opts.terminateOlderThanMs ?? 15_000],
      );
      backendsTerminated += rowCount ?? 0;
    });
    const stopRestarts = every(db.restart ? opts.restartEveryMs || null : null, async () => {
      await db.restart!();
      serverRestarts++;
      log(`server restarted (${serverRestarts})`);
    });

    let left = opts.runs;
    while (left > 0 && Date.now() - started < opts.timeoutMs) {
      await sleep(1_000);
      try {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM durable_agent.run WHERE status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`,
        );
        left = rows[0]!.n;
        log(
          `${Math.round((Date.now() - started) / 1000)} s: ${opts.runs - left}/${opts.runs} runs finished, ${procs.size} workers, kills ${JSON.stringify(kills)}`,
        );
      } catch {
        /* the server is restarting */
      }
    }
    stopping = true;
    stopKills();
    stopTerminations();
    stopRestarts();
    await Promise.all(
      [...procs].map((p) => {
        const exited = new Promise((r) => p.child.once('exit', r));
        p.child.kill('SIGTERM');
        const force = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
        return exited.finally(() => clearTimeout(force));
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    return await report(pool, runIds, { claims, deaths, kills, backendsTerminated, serverRestarts, seconds, model });
  } finally {
    stopping = true;
    for (const p of procs) p.child.kill('SIGKILL');
    await pool.end().catch(() => {});
    await model.close();
    await db.close();
  }
}

interface Observed {
  claims: Map<string, { at: number; worker: string }[]>;
  deaths: Map<string, number>;
  kills: Record<string, number>;
  backendsTerminated: number;
  serverRestarts: number;
  seconds: number;
  model: { calls: Map<string, number>; billed: Map<string, number> };
}

async function report(pool: pg.Pool, runIds: string[], o: Observed): Promise<ChaosReport> {
  const runs = (
    await pool.query<{ id: string; input: string; status: string; tokens_used: string }>(
      `SELECT id, input, status, tokens_used FROM durable_agent.run`,
    )
  ).rows;
  const steps = (
    await pool.query<{
      run_id: string;
      seq: number;
      kind: 'MODEL' | 'TOOL';
      status: string;
      tool_use_id: string | null;
      response: string | null;
      tokens: number;
    }>(
      `SELECT run_id, seq, kind, status, tool_use_id, CASE WHEN kind = 'MODEL' THEN response END AS response,
              input_tokens + cache_creation_input_tokens + output_tokens AS tokens
         FROM durable_agent.run_step ORDER BY run_id, seq`,
    )
  ).rows;
  const executions = (
    await pool.query<{ run_id: string; key: string; n: number }>(
      `SELECT run_id, key, count(*)::int AS n FROM chaos.execution GROUP BY 1, 2`,
    )
  ).rows;
  const effects = (await pool.query<{ run_id: string; key: string }>(`SELECT run_id, key FROM chaos.effect`)).rows;

  const facts = new Map<string, RunFacts>();
  for (const r of runs) {
    facts.set(r.id, {
      id: r.id,
      status: r.status,
      tokensUsed: Number(r.tokens_used),
      steps: [],
      claims: o.claims.get(r.id)?.length ?? 0,
      modelCalls: o.model.calls.get(r.input) ?? 0,
      billedTokens: o.model.billed.get(r.input) ?? 0,
      executions: new Map(),
      effects: new Map(),
    });
  }
  for (const s of steps) {
    const toolUses = s.response
      ? (JSON.parse(s.response) as { type: string; id?: string }[]).filter((b) => b.type === 'tool_use').map((b) => b.id!)
      : [];
    facts.get(s.run_id)?.steps.push({ seq: s.seq, kind: s.kind, status: s.status, toolUseId: s.tool_use_id, toolUses, tokens: s.tokens });
  }
  for (const e of executions) facts.get(e.run_id)?.executions.set(e.key, e.n);
  for (const e of effects) {
    const f = facts.get(e.run_id)?.effects;
    f?.set(e.key, (f.get(e.key) ?? 0) + 1);
  }

  const passed = Object.fromEntries(CHECKS.map((c) => [c, 0])) as Record<CheckName, number>;
  const failures: string[] = [];
  let repeatedModelCalls = 0;
  let repeatedToolRuns = 0;
  for (const id of runIds) {
    const f = facts.get(id)!;
    const failed = checkRun(f);
    for (const c of CHECKS) if (!failed.some((x) => x.check === c)) passed[c]++;
    for (const x of failed) if (failures.length < 20) failures.push(`run ${id}: ${x.check}: ${x.why}`);
    repeatedModelCalls += Math.max(0, f.modelCalls - f.steps.filter((s) => s.kind === 'MODEL').length);
    for (const n of f.executions.values()) repeatedToolRuns += n - 1;
  }

  // Takeover latency: a claim that follows a claim by a worker that died before it.
  const latencies: number[] = [];
  for (const list of o.claims.values()) {
    for (let i = 1; i < list.length; i++) {
      const died = o.deaths.get(list[i - 1]!.worker);
      if (died !== undefined && died <= list[i]!.at && list[i]!.worker !== list[i - 1]!.worker) latencies.push(list[i]!.at - died);
    }
  }
  latencies.sort((a, b) => a - b);
  return {
    runs: runIds.length,
    succeeded: runs.filter((r) => r.status === 'SUCCEEDED').length,
    seconds: Math.round(o.seconds),
    kills: o.kills,
    backendsTerminated: o.backendsTerminated,
    serverRestarts: o.serverRestarts,
    claims: [...o.claims.values()].reduce((n, l) => n + l.length, 0),
    repeatedModelCalls,
    repeatedToolRuns,
    takeoverMs: {
      p50: latencies[Math.floor(latencies.length / 2)] ?? 0,
      max: latencies[latencies.length - 1] ?? 0,
      count: latencies.length,
    },
    passed,
    failures,
  };
}

/** The report as a table for a terminal. */
export function formatReport(r: ChaosReport): string {
  const lines = [
    `${r.runs} runs (${r.succeeded} succeeded) in ${r.seconds} s · ${r.claims} claims · ${r.backendsTerminated} backends terminated · ${r.serverRestarts} server restarts`,
    `kills: ${
      Object.entries(r.kills)
        .map(([k, n]) => `${k} ${n}`)
        .join(' · ') || 'none'
    }`,
    `repeated model calls ${r.repeatedModelCalls} · repeated tool runs ${r.repeatedToolRuns} · takeover after a death: p50 ${r.takeoverMs.p50} ms, max ${r.takeoverMs.max} ms (${r.takeoverMs.count} takeovers)`,
    '',
    `${'check'.padEnd(40)} ${'runs passing'.padStart(14)}`,
    ...CHECKS.map((c) => `${c.padEnd(40)} ${`${r.passed[c]}/${r.runs}`.padStart(14)}`),
  ];
  if (r.failures.length) lines.push('', 'failures:', ...r.failures.map((f) => `  ${f}`));
  return lines.join('\n');
}
