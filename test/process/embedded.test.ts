/**
 * The embedded PostgreSQL lifecycle on a cluster of its own (not the suite's): shared by concurrent
 * processes, restarted after its server was killed with SIGKILL (stale postmaster.pid), data kept.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.ts';
import { waitFor } from '../support/wait-for.ts';

const run = promisify(execFile);
let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-embedded-'));
  fs.chmodSync(dataDir, 0o755);
});
afterAll(async () => {
  await stopEmbeddedPostgres(dataDir).catch(() => {});
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The process is gone, or a zombie nobody reaped yet (it serves nothing). */
function exited(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

const postmasterPid = () => {
  const file = path.join(dataDir, 'pg', 'postmaster.pid');
  return fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').split('\n')[0]) : null;
};

async function query(url: string, sql: string): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

it('is started once when three processes ask for it at the same moment, and shared', async () => {
  const script = `import { ensureEmbeddedPostgres } from ${JSON.stringify(path.resolve('src/db/embedded.ts'))};
    const c = await ensureEmbeddedPostgres(${JSON.stringify(dataDir)});
    console.log(JSON.stringify({ port: c.port, startedHere: c.startedHere }));`;
  const outs = await Promise.all(
    [1, 2, 3].map(() => run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 90_000 })),
  );
  const results = outs.map((o) => JSON.parse(o.stdout.trim().split('\n').at(-1)!) as { port: number; startedHere: boolean });
  expect(new Set(results.map((r) => r.port)).size).toBe(1);
  expect(results.filter((r) => r.startedHere)).toHaveLength(1);
});

it('comes back after its server was killed with SIGKILL, with its data', async () => {
  const first = await ensureEmbeddedPostgres(dataDir);
  await query(first.adminUrl, "CREATE TABLE IF NOT EXISTS kept (v text); INSERT INTO kept VALUES ('before the kill')");
  const pid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGKILL');
  await waitFor('the killed server to be gone', () => exited(pid), 10_000);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(true); // stale

  const again = await ensureEmbeddedPostgres(dataDir);
  expect(again.startedHere).toBe(true);
  expect(again.port).toBe(first.port);
  expect(await query(again.adminUrl, 'SELECT v FROM kept')).toEqual([{ v: 'before the kill' }]);
});

it('stays up while any process is attached, even one with no open pool, and stops with the last', async () => {
  const { attachEmbeddedPostgres } = await import('../../src/db/embedded-sharing.ts');
  const api = await attachEmbeddedPostgres(dataDir); // e.g. an idle `serve --no-worker`: its pool has closed
  const worker = await attachEmbeddedPostgres(dataDir);
  expect(worker.port).toBe(api.port);
  expect(await worker.detach()).toBe(false);
  expect(await query(api.adminUrl, 'SELECT 1 AS up')).toEqual([{ up: 1 }]);
  expect(await api.detach()).toBe(true);
  await expect(query(api.adminUrl, 'SELECT 1')).rejects.toThrow();
});

it('refuses to touch a cluster whose credentials are missing, instead of starting afresh', async () => {
  const creds = path.join(dataDir, 'credentials.json');
  fs.renameSync(creds, `${creds}.bak`);
  try {
    await expect(ensureEmbeddedPostgres(dataDir)).rejects.toThrow(/holds a PostgreSQL cluster but .*credentials.json is missing/);
    expect(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
  } finally {
    fs.renameSync(`${creds}.bak`, creds);
  }
});

it('a process whose server died comes back to it (restarting it), so it still counts as present', async () => {
  const { attachEmbeddedPostgres } = await import('../../src/db/embedded-sharing.ts');
  const api = await attachEmbeddedPostgres(dataDir);
  const pid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGKILL');
  await waitFor(
    'a new server to answer',
    async () => {
      const now = postmasterPid();
      return now !== null && now !== pid && (await query(api.adminUrl, 'SELECT 1 AS up').catch(() => null));
    },
    20_000,
  );
  await waitFor(
    'the presence connection to be back',
    async () =>
      (await query(api.adminUrl, `SELECT 1 FROM pg_stat_activity WHERE application_name = 'durable-agent-presence'`).catch(() => []))
        .length > 0,
    20_000,
  );
  const worker = await attachEmbeddedPostgres(dataDir);
  expect(await worker.detach()).toBe(false); // the first process still counts
  expect(await api.detach()).toBe(true);
});

it('keeps postgres.log private and free of the values a failed statement quotes, also for a cluster made before', async () => {
  const logFile = path.join(dataDir, 'postgres.log');
  const mode = () => (fs.statSync(logFile).mode & 0o777).toString(8);
  const c = await ensureEmbeddedPostgres(dataDir);
  expect(mode()).toBe('600');

  // What an older install left: a log readable by all, and PostgreSQL's default logging of failures.
  fs.chmodSync(logFile, 0o644);
  await query(c.adminUrl, `ALTER SYSTEM SET log_min_error_statement = 'error'`);
  await query(c.adminUrl, `ALTER SYSTEM SET log_error_verbosity = 'verbose'`);
  await query(c.adminUrl, 'SELECT pg_reload_conf()');
  // The reload is a signal: wait until it was taken.
  await waitFor(
    'the reload to be taken',
    async () =>
      (await query(c.adminUrl, `SELECT 1 FROM pg_settings WHERE name = 'log_error_verbosity' AND setting = 'verbose'`)).length > 0,
    10_000,
  );
  const again = await ensureEmbeddedPostgres(dataDir);
  expect(again.startedHere).toBe(false); // found running, and brought up to date
  expect(mode()).toBe('600');

  const client = new pg.Client({ connectionString: again.adminUrl });
  await client.connect();
  try {
    await expect(client.query('SELECT $1::jsonb', ['{"token":"SECRET-JSON","bad":"\\ud800"}'])).rejects.toThrow(
      /invalid input syntax for type json/,
    );
    await client.query('CREATE TEMP TABLE once (k text PRIMARY KEY)');
    await client.query(`INSERT INTO once VALUES ('SECRET-KEY')`);
    await expect(client.query('INSERT INTO once VALUES ($1)', ['SECRET-KEY'])).rejects.toThrow(/duplicate key/);
  } finally {
    await client.end();
  }
  const log = fs.readFileSync(logFile, 'utf8');
  // The errors are logged (the server writes the line before it answers), what they were about is not.
  expect(log).toMatch(/ERROR: {2}invalid input syntax for type json/);
  expect(log).toMatch(/ERROR: {2}duplicate key value violates unique constraint/);
  expect(log).not.toContain('SECRET-');
  expect(log).not.toContain('STATEMENT:');
});
