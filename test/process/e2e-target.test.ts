/**
 * The README's kill -9 demo, end to end with real processes: `serve --no-worker` for the API, two
 * `worker` processes, the fake Messages API, a real PostgreSQL. Worker A claims the run; worker B starts
 * while A is mid-step and stays idle (A's heartbeat holds the lease). A is killed with SIGKILL while the
 * run's second model call (seq 3) is in flight; B resumes once A's lease lapses, at seq 2, without
 * repeating the first model call or the tool, and finishes the run. (Killing A during a slow tool
 * takes the same resume path; the demo tool is fast, so the slow step here is the model call.)
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, exitWithin, sleep, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-e2e-target-0123456789';
const QUESTION = 'Which acme tickets are overdue?';
const ANSWER = 'Two acme tickets are overdue: ACME-101 (due 2024-05-01) and ACME-104 (due 2024-05-20).';

const procs = new CliProcesses();
const startCli = (name: string, args: string[], env: NodeJS.ProcessEnv) => procs.start(name, args, env);

interface TimelineItem {
  seq: number;
  kind: string;
  status: string;
  toolName: string | null;
  toolUseId: string | null;
  stopReason: string | null;
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
  latencyMs: number | null;
  worker: string | null;
}

let db: TestDatabase;
let fakeApi: FakeAnthropic;

beforeAll(async () => {
  db = await testDatabase();
  fakeApi = await startFakeAnthropic({ apiKey: API_KEY });
});

afterAll(async () => {
  await procs.killAll();
  await fakeApi?.close();
  await db?.close();
});

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    console.error(procs.transcript());
    console.error(
      'fake Messages API requests:',
      JSON.stringify(
        fakeApi.requests.map((r) => ({ seq: r.seq, status: r.status, aborted: r.aborted, messages: r.body?.messages?.length })),
      ),
    );
  });
});

it('worker-A is killed mid-step; worker-B resumes from the checkpoint and the run succeeds without repeating paid work', async () => {
  const t0 = Date.now();
  const timing: Record<string, number> = {};
  const mark = (what: string) => (timing[what] = Date.now() - t0);

  // seq 1: the model asks for list_tickets at once. seq 3: worker-A's call hangs (it is killed while
  // waiting); worker-B's call of the same conversation gets the answer.
  fakeApi
    .toolUse(
      'toolu_01Ab',
      'list_tickets',
      { customer: 'acme', overdue: true },
      { input_tokens: 812, output_tokens: 64, cache_creation_input_tokens: 100 },
    )
    .delay(30_000)
    .text('never delivered: worker-A dies first', { input_tokens: 1210, output_tokens: 140 })
    .text(ANSWER, { input_tokens: 1210, output_tokens: 140, cache_read_input_tokens: 100 });

  const common = {
    DATABASE_URL: db.url,
    ANTHROPIC_API_KEY: API_KEY,
    ANTHROPIC_BASE_URL: fakeApi.url,
    LEASE_SECONDS: '3',
    PORT: '0',
    LOG_FORMAT: 'pretty',
    POLL_INTERVAL_MS: '200',
  };
  const serve = startCli('serve', ['serve', '--no-worker'], cleanEnv({ ...common, WORKER_NAME: 'serve' }));
  const workerA = startCli('worker-A', ['worker'], cleanEnv({ ...common, WORKER_NAME: 'worker-A' }));
  const [, url] = await waitForOutput(serve, /listening on (http:\/\/\S+)/, 30_000);
  expect(serve.out).toContain('none in this process (--no-worker)');
  await waitForOutput(workerA, /worker worker-A started/, 30_000);
  mark('serve and worker-A up');

  const created = await fetch(`${url}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: QUESTION, tokenBudget: 50_000, timeoutSeconds: 300 }),
  });
  expect(created.status).toBe(201);
  const { id, status } = (await created.json()) as { id: string; status: string };
  expect(status).toBe('QUEUED');
  const short = id.slice(0, 8);
  const timeline = async () => (await (await fetch(`${url}/api/runs/${id}/timeline`)).json()) as TimelineItem[];
  const getRun = async () => (await (await fetch(`${url}/api/runs/${id}`)).json()) as Record<string, any>;

  // Worker-A checkpoints the model step and the tool step, then waits on the second model call.
  await until(
    'worker-A to checkpoint seq 1 and seq 2 and call the model again',
    async () => {
      const steps = await timeline();
      return (
        steps.length === 2 &&
        steps.every((s) => s.status === 'DONE') &&
        fakeApi.requests.length === 2 &&
        fakeApi.requests[1]!.status === null
      );
    },
    30_000,
  );
  mark('worker-A in the seq 3 model call');

  // Worker-B starts while A is alive and mid-call: A's heartbeat keeps its lease, so B stays idle for
  // longer than a whole lease (LEASE_SECONDS=3).
  const workerB = startCli('worker-B', ['worker'], cleanEnv({ ...common, WORKER_NAME: 'worker-B' }));
  await waitForOutput(workerB, /worker worker-B started/, 30_000);
  mark('worker-B up');
  await sleep(3_500); // kept: that B takes nothing for longer than a lease is the test
  expect(workerB.out).not.toContain(`run=${short}`);
  expect(fakeApi.requests).toHaveLength(2);
  expect(fakeApi.requests[1]!.status).toBeNull();

  workerA.child.kill('SIGKILL');
  expect(await exitWithin(workerA, 5_000)).toEqual({ code: null, signal: 'SIGKILL' });
  const killedAt = Date.now();
  mark('worker-A killed');

  // A died holding the lease: the run is still RUNNING, its log holds the two checkpointed steps.
  expect((await getRun()).status).toBe('RUNNING');
  expect((await timeline()).map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'worker-A'],
    [2, 'TOOL', 'DONE', 'worker-A'],
  ]);

  await waitForOutput(workerB, /resumed at seq=/, 20_000);
  mark('worker-B resumed');
  // B takes over once the lease lapses: within a lease plus a poll or two, not a fresh start.
  expect(Date.now() - killedAt).toBeLessThan(20_000);
  const run = await until(
    'the run to finish',
    async () => {
      const r = await getRun();
      return r.status !== 'RUNNING' && r.status !== 'QUEUED' && r;
    },
    30_000,
  );
  mark('run finished');
  expect(run.status, JSON.stringify(run)).toBe('SUCCEEDED');
  expect(run.output).toBe(ANSWER);
  expect(run.error).toBeNull();
  expect(run.attempts).toBe(2);

  const steps = await timeline();
  expect(steps.map((s) => [s.seq, s.kind, s.status])).toEqual([
    [1, 'MODEL', 'DONE'],
    [2, 'TOOL', 'DONE'],
    [3, 'MODEL', 'DONE'],
  ]);
  expect(steps.map((s) => s.worker)).toEqual(['worker-A', 'worker-A', 'worker-B']);
  expect(steps[0]).toMatchObject({
    stopReason: 'tool_use',
    inputTokens: 812,
    outputTokens: 64,
    cacheCreationInputTokens: 100,
    cacheReadInputTokens: 0,
  });
  expect(steps[1]).toMatchObject({ toolName: 'list_tickets', toolUseId: 'toolu_01Ab' });
  expect(steps[2]).toMatchObject({
    stopReason: 'end_turn',
    inputTokens: 1210,
    outputTokens: 140,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 100,
  });

  // The budget counts input, cache writes and output; cache reads are not counted against it.
  const budgeted = steps.reduce((n, s) => n + s.inputTokens + s.cacheCreationInputTokens + s.outputTokens, 0);
  expect(budgeted).toBe(812 + 100 + 64 + 1210 + 140);
  expect(run.tokensUsed).toBe(budgeted);

  // Paid work was not repeated: the first model call happened once; the only repeated call is the
  // one A died waiting for, which B sent again with the very same conversation (rebuilt from the log).
  const requests = fakeApi.requests;
  expect(requests.map((r) => r.invalid)).toEqual([null, null, null]);
  expect(requests).toHaveLength(3);
  expect(requests.filter((r) => r.body.messages.length === 1)).toHaveLength(1);
  expect(JSON.stringify(requests[0]!.body.messages[0])).toContain(QUESTION);
  expect(requests[1]!.aborted).toBe(true);
  expect(requests[2]!.status).toBe(200);
  expect(requests[2]!.body.messages).toEqual(requests[1]!.body.messages);
  const last = requests[2]!.body.messages.at(-1);
  expect(last.role).toBe('user');
  expect(last.content).toEqual([expect.objectContaining({ type: 'tool_result', tool_use_id: 'toolu_01Ab' })]);
  expect(String(last.content[0].content)).toContain('ACME-');

  // The README's log lines, LOG_FORMAT=pretty.
  expect(workerA.out).toContain(`worker-A run=${short} seq=1 MODEL stop=tool_use in=812 out=64`);
  expect(workerA.out).toMatch(new RegExp(`worker-A run=${short} seq=2 TOOL list_tickets id=toolu_01Ab started`));
  expect(workerA.out).toMatch(new RegExp(`worker-A run=${short} seq=2 TOOL list_tickets id=toolu_01Ab done \\d+ms`));
  expect(workerA.out).not.toContain('seq=3 MODEL stop=');
  // Log lines are written asynchronously: the last one may arrive just after the API shows the run finished.
  await waitForOutput(workerB, new RegExp(`worker-B run=${short} SUCCEEDED`), 10_000);
  expect(workerB.out).toMatch(/worker-B run=\w{8} resumed at seq=/);
  expect(workerB.out).toContain(`worker-B run=${short} resumed at seq=2`);
  expect(workerB.out).toMatch(new RegExp(`worker-B run=${short} seq=3 MODEL stop=end_turn in=1210 out=140 cache_read=100 latency=\\d+ms`));
  expect(workerB.out).toContain(`worker-B run=${short} SUCCEEDED tokens=${budgeted}`);
  expect(workerB.out).not.toMatch(/seq=[12] /); // B neither re-ran the tool nor repeated the first call

  // Both remaining processes stop cleanly on SIGTERM.
  serve.child.kill('SIGTERM');
  workerB.child.kill('SIGTERM');
  expect(await exitWithin(serve, 10_000)).toEqual({ code: 0, signal: null });
  expect(await exitWithin(workerB, 10_000)).toEqual({ code: 0, signal: null });
  mark('serve and worker-B stopped');
  if (process.env.E2E_VERBOSE) console.log(procs.transcript());
  console.log(`e2e-target timings (ms since start): ${JSON.stringify(timing)}`);
}, 120_000);
