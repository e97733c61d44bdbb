/**
 * `durable-agent schedules …` against a real `serve`, as a person runs them; and a schedule declared in
 * a `--config` module, made at start.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, freePort, runCli, serveDemo, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const procs = new CliProcesses();
let db: TestDatabase;
let base: string;
const cli = (...args: string[]) => runCli(['schedules', ...args], cleanEnv({ DURABLE_AGENT_URL: base }));

beforeAll(async () => {
  db = await testDatabase();
  base = (await serveDemo(procs, db.url, 0)).base;
}, 90_000);
afterAll(async () => {
  await procs.killAll();
  await db?.close();
});

it('creates, lists, pauses, resumes, triggers and deletes a schedule by its name; bad input is one line', async () => {
  const made = await cli(
    'create',
    'nightly',
    '--cron',
    '0 3 * * *',
    '--timezone',
    'Europe/Berlin',
    '--input',
    'Which tickets are overdue?',
  );
  expect(made).toMatchObject({ code: 0, err: '' });
  expect(made.out).toMatch(/^schedule nightly \([0-9a-f-]{36}\): next run 20\d\d-\d\d-\d\dT0[12]:00:00\.000Z\n$/);
  const listed = await cli('list');
  expect(listed.out).toMatch(/^NAME +CRON +TIMEZONE +AGENT +NEXT +LAST RUN +STATUS +SKIPPED +ID\n/);
  expect(listed.out).toMatch(/nightly +0 3 \* \* \* +Europe\/Berlin +demo +in \d+/);
  expect((await cli('pause', 'nightly')).out).toBe('schedule nightly paused\n');
  expect((await cli('list')).out).toMatch(/nightly .* paused /);
  expect((await cli('resume', 'nightly')).out).toMatch(/^schedule nightly resumed: next run /);
  const triggered = await cli('trigger', 'nightly');
  expect(triggered.out).toMatch(/^run [0-9a-f-]{36} QUEUED \(schedule nightly\): durable-agent runs show /);
  const json = JSON.parse((await cli('list', '--json')).out) as { schedules: { name: string; lastRunId: string | null }[] };
  expect(json.schedules.map((s) => s.name)).toEqual(['nightly']);
  expect((await cli('delete', 'nightly')).out).toBe('schedule nightly deleted\n');
  expect((await cli('list')).out).toBe('no schedules\n');

  const bad = await cli('create', 'x', '--cron', '61 * * * *', '--input', 'y');
  expect(bad.code).toBe(1);
  expect(bad.err.trim().split('\n')).toHaveLength(1);
  expect(bad.err).toMatch(/400 invalid request body: cron: .*minute/);
  expect((await cli('create', 'x', '--input', 'y')).code).toBe(2); // no --cron: usage
  expect((await cli('pause', 'nobody')).err).toMatch(/no schedule named "nobody"/);
});

it('serve --config makes the schedules the module declares', async () => {
  const port = await freePort();
  const serve = procs.start(
    'serve-config',
    ['serve', '--config', 'test/fixtures/nightly-agent.mjs'],
    cleanEnv({ DATABASE_URL: db.url, PORT: String(port), LLM_PROVIDER: 'demo', LOG_LEVEL: 'warn' }),
  );
  await waitForOutput(serve, /Then: curl/, 60_000);
  const page = (await (await fetch(`http://127.0.0.1:${port}/api/schedules`)).json()) as { schedules: Record<string, unknown>[] };
  expect(page.schedules).toEqual([
    expect.objectContaining({ name: 'nightly', source: 'code', agent: 'reporter', timezone: 'Europe/Berlin', input: 'the night report' }),
  ]);
});
