/**
 * Thinking and compaction across a crash, with real `durable-agent worker` processes against a local
 * Messages API: worker A is SIGKILLed at a named point, worker B resumes the run. A thinking block
 * goes back to the model byte for byte, signature and all, from the log; a summary is never asked
 * for twice, and the resumed run sends the recorded one.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { SUMMARY_REQUEST } from '../../src/core/compaction.ts';
import { CliProcesses, cleanEnv, exitWithin, until } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease } from '../support/engine.ts';
import { fake, startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-model-crash-0123456789';
const CONFIG = 'test/fixtures/model-features-agents.mjs';
const procs = new CliProcesses();
let db: TestDatabase;
let server: FakeAnthropic;

beforeAll(async () => {
  [db, server] = await Promise.all([testDatabase(), startFakeAnthropic({ apiKey: API_KEY })]);
});
afterAll(async () => {
  await procs.killAll();
  await Promise.all([db?.close(), server?.close()]);
});
beforeEach(({ onTestFailed }) => {
  server.reset();
  onTestFailed(() => console.error(procs.transcript()));
});

const env = (name: string, extra: Record<string, string> = {}) =>
  cleanEnv({
    DATABASE_URL: db.url,
    ANTHROPIC_API_KEY: API_KEY,
    ANTHROPIC_BASE_URL: server.url,
    RETRY_BASE_MS: '0',
    WORKER_NAME: name,
    LOG_LEVEL: 'warn',
    ...extra,
  });

/** Worker A dies at `crashAt`; B takes the run over once its lease is gone and finishes it. */
async function crashAndResume(runId: string, crashAt: string): Promise<void> {
  const a = procs.start('worker-A', ['worker', '--config', CONFIG], env('worker-A', { DURABLE_AGENT_CRASH_AT: crashAt }));
  expect(await exitWithin(a, 60_000)).toEqual({ code: null, signal: 'SIGKILL' });
  await expireLease(db.pool, runId);
  const b = procs.start('worker-B', ['worker', '--config', CONFIG], env('worker-B'));
  await until('worker B to finish the run', async () => (await db.records.state(runId as never)).status === 'SUCCEEDED', 60_000);
  b.child.kill('SIGTERM');
  expect((await exitWithin(b, 30_000)).code).toBe(0);
}

const newRun = (agent: string, input: string) =>
  db.records.create({ agent, input, model: 'claude-sonnet-4-6', tokenBudget: 100_000, timeoutSeconds: 300, maxSteps: 20 });

it('sends the thinking block back with its signature after a SIGKILL between the thinking step and the next call', async () => {
  const thinking = { type: 'thinking', thinking: 'I should look the word up first.', signature: 'EqQBCkgIARABGAIiQsig-crash' };
  server.enqueue(
    fake.reply({
      content: [thinking, { type: 'tool_use', id: 'toolu_k', name: 'lookup', input: { word: 'wren' } }],
      stopReason: 'tool_use',
    }),
    fake.text('A wren is a small bird.'),
  );
  const run = await newRun('thinker', 'What is a wren?');
  await crashAndResume(run.id, 'after-checkpoint');

  expect(server.requests.map((r) => r.status)).toEqual([200, 200]);
  const second = server.requests[1];
  expect(second!.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });
  expect(second!.body.messages[1]).toEqual({
    role: 'assistant',
    content: [thinking, { type: 'tool_use', id: 'toolu_k', name: 'lookup', input: { word: 'wren' } }],
  });
  expect(second!.body.messages[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_k', content: 'wren: a small bird' });
  const steps = await db.store.steps(run.id);
  expect(steps.map((s) => [s.kind, s.worker])).toEqual([
    ['MODEL', 'worker-A'],
    ['TOOL', 'worker-B'],
    ['MODEL', 'worker-B'],
  ]);
}, 180_000);

it('makes one summary step past atInputTokens; after a SIGKILL right after it, the resumed run sends that summary', async () => {
  server.enqueue(
    fake.toolUse('toolu_1', 'lookup', { word: 'wren' }, { input_tokens: 600 }),
    fake.toolUse('toolu_2', 'lookup', { word: 'robin' }, { input_tokens: 1_200 }),
    fake.text('The user asked about a wren: a small bird. SUMMARY-1', { input_tokens: 1_000, output_tokens: 40 }),
    fake.text('A robin is a small bird too.'),
  );
  const run = await newRun('compactor', 'What are wrens and robins?');
  await crashAndResume(run.id, 'after-compaction');

  expect(server.pending()).toBe(0);
  const summaries = server.requests.filter((r) => JSON.stringify(r.body.messages.at(-1)).includes(SUMMARY_REQUEST));
  expect(summaries).toHaveLength(1); // never asked for again
  // The run's own call (its system prompt and tools), so it reads the cached prefix.
  expect(JSON.stringify(summaries[0]!.body.system)).toContain('You look words up.');
  expect(summaries[0]!.body.tools.map((t: { name: string }) => t.name)).toEqual(['lookup']);
  // The summary call saw the turns before the cut, whole: the first tool_use with its result.
  const asked = summaries[0]!.body.messages;
  expect(asked.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user']);
  expect(asked[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_1' });

  const last = server.requests.at(-1)!.body.messages;
  expect(last[0].content[0].text).toContain('SUMMARY-1');
  // The kept turn: the second tool_use with its result right after it.
  expect(last[1]).toMatchObject({ role: 'assistant', content: [expect.objectContaining({ type: 'tool_use', id: 'toolu_2' })] });
  expect(last[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_2' });
  expect(last).toHaveLength(3);

  const steps = await db.store.steps(run.id);
  const compactions = steps.filter((s) => s.request?.compaction);
  expect(compactions).toHaveLength(1);
  expect(compactions[0]).toMatchObject({ seq: 5, kind: 'MODEL', worker: 'worker-A', request: { compaction: { keptMessages: 2 } } });
  expect(steps.at(-1)).toMatchObject({ seq: 6, kind: 'MODEL', worker: 'worker-B' });
  expect(await db.records.state(run.id)).toMatchObject({ output: 'A robin is a small bird too.' });
}, 180_000);
