/**
 * `durable-agent runs tail <id>` against a real `serve` (the demo model, which streams its answer in
 * pieces): the text as it arrives, the steps as they finish, the end of the run; `--json` gives the
 * events themselves, which fold to the run's output.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { foldEvents } from '../../src/events/fold.ts';
import { assertBuilt, BIN, CliProcesses, cleanEnv, serveDemo } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const exec = promisify(execFile);
let db: TestDatabase;
let base: string;
const procs = new CliProcesses();

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  assertBuilt();
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], {
      env: cleanEnv({ DURABLE_AGENT_URL: base }),
      timeout: 30_000,
    });
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const { code, stdout, stderr } = e as { code: number; stdout: string; stderr: string };
    return { code, out: stdout, err: stderr };
  }
}

async function createRun(input: string): Promise<string> {
  const res = await fetch(`${base}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input }),
  });
  return ((await res.json()) as { id: string }).id;
}

const runOf = async (id: string) => (await (await fetch(`${base}/api/runs/${id}`)).json()) as { status: string; output: string | null };

beforeAll(async () => {
  db = await testDatabase();
  // Each model step streams over 2.5 s: the tail process (started after the run) is connected before
  // the last step streams, however slowly it starts on a loaded machine. Text streamed while nobody
  // follows the run is written in one piece with its checkpoint.
  const started = await serveDemo(procs, db.url, 2500);
  base = started.base;
}, 90_000);
afterAll(async () => {
  await procs.killAll();
  await db?.close();
});

it('prints the text as it streams and each step as it finishes, and exits 0 when the run ends', async () => {
  const id = await createRun('Which tickets are overdue?');
  const { code, out, err } = await cli(['runs', 'tail', id]);
  expect(err).toBe('');
  expect(code).toBe(0);
  const run = await runOf(id);
  expect(run.status).toBe('SUCCEEDED');
  expect(out).toContain(run.output!);
  expect(out).toMatch(/-- claimed by .+ \(attempt 1\)/);
  expect(out).toMatch(/-- step 1 MODEL DONE in=\d+ out=\d+ stop=tool_use/);
  expect(out).toMatch(/-- step 2: list_tickets /);
  expect(out).toMatch(/-- step 3 MODEL DONE .*stop=end_turn/);
  expect(out.trimEnd().split('\n').at(-1)).toBe('-- run SUCCEEDED');
});

it('--json prints the events, one a line, which fold to the output; an unknown run exits 1', async () => {
  const id = await createRun('Show me ticket ACME-101');
  const { code, out } = await cli(['runs', 'tail', id, '--json']);
  expect(code).toBe(0);
  const events = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { id: number; type: string; data: unknown });
  expect(events.filter((e) => e.type === 'text.delta').length).toBeGreaterThan(1); // the demo model streams in pieces
  expect(foldEvents(events).text).toBe((await runOf(id)).output);
  const missing = await cli(['runs', 'tail', '00000000-0000-4000-8000-000000000000']);
  expect(missing.code).toBe(1);
  expect(missing.err).toMatch(/404/);
});
