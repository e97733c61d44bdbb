/**
 * The `durable-agent` command as a user runs it, as a child process: its exit codes (0 done, 1 failed
 * while running, 2 bad usage or configuration, with one readable line), `migrate`, and the /metrics
 * endpoint of a worker-only process (METRICS_PORT).
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { listMigrations } from '../../src/db/migrate.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { CliProcesses, cleanEnv, exitWithin, freePort, type Proc, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

// Generous: each command starts Node and compiles the sources (seconds on a loaded 2-core machine).
const TEST_TIMEOUT = 180_000;
const procs = new CliProcesses();
let admin: pg.Client;
const created: string[] = [];

beforeAll(async () => {
  admin = new pg.Client({ connectionString: inject('adminUrl') });
  await admin.connect();
});
afterAll(async () => {
  await procs.killAll();
  for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  await admin.end();
});
beforeEach(({ onTestFailed }) => {
  onTestFailed(() => console.error(procs.transcript()));
});

/** An empty database of its own (not the migrated template), dropped after the file. */
async function emptyDatabase(): Promise<string> {
  const name = `${inject('dbPrefix')}_cli_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  created.push(name);
  const url = new URL(inject('adminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs the command to its end. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  const p: Proc = procs.start(args.join(' ') || '(none)', args, cleanEnv(env));
  const { code } = await exitWithin(p, 120_000);
  return { code, out: p.out, err: p.err };
}

const oneLine = (text: string) => {
  expect(text.endsWith('\n')).toBe(true);
  expect(text.trimEnd().split('\n')).toHaveLength(1);
  return text.trimEnd();
};

describe('exit codes', () => {
  it(
    '0 for --help; 2 with one line on stderr for bad usage or configuration',
    async () => {
      const closedPort = await freePort();
      const [help, unknown, badConfig, unreachable] = await Promise.all([
        cli(['--help']),
        cli(['frobnicate']),
        cli(['migrate'], { LEASE_SECONDS: 'soon' }),
        cli(['migrate'], { DATABASE_URL: `postgres://agent:hunter2@127.0.0.1:${closedPort}/agents` }),
      ]);
      expect(help.code).toBe(0);
      expect(help.out).toMatch(/^Usage: durable-agent <command>/m);
      expect(help.err).toBe('');

      expect(unknown.code).toBe(2);
      // One readable line, then the usage.
      expect(unknown.err.split('\n')[0]).toBe('durable-agent: unknown command "frobnicate"');
      expect(unknown.err).toMatch(/^Usage: durable-agent <command>/m);
      expect(badConfig.code).toBe(2);
      expect(oneLine(badConfig.err)).toBe('durable-agent: invalid configuration: LEASE_SECONDS: must be a number');
      expect(unreachable.code).toBe(2);
      expect(oneLine(unreachable.err)).toMatch(
        new RegExp(
          `^durable-agent: cannot use the database postgres://agent:\\*\\*\\*@127\\.0\\.0\\.1:${closedPort}/agents: .*ECONNREFUSED`,
        ),
      );
      expect(unreachable.err).not.toContain('hunter2');
    },
    TEST_TIMEOUT,
  );

  it(
    '2 when the port is taken, before any run is claimed',
    async () => {
      const db = await testDatabase();
      const taken = net.createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = taken.address() as net.AddressInfo;
        const res = await cli(['serve'], { DATABASE_URL: db.url, PORT: String(port) });
        expect(res.code).toBe(2);
        expect(oneLine(res.err)).toBe(`durable-agent: cannot listen on 127.0.0.1:${port} (in use); set PORT or --port`);
      } finally {
        taken.close();
        await db.close();
      }
    },
    TEST_TIMEOUT,
  );

  it(
    '1 with one line when something fails while running: a migration the database refuses',
    async () => {
      const url = await emptyDatabase();
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query('CREATE SCHEMA durable_agent; CREATE TABLE durable_agent.run (x int)'); // in the way of the first migration
      await c.end();
      const res = await cli(['migrate'], { DATABASE_URL: url });
      expect(res.code).toBe(1);
      expect(oneLine(res.err)).toBe('durable-agent: migration 0001_runs failed: relation "run" already exists');
    },
    TEST_TIMEOUT,
  );
});

it(
  '`migrate` applies the migrations to an empty database and exits 0, then finds it up to date',
  async () => {
    const url = await emptyDatabase();
    const redacted = url.replace(/:[^:@/]*@/, ':***@');
    const first = await cli(['migrate'], { DATABASE_URL: url });
    expect(first.code).toBe(0);
    const names = listMigrations().map((m) => m.name);
    expect(first.out).toBe(`applied ${names.join(', ')} to ${redacted}\n`);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const { rows } = await c.query<{ name: string }>('SELECT name FROM durable_agent.schema_migration ORDER BY version');
    expect(rows.map((r) => r.name)).toEqual(names);
    await c.end();
    const second = await cli(['migrate'], { DATABASE_URL: url });
    expect(second.code).toBe(0);
    expect(second.out).toBe(`${redacted} is up to date\n`);
  },
  TEST_TIMEOUT,
);

it(
  'a worker-only process serves /metrics on METRICS_PORT, counting the runs it drives',
  async () => {
    const db = await testDatabase();
    try {
      const metricsPort = await freePort();
      const worker = procs.start(
        'worker',
        ['worker'],
        cleanEnv({ DATABASE_URL: db.url, METRICS_PORT: String(metricsPort), DEMO_LATENCY_MS: '10', WORKER_NAME: 'metrics-worker' }),
      );
      await waitForOutput(worker, /"msg":"worker metrics-worker started"/, 120_000);
      expect(worker.out).toContain(`"metrics":"http://127.0.0.1:${metricsPort}/metrics"`);

      const run = await newRun(new RunRecords(db.pool), 'Which acme tickets are overdue?', { model: 'demo' });
      await until('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const body = await res.text();
      expect(body).toMatch(/^agent_runs_finished_total\{status="SUCCEEDED"\} 1$/m);
      expect(body).toMatch(/^agent_runs\{status="SUCCEEDED"\} 1$/m);
      expect(body).toMatch(/^agent_tokens_total\{model="demo",direction="output"\} [1-9]\d*$/m);
      const other = await fetch(`http://127.0.0.1:${metricsPort}/api/runs`);
      expect(other.status).toBe(404);
      expect(await other.json()).toEqual({ error: { code: 'not_found', message: expect.any(String) } });

      worker.child.kill('SIGTERM');
      expect(await exitWithin(worker, 30_000)).toEqual({ code: 0, signal: null });
    } finally {
      await db.close();
    }
  },
  TEST_TIMEOUT,
);
