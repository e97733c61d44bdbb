/**
 * The `durable-agent` command as a user meets it: usage lines and exit codes, and `--config` serving
 * the user's own agent (a real process, real PostgreSQL, the model faked at the HTTP level).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, BIN, CliProcesses, cleanEnv, freePort, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';

const run = promisify(execFile);

/** Runs the command to its end: exit code, stdout, stderr. */
async function cli(args: string[], env: NodeJS.ProcessEnv = cleanEnv({})): Promise<{ code: number; out: string; err: string }> {
  assertBuilt();
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env, timeout: 30_000 });
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const { code, stdout, stderr } = e as { code: number; stdout: string; stderr: string };
    return { code, out: stdout, err: stderr };
  }
}

const USAGE_START = 'durable-agent — a durable runtime for LLM agents on PostgreSQL\n\nUsage: durable-agent <command> [options]\n';

describe('usage', () => {
  it('prints the usage on stdout for --help, -h and help, and exits 0', async () => {
    for (const args of [['--help'], ['-h'], ['help'], ['serve', '--help']]) {
      const r = await cli(args);
      expect(r, args.join(' ')).toMatchObject({ code: 0, err: '' });
      expect(r.out.startsWith(USAGE_START), args.join(' ')).toBe(true);
      expect(r.out).toContain('--config <file>');
    }
  });

  it.each([
    [[], 'no command given'],
    [['--bogus'], 'unknown option --bogus'],
    [['serve', '--bogus=1'], 'unknown option --bogus'],
    [['bogus'], 'unknown command "bogus"'],
    [['serve', 'extra'], 'unexpected argument "extra"'],
    [['serve', '--port'], "option '--port <value>' argument missing"],
    [['migrate', '--config', 'agents.mjs'], '--config applies to serve and worker'],
    [['worker', '--no-worker'], '--no-worker applies to serve'],
  ])('%j: one line saying what is wrong, then the usage, on stderr; exit 2', async (args, line) => {
    const [r, help] = await Promise.all([cli(args), cli(['help'])]);
    expect(r).toMatchObject({ code: 2, out: '' });
    expect(r.err).toBe(`durable-agent: ${line}\n\n${help.out}`);
  });

  it('a bad value in the configuration is one line without the usage; exit 2', async () => {
    const r = await cli(['serve', '--port', 'eighty']);
    expect(r).toMatchObject({ code: 2, out: '', err: 'durable-agent: invalid configuration: PORT: must be a number\n' });
  });
});

describe('--config', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-config-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const file = (name: string, text: string) => {
    fs.writeFileSync(path.join(dir, name), text);
    return path.join(dir, name);
  };

  it.each([
    ['a missing file', () => path.join(dir, 'nope.mjs'), (f: string) => `--config ${f}: no such file`],
    [
      'a module that throws',
      () => file('throws.mjs', "throw new Error('no agents today');\n"),
      (f: string) => `--config ${f}: cannot load it: no agents today`,
    ],
    [
      'another default export',
      () => file('shape.mjs', 'export default { agent: [] };\n'),
      (f: string) => `--config ${f}: its default export must be { agents: [...] } (export default { agents: [myAgent] })`,
    ],
    [
      'an invalid agent',
      () => file('invalid.mjs', "export default { agents: [{ name: 'a b', system: 's', tools: [] }] };\n"),
      (f: string) =>
        `--config ${f}: invalid agent "a b": name: use 1 to 64 letters, digits, "_", "." or "-", starting with a letter or digit`,
    ],
    [
      'two agents of one name',
      () => file('two.mjs', "export default { agents: [{ name: 'a', system: 's', tools: [] }, { name: 'a', system: 't', tools: [] }] };\n"),
      (f: string) => `--config ${f}: two agents are named "a"`,
    ],
  ])('refuses %s with one line, before touching a database; exit 2', async (_what, make, message) => {
    const f = make();
    // A database that cannot be reached: the config is read first, so this is never tried.
    const r = await cli(['worker', '--config', f], cleanEnv({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }));
    expect(r).toMatchObject({ code: 2, out: '', err: `durable-agent: ${message(f)}\n` });
  });

  describe('serving the agent of a module', () => {
    const procs = new CliProcesses();
    let db: TestDatabase;
    let fake: FakeAnthropic;
    beforeAll(async () => {
      db = await testDatabase();
      fake = await startFakeAnthropic({ apiKey: 'sk-ant-test-config-0000' });
    });
    afterAll(async () => {
      await procs.killAll();
      await fake?.close();
      await db?.close();
    });

    it('drives runs with its prompt, model and tools', async ({ onTestFailed }) => {
      onTestFailed(() => console.error(procs.transcript()));
      fake.toolUse('toolu_cfg_1', 'get_forecast', { city: 'Oslo' }).text('Rain all day in Oslo.');
      const port = await freePort();
      const env = cleanEnv({
        DATABASE_URL: db.url,
        PORT: String(port),
        ANTHROPIC_API_KEY: 'sk-ant-test-config-0000',
        ANTHROPIC_BASE_URL: fake.url,
        LOG_LEVEL: 'warn',
      });
      const serve = procs.start('serve', ['serve', '--config', 'test/fixtures/weather-agent.mjs'], env);
      await waitForOutput(serve, /Then: curl/, 60_000);
      expect(serve.out).toContain('  agent:    weather\n');

      const base = `http://127.0.0.1:${port}`;
      const created = await fetch(`${base}/api/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'Weather in Oslo?', agent: 'weather' }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const done = await until(
        `run ${id} to finish`,
        async () => {
          const r = (await (await fetch(`${base}/api/runs/${id}`)).json()) as { status: string };
          return r.status !== 'QUEUED' && r.status !== 'RUNNING' && r;
        },
        30_000,
      );
      expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'Rain all day in Oslo.', model: 'claude-weather' });

      const [first, second] = fake.requests;
      expect(first!.body.model).toBe('claude-weather');
      expect(JSON.stringify(first!.body.system)).toContain('You are the weather agent. Answer in one sentence.');
      expect(first!.body.tools).toEqual([
        expect.objectContaining({
          name: 'get_forecast',
          description: 'The forecast for a city.',
          input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        }),
      ]);
      expect(JSON.stringify(second!.body.messages)).toContain('"tool_use_id":"toolu_cfg_1","content":"Oslo: rain all day"');
    });
  });
});
