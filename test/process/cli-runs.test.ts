/**
 * `durable-agent runs …` and `durable-agent keys …` as a user meets them: real processes against a
 * real server (`serve`, the demo model) on a real PostgreSQL. Text for people, `--json` for scripts,
 * exit codes 0 / 1 (the API refused or cannot be reached) / 2 (bad usage), each failure one line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, freePort, runCli, serveDemo, until } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
let base: string;
const procs = new CliProcesses();

async function cli(args: string[], extra: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  return runCli(args, cleanEnv({ DATABASE_URL: db.url, DURABLE_AGENT_URL: base, ...extra }));
}

async function createRun(input: string, key?: string): Promise<string> {
  const res = await fetch(`${base}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ input }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

const statusOf = async (id: string) =>
  (await db.pool.query<{ status: string }>('SELECT status FROM durable_agent.run WHERE id = $1', [id])).rows[0]?.status;

/** A run no worker will claim for an hour. */
async function queuedForLater(): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO durable_agent.run (id, input, model, token_budget, max_steps, deadline_at, run_at)
     VALUES (gen_random_uuid(), 'later', 'demo', 1000, 5, now() + interval '1 day', now() + interval '1 hour') RETURNING id`,
  );
  return rows[0]!.id;
}

let done: string;
let key: string;

beforeAll(async () => {
  db = await testDatabase();
  const { serve, base: url } = await serveDemo(procs, db.url, 0);
  base = url;
  expect(serve.out).toContain('auth:     none yet: no API key exists');
  done = await createRun('Which acme tickets are overdue?');
  await until('the demo run to finish', async () => (await statusOf(done)) === 'SUCCEEDED', 30_000);
}, 90_000);

afterAll(async () => {
  await procs.killAll();
  await db?.close();
});

describe('before any key', () => {
  it('runs list shows the runs in aligned columns, with relative times', async () => {
    const r = await cli(['runs', 'list']);
    expect(r, r.err).toMatchObject({ code: 0, err: '' });
    const [header, row] = r.out.split('\n');
    expect(header).toMatch(/^ID {2,}STATUS {2,}AGENT {2,}AGE {2,}DURATION {2}STEPS {2}TOKENS {2}COST {2}INPUT$/);
    expect(row).toMatch(
      new RegExp(
        `^${done} {2}SUCCEEDED {2}demo {2,}(just now|\\d+s ago) +[\\d.]+(ms|s) +3 +[\\d,]+ +\\$0 {2}Which acme tickets are overdue\\?$`,
      ),
    );
    // Columns line up: each title starts where its values do.
    expect(row!.indexOf('SUCCEEDED')).toBe(header!.indexOf('STATUS'));
  });

  it('runs list pages with a hint that keeps the filters and the page size', async () => {
    await createRun('a second run, for a second page');
    await until(
      'it to finish',
      async () => (await cli(['runs', 'list', '--status', 'SUCCEEDED', '--json'])).out.includes('a second run'),
      30_000,
    );
    const first = await cli(['runs', 'list', '--status', 'SUCCEEDED', '--limit', '1']);
    const hint = first.out.match(/^more: durable-agent (runs list .*)$/m)?.[1];
    expect(hint, first.out).toMatch(/^runs list --status SUCCEEDED --limit 1 --cursor \S+$/);
    const second = await cli(hint!.split(' '));
    expect(second.out).toContain(done);
    expect(second.out).not.toMatch(/QUEUED|RUNNING|CANCELLED|FAILED/);
  });
});

describe('keys', () => {
  it('create prints the key alone on stdout, once; list never shows it; the server requires keys from then on', async () => {
    const created = await cli(['keys', 'create', '--tenant', 'default', '--label', 'laptop']);
    expect(created.code, created.err).toBe(0);
    key = created.out.trim();
    expect(key).toMatch(/^dak_[A-Za-z0-9_-]{43}$/);
    expect(created.err).toMatch(/^created key [0-9a-f]{16} for tenant default \(laptop\)\.\nThis is the only time the key is shown/);

    const list = await cli(['keys', 'list']);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^ID {2,}TENANT {2,}LABEL {2,}CREATED {2,}LAST USED {2,}REVOKED\n[0-9a-f]{16} {2}default {2}laptop/);
    expect(list.out).not.toContain(key.slice(4, 20));

    // Within a second of the key's creation the running server wants one.
    await until('the server to require a key', async () => (await fetch(`${base}/api/runs`)).status === 401, 10_000);
    const refused = await cli(['runs', 'list']);
    expect(refused).toMatchObject({ code: 1, out: '' });
    expect(refused.err).toBe(
      'durable-agent: GET /api/runs: 401 an API key is required: send it as Authorization: Bearer <key> (set DURABLE_AGENT_KEY)\n',
    );
    expect((await cli(['runs', 'list'], { DURABLE_AGENT_KEY: key })).code).toBe(0);
  });
});

describe('runs, with a key', () => {
  it('show and steps: one run as text or as the API JSON', async () => {
    const show = await cli(['runs', 'show', done], { DURABLE_AGENT_KEY: key });
    expect(show.code, show.err).toBe(0);
    expect(show.out).toMatch(new RegExp(`^id {8}${done}\nstatus {4}SUCCEEDED\n`));
    expect(show.out).toMatch(/\ntokens {4}[\d,]+ of 100,000\n/);
    expect(show.out).toContain('\ninput:\n  Which acme tickets are overdue?\n');
    expect(show.out).toMatch(/\noutput:\n {2}\[demo model\]/);
    const json = await cli(['runs', 'show', done, '--json'], { DURABLE_AGENT_KEY: key });
    expect(JSON.parse(json.out)).toMatchObject({ id: done, status: 'SUCCEEDED', tenant: 'default' });

    const steps = await cli(['runs', 'steps', done], { DURABLE_AGENT_KEY: key });
    expect(steps.code, steps.err).toBe(0);
    const lines = steps.out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^SEQ +KIND +STATUS +TOOL +STOP +LATENCY +IN +OUT +COST +WORKER +STARTED$/);
    expect(lines.slice(1).map((l) => l.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['1 MODEL DONE', '2 TOOL DONE', '3 MODEL DONE']);
    expect(lines[2]!.indexOf('list_tickets')).toBe(lines[0]!.indexOf('TOOL'));
    expect(JSON.parse((await cli(['runs', 'steps', done, '--json'], { DURABLE_AGENT_KEY: key })).out)).toHaveLength(3);
  });

  it('fork: a new run from a finished one after a whole turn; a split turn is refused with the seqs that end one', async () => {
    const split = await cli(['runs', 'fork', done, '--after-seq', '1'], { DURABLE_AGENT_KEY: key });
    expect(split.code).toBe(1);
    expect(split.err).toContain('a fork can start after step 2, 3');
    const forked = await cli(['runs', 'fork', done, '--after-seq', '2', '--input', 'Which acme tickets are open?'], {
      DURABLE_AGENT_KEY: key,
    });
    expect(forked.code, forked.err).toBe(0);
    const [, id] = /^run (\S+) QUEUED \(a fork of run (\S+) after step 2\)\n$/.exec(forked.out) ?? [];
    expect(id).toBeDefined();
    await until('the fork to finish', async () => (await statusOf(id!)) === 'SUCCEEDED', 30_000);
    const show = JSON.parse((await cli(['runs', 'show', id!, '--json'], { DURABLE_AGENT_KEY: key })).out);
    expect(show).toMatchObject({ input: 'Which acme tickets are open?', forkedFrom: { runId: done, afterSeq: 2 } });
    expect((await cli(['runs', 'delete', id!], { DURABLE_AGENT_KEY: key })).code).toBe(0);
    expect((await cli(['runs', 'fork', done], { DURABLE_AGENT_KEY: key })).err).toContain('--after-seq must be a step number');
  });

  it('cancel, then delete; the API says no in one line with exit 1', async () => {
    const later = await queuedForLater();
    const cancelled = await cli(['runs', 'cancel', later], { DURABLE_AGENT_KEY: key });
    expect(cancelled).toMatchObject({ code: 0, out: `run ${later} CANCELLED\n` });
    const again = await cli(['runs', 'cancel', later], { DURABLE_AGENT_KEY: key });
    expect(again).toMatchObject({
      code: 1,
      out: '',
      err: `durable-agent: POST /api/runs/${later}/cancel: 409 run ${later} has already finished (CANCELLED)\n`,
    });

    const active = await queuedForLater();
    const early = await cli(['runs', 'delete', active], { DURABLE_AGENT_KEY: key });
    expect(early.code).toBe(1);
    expect(early.err).toContain('409 run');
    expect(early.err).toContain('cancel it first');

    const deleted = await cli(['runs', 'delete', later], { DURABLE_AGENT_KEY: key });
    expect(deleted).toMatchObject({ code: 0, out: `deleted run ${later}\n` });
    expect(await statusOf(later)).toBeUndefined();
    const gone = await cli(['runs', 'show', later], { DURABLE_AGENT_KEY: key });
    expect(gone).toMatchObject({ code: 1, err: `durable-agent: GET /api/runs/${later}: 404 run ${later} not found\n` });
  });

  it('approve and deny the tool calls a WAITING run holds; deny needs --reason', async () => {
    const waitingRun = async (input: string) => {
      const id = await createRun(input, key);
      await until('the run to wait for approval', async () => (await statusOf(id)) === 'WAITING', 30_000);
      const show = await cli(['runs', 'show', id, '--json'], { DURABLE_AGENT_KEY: key });
      return { id, toolUseId: JSON.parse(show.out).waiting.toolCalls[0].toolUseId as string };
    };
    const a = await waitingRun('Close ticket ACME-105 because it is a duplicate');
    const shown = await cli(['runs', 'show', a.id], { DURABLE_AGENT_KEY: key });
    expect(shown.out).toMatch(/waiting\s+approval since /);
    expect(shown.out).toContain(`${a.toolUseId} close_ticket {"ticketId":"ACME-105"`);
    expect(await cli(['runs', 'approve', a.id, a.toolUseId], { DURABLE_AGENT_KEY: key })).toMatchObject({
      code: 0,
      out: `approved ${a.toolUseId}; run ${a.id} continues\n`,
    });
    await until('the approved run to finish', async () => (await statusOf(a.id)) === 'SUCCEEDED', 30_000);

    const d = await waitingRun('Close ticket GLOBEX-202 because the typo is fixed');
    expect((await cli(['runs', 'deny', d.id, d.toolUseId], { DURABLE_AGENT_KEY: key })).code).toBe(2);
    expect(await cli(['runs', 'deny', d.id, d.toolUseId, '--reason', 'not yet verified'], { DURABLE_AGENT_KEY: key })).toMatchObject({
      code: 0,
      out: `denied ${d.toolUseId}; run ${d.id} continues\n`,
    });
    await until('the denied run to finish', async () => (await statusOf(d.id)) === 'SUCCEEDED', 30_000);
    const ticket = await db.pool.query(`SELECT status FROM durable_agent.demo_ticket WHERE id = 'GLOBEX-202'`);
    expect(ticket.rows[0].status).toBe('open');
    const again = await cli(['runs', 'approve', d.id, d.toolUseId], { DURABLE_AGENT_KEY: key });
    expect(again.code).toBe(1);
    expect(again.err).toContain('409');
  });

  it('purge deletes finished runs older than the duration, on the database directly', async () => {
    const old = await createRun('an old question', key);
    await until('the run to finish', async () => (await statusOf(old)) === 'SUCCEEDED', 30_000);
    await db.pool.query(`UPDATE durable_agent.run SET finished_at = now() - interval '40 days' WHERE id = $1`, [old]);
    const r = await cli(['runs', 'purge', '--older-than', '30d']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^deleted 1 finished run that finished before \d{4}-\d{2}-\d{2}T/);
    expect(await statusOf(old)).toBeUndefined();
    expect(await statusOf(done)).toBe('SUCCEEDED');
  });

  it('a revoked key stops working at once', async () => {
    const other = JSON.parse((await cli(['keys', 'create', '--tenant', 'default', '--json'])).out) as {
      id: string;
      key: string;
      tenant: string;
    };
    expect(other).toMatchObject({ tenant: 'default', key: expect.stringMatching(/^dak_/) });
    expect((await cli(['runs', 'list'], { DURABLE_AGENT_KEY: other.key })).code).toBe(0);
    const revoked = await cli(['keys', 'revoke', other.id]);
    expect(revoked).toMatchObject({ code: 0, out: `revoked key ${other.id} (tenant default); requests with it are refused from now on\n` });
    const r = await cli(['runs', 'list'], { DURABLE_AGENT_KEY: other.key });
    expect(r).toMatchObject({
      code: 1,
      out: '',
      err: 'durable-agent: GET /api/runs: 401 the API key is not valid (unknown or revoked) (check DURABLE_AGENT_KEY)\n',
    });
    expect((await cli(['keys', 'revoke', 'nope'])).code).toBe(1);
  });
});

describe('bad usage: one line, then the usage; exit 2', () => {
  it.each([
    [['runs'], 'runs: no subcommand given'],
    [['runs', 'bogus'], 'runs: unknown subcommand "bogus"'],
    [['runs', 'show'], 'runs show: missing <id>'],
    [['runs', 'show', 'x', 'y'], 'runs show: unexpected argument "y"'],
    [['runs', 'show', 'not-a-run'], 'runs show: "not-a-run" is not a run id (a UUID)'],
    [
      ['runs', 'list', '--status', 'DONE'],
      'runs list: --status must be one of QUEUED, RUNNING, WAITING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT',
    ],
    [['runs', 'list', '--limit', '0'], 'runs list: --limit must be a whole number from 1 to 100'],
    [['runs', 'list', '--bogus'], 'unknown option --bogus'],
    [['runs', 'purge'], 'runs purge: --older-than is required, e.g. --older-than 30d'],
    [['runs', 'purge', '--older-than', 'a month'], 'runs purge: --older-than "a month" is not a duration such as 30d, 12h or 90m'],
    [['keys', 'create'], 'keys create: --tenant is required'],
    [
      ['keys', 'create', '--tenant', 'no spaces'],
      'keys create: invalid tenant "no spaces": must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit',
    ],
    [['keys', 'list', '--tenant', 'x'], 'keys list: --tenant and --label apply to create'],
  ])('%j', async (args, line) => {
    const r = await cli(args);
    expect(r.code, r.err).toBe(2);
    expect(r.out).toBe('');
    expect(r.err.split('\n')[0]).toBe(`durable-agent: ${line}`);
    expect(r.err).toContain('Usage: durable-agent');
  });

  it('a server that is not there: exit 1, one line saying so', async () => {
    const port = await freePort();
    const r = await cli(['runs', 'list', '--url', `http://127.0.0.1:${port}`]);
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toBe(
      `durable-agent: cannot reach http://127.0.0.1:${port} (ECONNREFUSED): is the server running? (--url or DURABLE_AGENT_URL)\n`,
    );
  });

  it('runs --help lists every subcommand', async () => {
    const r = await cli(['runs', '--help']);
    expect(r.code).toBe(0);
    for (const sub of ['list', 'show <id>', 'steps <id>', 'cancel <id>', 'delete <id>', 'purge --older-than <duration>', 'fork <id>'])
      expect(r.out).toContain(`  ${sub}`);
  });
});
