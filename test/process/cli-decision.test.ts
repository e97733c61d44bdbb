/**
 * A non-idempotent tool call from Ctrl-C to a person's decision, as a user meets it at the terminal:
 * `serve` on a port that is not the CLI's default says which DURABLE_AGENT_URL to use; Ctrl-C while
 * the call runs says what the shutdown waits for and for how long; a second Ctrl-C exits and leaves
 * the call to a person; `runs show` then says what the run waits for and the commands that act; and
 * `runs complete` gives the call's result without running it again. Real processes, real PostgreSQL,
 * the model faked at the HTTP level.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, CliProcesses, cleanEnv, exitWithin, freePort, type Proc, until, waitForOutput, runCli } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';

const FIXTURE = 'test/fixtures/slow-charge-agent.mjs';
const API_KEY = 'sk-ant-test-decision-0000';
const TOOL_USE_ID = 'toolu_charge_1';

let db: TestDatabase;
let fake: FakeAnthropic;
const procs = new CliProcesses();

beforeAll(async () => {
  db = await testDatabase();
  fake = await startFakeAnthropic({ apiKey: API_KEY });
});

afterAll(async () => {
  await procs.killAll();
  await fake?.close();
  await db?.close();
});

async function cli(args: string[], url: string): Promise<{ code: number; out: string; err: string }> {
  return runCli(args, cleanEnv({ DURABLE_AGENT_URL: url }));
}

function serve(name: string, port: number) {
  const env = cleanEnv({
    DATABASE_URL: db.url,
    PORT: String(port),
    ANTHROPIC_API_KEY: API_KEY,
    ANTHROPIC_BASE_URL: fake.url,
    TOOL_TIMEOUT_SECONDS: '120',
    LOG_LEVEL: 'warn',
  });
  return procs.start(name, ['serve', '--config', FIXTURE], env);
}

const runRow = async (id: string) =>
  (await db.pool.query<{ status: string }>('SELECT status FROM durable_agent.run WHERE id = $1', [id])).rows[0]?.status;
const toolStep = async (id: string) =>
  (
    await db.pool.query<{ seq: number; status: string; response: string | null }>(
      `SELECT seq, status, response FROM durable_agent.run_step WHERE run_id = $1 AND kind = 'TOOL'`,
      [id],
    )
  ).rows[0];

describe('a non-idempotent tool call, Ctrl-C and a person (each step goes on from the one before)', () => {
  let first: Proc;
  let base: string;
  let id: string;
  let second: Proc;
  let base2: string;

  beforeAll(() => {
    fake.toolUse(TOOL_USE_ID, 'charge', { amount: 5 }).text('Charged 5.');
  });

  it('serve on a port that is not the CLI default says which DURABLE_AGENT_URL the runs commands need', async ({ onTestFailed }) => {
    onTestFailed(() => console.error(procs.transcript()));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    first = serve('serve', port);
    await waitForOutput(first, /Then: curl/, 60_000);
    expect(first.out).toContain(`\nThen: curl -s ${base}/api/runs/<id>   or   DURABLE_AGENT_URL=${base} durable-agent runs list\n`);
    expect(first.out).toContain(
      `\n  (the runs commands ask http://127.0.0.1:8080 unless told: export DURABLE_AGENT_URL=${base} once in your shell)\n`,
    );
  }, 90_000);

  it('Ctrl-C says which call the shutdown waits for and how long; a second Ctrl-C exits and leaves the call to a person', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(procs.transcript()));
    const created = await fetch(`${base}/api/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'Charge 5 to the card.', agent: 'billing' }),
    });
    expect(created.status).toBe(201);
    id = ((await created.json()) as { id: string }).id;
    await until('the charge to start', () => first.err.includes('charge started'), 30_000);

    first.child.kill('SIGINT');
    const [line] = await waitForOutput(first, /^.*"event":"shutdown_waits_for_tool".*$/m, 10_000);
    const said = JSON.parse(line) as { run_id: string; tool_name: string; step_seq: number; wait_up_to_ms: number; msg: string };
    expect(said).toMatchObject({ run_id: id, tool_name: 'charge', step_seq: 2 });
    expect(said.wait_up_to_ms).toBeGreaterThan(90_000);
    expect(said.wait_up_to_ms).toBeLessThanOrEqual(120_000);
    expect(said.msg).toMatch(
      new RegExp(
        `^shutdown waits for tool "charge" of run ${id} \\(step 2\\) to finish: it is not idempotent, so it is never cut off; up to (1m \\d+s|2m 0s) more \\(its timeout, TOOL_TIMEOUT_SECONDS=120\\)\\. Press Ctrl-C again to exit now and leave the call to a person's decision$`,
      ),
    );
    // It does wait: the call is far from done.
    expect(alive(first)).toBe(true);

    first.child.kill('SIGINT');
    expect(await exitWithin(first, 10_000)).toEqual({ code: 130, signal: null });
    const left = JSON.parse(first.out.match(/^.*"event":"tool_left_to_decide".*$/m)![0]) as { run_id: string; msg: string };
    expect(left).toMatchObject({ run_id: id, tool_name: 'charge', step_seq: 2, signal: 'SIGINT' });
    expect(left.msg).toBe(
      `exiting without waiting for tool "charge" of run ${id} (step 2): whether it ran is for a person to decide; ` +
        `the run waits for that decision once a worker takes it up again (durable-agent runs show ${id} says how)`,
    );
    expect(await toolStep(id)).toMatchObject({ seq: 2, status: 'STARTED' });

    // As the message says: the next worker to take the run up stops it for a person, and does not run the call again.
    const port2 = await freePort();
    base2 = `http://127.0.0.1:${port2}`;
    second = serve('serve again', port2);
    await waitForOutput(second, /Then: curl/, 60_000);
    await until('the run to wait for a decision', async () => (await runRow(id)) === 'WAITING', 30_000);
    expect(second.err).not.toContain('charge started');
  }, 120_000);

  it('runs show of the WAITING run says what it waits for and the exact commands that act', async ({ onTestFailed }) => {
    onTestFailed(() => console.error(procs.transcript()));
    const show = await cli(['runs', 'show', id], base2);
    expect(show, show.err).toMatchObject({ code: 0, err: '' });
    expect(show.out).toMatch(/\nwaiting {6}decision since \S+\n {2}tool call {2}toolu_charge_1 charge \{"amount":5\}\n/);
    const actions = show.out.slice(show.out.indexOf('\nwhat you can do:\n'), show.out.indexOf('\ninput:\n'));
    expect(actions).toBe(
      [
        '',
        'what you can do:',
        '  charge (toolu_charge_1) was cut off when its worker stopped, and it is not safe to run twice: did it happen?',
        `    durable-agent runs complete ${id} toolu_charge_1 --result '<its result>'  # it did: the model gets this as its result`,
        `    durable-agent runs approve ${id} toolu_charge_1                           # it did not: run it again`,
        `    durable-agent runs deny ${id} toolu_charge_1 --reason '<why>'             # do not run it; the model is told it may or may not have happened, and why`,
        '',
      ].join('\n'),
    );
  }, 60_000);

  it('runs complete records the result without running the call, and the run goes on; bad calls exit non-zero with one line', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(procs.transcript()));
    const missing = await cli(['runs', 'complete', id, TOOL_USE_ID], base2);
    expect(missing).toMatchObject({ code: 2, out: '' });
    expect(missing.err.split('\n')[0]).toBe(
      `durable-agent: runs complete: --result is required: what the call returned, e.g. --result '{"charged":true}'`,
    );
    expect((await cli(['runs', 'complete', id, TOOL_USE_ID, '--result', '  '], base2)).code).toBe(2);
    const notARun = await cli(['runs', 'complete', 'ACME-1', TOOL_USE_ID, '--result', 'x'], base2);
    expect(notARun.code).toBe(2);
    expect(notARun.err.split('\n')[0]).toBe('durable-agent: runs complete: "ACME-1" is not a run id (a UUID)');
    const wrongCall = await cli(['runs', 'complete', id, 'toolu_nope', '--result', 'x'], base2);
    expect(wrongCall).toMatchObject({
      code: 1,
      out: '',
      err: `durable-agent: POST /api/runs/${id}/tool-calls/toolu_nope/decision: 404 run ${id} has no tool call toolu_nope\n`,
    });

    const result = '{"charged":true,"receipt":"R-1"}';
    const completed = await cli(['runs', 'complete', id, TOOL_USE_ID, '--result', result], base2);
    expect(completed).toMatchObject({ code: 0, out: `completed ${TOOL_USE_ID}; run ${id} continues\n`, err: '' });
    await until('the run to finish', async () => (await runRow(id)) === 'SUCCEEDED', 30_000);
    expect(await toolStep(id)).toMatchObject({ seq: 2, status: 'DONE', response: result });
    expect(second.err).not.toContain('charge started');
    const last = fake.requests.at(-1)!;
    expect(JSON.stringify(last.body.messages)).toContain(`"tool_use_id":"${TOOL_USE_ID}","content":${JSON.stringify(result)}`);

    // The same decision again changes nothing and says where the run is.
    const again = await cli(['runs', 'complete', id, TOOL_USE_ID, '--result', result], base2);
    expect(again).toMatchObject({ code: 0, out: `completed ${TOOL_USE_ID}; run ${id} is SUCCEEDED\n` });
  }, 60_000);
});
