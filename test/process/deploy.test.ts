/**
 * A deploy in the middle of a run: the worker driving it dies, a worker running changed code (a new
 * system prompt, a tool removed, a tool added) resumes it. The run keeps the prompt and tool
 * definitions it started with; its tool calls run the new implementations by name, and a removed
 * tool reaches the model as an is_error result instead of crashing the run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ToolResultBlock } from '../../src/domain/types.ts';
import { stepDetail } from '../../src/api/step-detail.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let child: ChildProcess | null = null;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
  }
  await db.close();
});

const ORIGINAL_SYSTEM = 'You are a test agent.'; // what test/support/worker-process.ts serves

const fast = defineTool({
  name: 'fast',
  description: 'new in this release',
  inputSchema: { type: 'object' },
  async execute() {
    return 'fast result';
  },
});

it('a run resumed by changed code keeps its original prompt and tool definitions; a removed tool is an is_error result', async () => {
  const run = await newRun(db.records, 'deploy while I work');
  // The old release: a worker process with the slow tool; it starts the tool, and is killed mid-call.
  child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: 'old-release', LEASE_MS: '1500', SLOW_TOOL_MS: '60000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await waitFor(
    'the old release to start the tool',
    async () => (await db.store.steps(run.id)).some((s) => s.kind === 'TOOL' && s.status === 'STARTED'),
    30_000,
  );
  child.kill('SIGKILL');
  await new Promise((r) => child!.once('exit', r));
  await expireLease(db.pool, run.id);

  // The new release: another prompt, `slow` removed, `fast` added.
  const llm = new ScriptedLlm().thenText('finished without it').thenText('a fresh answer');
  const worker = testWorker(db.store, llm, [fast], { name: 'new-release', system: 'You are the NEW agent.' });
  expect(await worker.runOnce()).toEqual({ runId: run.id, status: 'SUCCEEDED' });

  const [afterDeploy] = llm.seen;
  expect(afterDeploy!.system).toBe(ORIGINAL_SYSTEM);
  expect(afterDeploy!.tools.map((t) => t.name)).toEqual(['slow']);
  const results = afterDeploy!.messages.at(-1)!.content as ToolResultBlock[];
  expect(results).toEqual([expect.objectContaining({ type: 'tool_result', is_error: true })]);
  expect(results[0]!.content).toMatch(/^error: tool no longer available: this agent has no tool "slow"$/);

  const steps = await db.store.steps(run.id);
  expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'old-release'],
    [2, 'TOOL', 'ERROR', 'new-release'],
    [3, 'MODEL', 'DONE', 'new-release'],
  ]);
  // The step after the deploy records the original texts, so its rebuilt request is what was sent.
  expect(steps[2]!.request).toMatchObject({ systemDigest: steps[0]!.request!.systemDigest, toolsDigest: steps[0]!.request!.toolsDigest });
  const detail = await stepDetail(db.records, await db.records.state(run.id), 3);
  expect(detail.request).toMatchObject({ system: ORIGINAL_SYSTEM, tools: [expect.objectContaining({ name: 'slow' })] });

  // A run that starts on the new release gets the new prompt and tools.
  const fresh = await newRun(db.records, 'hello again');
  expect(await worker.runOnce()).toEqual({ runId: fresh.id, status: 'SUCCEEDED' });
  expect(llm.seen[1]!.system).toBe('You are the NEW agent.');
  expect(llm.seen[1]!.tools.map((t) => t.name)).toEqual(['fast']);
});
