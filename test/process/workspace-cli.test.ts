/**
 * An agent with a workspace served by the CLI, as a user runs it: `serve --config` with a module, the
 * model a fake Messages API; the files reach the API. A worker that cannot run the sandbox refuses to
 * start with one line naming the package.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, freePort, runCli, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { waitFor } from '../support/wait-for.ts';

const procs = new CliProcesses();
let db: TestDatabase;
let fake: FakeAnthropic;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'da-ws-cli-'));

beforeAll(async () => {
  db = await testDatabase();
  fake = await startFakeAnthropic({ apiKey: 'sk-ant-test-coder-0000' });
});
afterAll(async () => {
  await procs.killAll();
  await fake?.close();
  await db?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

it('serve --config drives a run in its workspace, and the API serves the files it made', async ({ onTestFailed }) => {
  onTestFailed(() => console.error(procs.transcript()));
  fake
    .toolUse('toolu_w', 'write_file', { path: 'hello.py', content: 'print("hello from the sandbox")\n' })
    .toolUse('toolu_b', 'bash', { command: 'python3 hello.py > out.txt && cat out.txt' })
    .text('Done: hello.py prints its greeting.');
  const port = await freePort();
  const env = cleanEnv({
    DATABASE_URL: db.url,
    PORT: String(port),
    ANTHROPIC_API_KEY: 'sk-ant-test-coder-0000',
    ANTHROPIC_BASE_URL: fake.url,
    WORKSPACE_ROOT: root,
    LOG_LEVEL: 'warn',
  });
  const serve = procs.start('serve', ['serve', '--config', 'test/fixtures/coder-agent.mjs'], env);
  await waitForOutput(serve, /Then: curl/, 60_000);
  const base = `http://127.0.0.1:${port}`;
  const created = await fetch(`${base}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'Write a hello world in Python and run it.' }),
  });
  const { id } = (await created.json()) as { id: string };
  const done = await waitFor(
    `run ${id} to finish`,
    async () => {
      const r = (await (await fetch(`${base}/api/runs/${id}`)).json()) as { status: string; output: string | null };
      return !['QUEUED', 'RUNNING'].includes(r.status) && r;
    },
    30_000,
  );
  expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'Done: hello.py prints its greeting.' });
  // The model was told of the built-in tools, and heard what the command printed.
  expect((fake.requests[0]!.body.tools as { name: string }[]).map((t) => t.name)).toEqual([
    'bash',
    'read_file',
    'write_file',
    'edit_file',
    'list_files',
  ]);
  expect(JSON.stringify(fake.requests[2]!.body.messages)).toContain('hello from the sandbox');
  const files = (await (await fetch(`${base}/api/runs/${id}/files`)).json()) as { files: { path: string }[] };
  expect(files.files.map((f) => f.path)).toEqual(['hello.py', 'out.txt']);
  expect(await (await fetch(`${base}/api/runs/${id}/files/out.txt`)).text()).toBe('hello from the sandbox\n');
});

it('a worker without bubblewrap refuses to start, in one line naming the package', async () => {
  const noBwrap = fs.mkdtempSync(path.join(os.tmpdir(), 'da-no-bwrap-'));
  const result = await runCli(
    ['worker', '--config', 'test/fixtures/coder-agent.mjs'],
    cleanEnv({ DATABASE_URL: db.url, WORKSPACE_ROOT: root, PATH: noBwrap, LOG_LEVEL: 'warn' }),
  );
  fs.rmSync(noBwrap, { recursive: true, force: true });
  expect(result.code).toBe(2);
  const lines = result.err.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^durable-agent: agent "coder": .*bwrap is not installed: install the package bubblewrap .*sandbox: 'none'/);
});
