/**
 * Conversations that continue: a run created with `previousRunId` replays the chain of finished runs
 * before it (nothing is copied), then its own input, and survives a crash mid-chain like any run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRun, type RunDefaults } from '../../src/runs/new-run.ts';
import { createServer } from '../../src/api/server.ts';
import type { Message, RunId } from '../../src/domain/types.ts';
import { ConflictError, InputError } from '../../src/domain/errors.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { defineTool } from '../../src/tools/types.ts';
import { killAll } from '../support/child-processes.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, testWorker, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
const children: ChildProcess[] = [];
beforeAll(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await killAll(children);
});
afterAll(async () => {
  await db.close();
});

const DEFAULTS: RunDefaults = {
  agent: 'demo',
  model: 'test-model',
  agents: new Map([
    ['demo', { model: 'test-model', version: null }],
    ['other', { model: 'test-model', version: null }],
  ]),
  tokenBudget: 10_000,
  timeoutSeconds: 300,
  maxSteps: 20,
};
const create = (input: string, extra: Record<string, unknown> = {}, tenant = 'default') =>
  createRun(db.records, { input, ...extra } as never, DEFAULTS, 'options', tenant).then((c) => c.run);

const lookup = defineTool({
  name: 'slow',
  description: 'looks it up',
  inputSchema: { type: 'object' },
  async execute() {
    return 'slow result';
  },
});

const toolUse = (id: string) => ({ type: 'tool_use', id, name: 'slow', input: {} });
const toolResult = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'slow result' });

describe('previousRunId', () => {
  it("sends the model the earlier runs' turns in order, then the new input; the step detail shows the same", async () => {
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_first', 'slow', {})
      .thenText('first answer')
      .thenText('second answer')
      .thenToolUse('toolu_third', 'slow', {})
      .thenText('third answer');
    const worker = testWorker(db.store, llm, [lookup], { name: 'W' });
    const first = await create('first question');
    expect(await worker.runOnce()).toEqual({ runId: first.id, status: 'SUCCEEDED' });
    const second = await create('second question', { previousRunId: first.id });
    expect(second).toMatchObject({ previousRunId: first.id, agent: 'demo' });
    expect(await worker.runOnce()).toEqual({ runId: second.id, status: 'SUCCEEDED' });
    const third = await create('third question', { previousRunId: second.id });
    expect(await worker.runOnce()).toEqual({ runId: third.id, status: 'SUCCEEDED' });

    const firstTurns: Message[] = [
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: [toolUse('toolu_first')] },
      { role: 'user', content: [toolResult('toolu_first')] },
      { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
    ];
    const secondTurns: Message[] = [
      { role: 'user', content: 'second question' },
      { role: 'assistant', content: [{ type: 'text', text: 'second answer' }] },
    ];
    expect(llm.seen[2]!.messages).toEqual([...firstTurns, { role: 'user', content: 'second question' }]);
    expect(llm.seen[4]!.messages).toEqual([
      ...firstTurns,
      ...secondTurns,
      { role: 'user', content: 'third question' },
      { role: 'assistant', content: [toolUse('toolu_third')] },
      { role: 'user', content: [toolResult('toolu_third')] },
    ]);
    // Storage stays linear: the later runs hold their own steps only.
    expect((await db.store.steps(third.id)).map((s) => s.seq)).toEqual([1, 2, 3]);

    const api = createServer({
      store: db.records,
      listing: new RunListing(db.pool),
      defaults: DEFAULTS,
      checkDatabase: async () => {},
      metrics: async () => ({ contentType: 'text/plain', body: '' }),
      logger: false,
    });
    try {
      const step = (await api.inject(`/api/runs/${third.id}/steps/3`)).json() as { request: { messages: Message[] } };
      expect(step.request.messages).toEqual(llm.seen[4]!.messages);
      const continued = await api.inject({ method: 'POST', url: '/api/runs', payload: { input: 'fourth', previousRunId: third.id } });
      expect(continued.statusCode).toBe(201);
      const shown = (await api.inject(`/api/runs/${continued.json().id}`)).json();
      expect(shown).toMatchObject({ previousRunId: third.id, agent: 'demo' });
      const running = await create('unfinished');
      const early = await api.inject({ method: 'POST', url: '/api/runs', payload: { input: 'too early', previousRunId: running.id } });
      expect(early.statusCode).toBe(409);
      await db.pool.query(`UPDATE durable_agent.run SET status = 'CANCELLED', finished_at = now() WHERE id = ANY($1)`, [
        [running.id, continued.json().id],
      ]);
    } finally {
      await api.close();
    }
  });

  it("refuses a run that does not exist, is another tenant's, has not finished, or is another agent's", async () => {
    const done = await create('done');
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED', finished_at = now() WHERE id = $1`, [done.id]);
    const refusal = (extra: Record<string, unknown>, tenant?: string) =>
      create('next', extra, tenant).then(
        () => null,
        (e: unknown) => e,
      );

    const missing = await refusal({ previousRunId: '00000000-0000-4000-8000-000000000000' });
    expect(missing).toBeInstanceOf(InputError);
    expect((missing as InputError).issues).toEqual([{ path: 'previousRunId', message: 'no run 00000000-0000-4000-8000-000000000000' }]);
    // Another tenant's run is reported exactly like a missing one.
    expect(((await refusal({ previousRunId: done.id }, 'acme')) as InputError).message).toBe(
      `invalid options: previousRunId: no run ${done.id}`,
    );
    const queued = await create('still queued');
    const early = await refusal({ previousRunId: queued.id });
    expect(early).toBeInstanceOf(ConflictError);
    expect((early as Error).message).toBe(`run ${queued.id} is QUEUED: a run can continue its conversation once it has finished`);
    const otherAgent = await refusal({ previousRunId: done.id, agent: 'other' });
    expect((otherAgent as InputError).message).toBe(
      `invalid options: agent: run ${done.id} is a run of agent "demo": a conversation continues with its agent`,
    );
    await db.pool.query(`UPDATE durable_agent.run SET status = 'CANCELLED', finished_at = now() WHERE id = $1`, [queued.id]);
  });

  it('keeps a conversation whole: a run another continues is deleted only after it', async () => {
    const first = await create('one');
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED', finished_at = now() - interval '2 days' WHERE id = $1`, [
      first.id,
    ]);
    const second = await create('two', { previousRunId: first.id });
    await db.pool.query(`UPDATE durable_agent.run SET status = 'SUCCEEDED', finished_at = now() - interval '1 day' WHERE id = $1`, [
      second.id,
    ]);
    const deletion = new RunDeletion(db.pool);
    await expect(deletion.deleteRun(first.id)).rejects.toThrow(
      `run ${first.id} is continued by a later run (previousRunId): delete that one first`,
    );
    // By age: both are past the cutoff; the later goes first, then the one it continued.
    await deletion.purge(new Date(Date.now() - 3_600_000), { batchSize: 1 });
    expect(await db.records.get(first.id)).toBeNull();
    expect(await db.records.get(second.id)).toBeNull();
  });
});

function startWorker(name: string): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, LEASE_MS: '1500', SLOW_TOOL_MS: '60000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

it('a chain replays correctly after its worker is killed (SIGKILL) in the middle of a later run', async () => {
  const llm = new ScriptedLlm().thenToolUse('toolu_one', 'slow', {}).thenText('first answer');
  const first = await create('chain one');
  expect(await testWorker(db.store, llm, [lookup], { name: 'W' }).runOnce()).toEqual({ runId: first.id, status: 'SUCCEEDED' });
  const second = await create('chain two', { previousRunId: first.id });

  // A worker process takes the second run, asks for the slow tool, and dies while it runs.
  const a = startWorker('worker-A');
  await waitFor(
    'worker A to start the tool',
    async () => (await db.store.steps(second.id)).some((s) => s.kind === 'TOOL' && s.status === 'STARTED'),
    30_000,
  );
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));
  await expireLease(db.pool, second.id);

  const resumed = new ScriptedLlm().thenText('second answer');
  expect(await testWorker(db.store, resumed, [lookup], { name: 'W2' }).runOnce()).toEqual({ runId: second.id, status: 'SUCCEEDED' });
  const [model1] = (await db.store.steps(second.id)).filter((s) => s.kind === 'MODEL');
  const secondUse = (model1!.response as unknown as { id: string }[])[0]!.id;
  expect(resumed.seen[0]!.messages).toEqual([
    { role: 'user', content: 'chain one' },
    { role: 'assistant', content: [toolUse('toolu_one')] },
    { role: 'user', content: [toolResult('toolu_one')] },
    { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
    { role: 'user', content: 'chain two' },
    { role: 'assistant', content: [toolUse(secondUse)] },
    { role: 'user', content: [toolResult(secondUse)] },
  ]);
  expect((await db.store.steps(second.id as RunId)).map((s) => [s.seq, s.kind, s.status, s.worker])).toEqual([
    [1, 'MODEL', 'DONE', 'worker-A'],
    [2, 'TOOL', 'DONE', 'W2'],
    [3, 'MODEL', 'DONE', 'W2'],
  ]);
});
