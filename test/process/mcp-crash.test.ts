/**
 * A worker process SIGKILLed in the middle of an MCP tool call (the server got the call and has not
 * answered): what the tool's annotations say decides what the next worker does with it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import type { RunId } from '../../src/domain/types.ts';
import { silentLogger } from '../support/engine.ts';
import { toolThenTextLlm } from '../support/scripted-llm.ts';
import { killAll } from '../support/child-processes.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
let dir: string;
const children: ChildProcess[] = [];
const runtimes: AgentRuntime[] = [];
beforeEach(async () => {
  db = await testDatabase();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-crash-'));
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await killAll(children);
  fs.rmSync(dir, { recursive: true, force: true });
  await db.close();
});

interface Call {
  tool: string;
  meta: { idempotencyKey?: string } | null;
  pid: number;
}
const callsFile = () => path.join(dir, 'calls.jsonl');
const calls = (): Call[] =>
  fs.existsSync(callsFile())
    ? fs
        .readFileSync(callsFile(), 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Call)
    : [];

/** Worker A, a process of its own, whose server never answers `hang`. */
function startWorker(name: string, tool: string, input: unknown, hang: string): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/mcp-worker-process.ts')], {
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      WORKER_NAME: name,
      LEASE_SECONDS: '30',
      POLL_INTERVAL_MS: '100',
      MODEL_TOOL: tool,
      MODEL_TOOL_INPUT: JSON.stringify(input),
      MCP_TEST_CALLS: callsFile(),
      MCP_TEST_HANG: hang,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  return child;
}

/** Worker B, in this process: the same agent, its own server (which answers). */
async function startWorkerHere(tool: string, input: unknown): Promise<void> {
  const server = fileURLToPath(new URL('../support/mcp-order-server.mjs', import.meta.url));
  const agent = defineAgent({
    name: 'desk',
    system: 'You run the order desk.',
    tools: [],
    mcpServers: [
      { name: 'orders', command: process.execPath, args: [server], env: { MCP_TEST_CALLS: callsFile() }, connectTimeoutMs: 60_000 },
    ],
  });
  runtimes.push(
    await createRuntime({ agents: [agent], api: false, databaseUrl: db.url, llm: toolThenTextLlm(tool, input), logger: silentLogger }),
  );
}

/** Starts worker A, waits until the server has the call and the step is STARTED, then kills A with SIGKILL. */
async function killMidCall(runId: RunId, tool: string, input: unknown): Promise<void> {
  const a = startWorker('worker-A', tool, input, tool);
  await waitFor('the server to get the call', async () => calls().some((c) => c.tool === tool), 60_000);
  expect((await db.store.steps(runId)).map((s) => [s.kind, s.status])).toEqual([
    ['MODEL', 'DONE'],
    ['TOOL', 'STARTED'],
  ]);
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));
  // Instead of waiting out the lease of the dead worker.
  await expireLease(db.pool, runId);
}

it('an idempotent MCP call cut off by SIGKILL is sent again with the same idempotency key', async () => {
  const run = await newRun(db.records, 'Where is A-7?', { agent: 'desk' });
  await killMidCall(run.id, 'lookup_order', { orderId: 'A-7' });

  await startWorkerHere('lookup_order', { orderId: 'A-7' });
  await waitFor('worker B to finish the run', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 60_000);
  const [first, second, ...rest] = calls();
  expect(rest).toEqual([]);
  expect(second!.meta!.idempotencyKey).toBe(first!.meta!.idempotencyKey);
  expect(second!.pid).not.toBe(first!.pid); // the new worker's own server
  const steps = await db.store.steps(run.id);
  expect(steps.map((s) => [s.seq, s.kind, s.status, s.worker === 'worker-A' ? 'A' : 'B'])).toEqual([
    [1, 'MODEL', 'DONE', 'A'],
    [2, 'TOOL', 'DONE', 'B'],
    [3, 'MODEL', 'DONE', 'B'],
  ]);
  expect(steps[1]!.response).toBe('order A-7: shipped');
}, 150_000);

it('a non-idempotent MCP call cut off by SIGKILL is never sent again: the run waits for a decision', async () => {
  const run = await newRun(db.records, 'Refund A-8.', { agent: 'desk' });
  await killMidCall(run.id, 'refund_order', { orderId: 'A-8', amount: 10 });

  await startWorkerHere('refund_order', { orderId: 'A-8', amount: 10 });
  const waiting = await waitFor(
    'worker B to stop the run for a decision',
    async () => {
      const r = await db.records.state(run.id);
      return r.status !== 'RUNNING' && r.status !== 'QUEUED' && r;
    },
    60_000,
  );
  expect(waiting).toMatchObject({
    status: 'WAITING',
    waiting: { kind: 'decision', toolCalls: [{ toolName: 'refund_order', input: { orderId: 'A-8', amount: 10 } }] },
  });
  expect(calls().map((c) => c.tool)).toEqual(['refund_order']);

  // A person checks: it did happen. The run goes on with that result, and the call is still never sent again.
  const toolUseId = waiting.waiting!.toolCalls[0]!.toolUseId;
  await runtimes[0]!.runs.decide(run.id, toolUseId, { decision: 'complete', result: 'refunded 10 on A-8 (checked by hand)' });
  expect(await runtimes[0]!.runs.wait(run.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
  expect((await db.store.steps(run.id))[1]).toMatchObject({
    kind: 'TOOL',
    status: 'DONE',
    response: 'refunded 10 on A-8 (checked by hand)',
  });
  expect(calls().map((c) => c.tool)).toEqual(['refund_order']);
}, 150_000);
