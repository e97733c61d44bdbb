import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.ts';
import type { Message, RunId } from '../../src/domain/types.ts';
import { InputError } from '../../src/domain/errors.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createRuns } from '../../src/runs/runs.ts';
import { RunDeletion } from '../../src/store/retention.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const echo = defineTool<{ say?: string }>({
  name: 'echo',
  description: 'echoes',
  inputSchema: { type: 'object' },
  execute: async (i) => `echo ${i.say ?? ''}`,
});
const defaults = { agent: 'demo', model: 'default-model', tokenBudget: 50_000, timeoutSeconds: 120, maxSteps: 20 };

let db: TestDatabase;
let app: FastifyInstance;
beforeAll(async () => {
  db = await testDatabase();
  const metrics = createMetrics({ countRunsByStatus: async () => ({}), queueDepth: async () => ({}) }, { models: [] });
  app = createServer({
    store: db.records,
    listing: new RunListing(db.pool),
    defaults,
    checkDatabase: async () => {},
    metrics: () => metrics.render(),
    logger: false,
    deletion: new RunDeletion(db.pool),
  });
});
afterAll(async () => {
  await app.close();
  await db.close();
});

const post = (url: string, body: unknown) =>
  app.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
const get = async (url: string) => (await app.inject({ method: 'GET', url })).json();
const stepRows = async (runId: string) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run_step WHERE run_id = $1', [runId])).rows[0]!.n;

/** A finished source run: model (tool) 1, tool 2, model (tool) 3, tool 4, model (answer) 5. Returns it and what its model was sent. */
async function sourceRun(input = 'look twice') {
  const run = await newRun(db.records, input, { model: 'model-a' });
  const llm = new ScriptedLlm()
    .thenToolUse('toolu_1', 'echo', { say: 'one' })
    .thenToolUse('toolu_2', 'echo', { say: 'two' })
    .thenText('seen both');
  await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
  expect((await db.records.state(run.id)).status).toBe('SUCCEEDED');
  return { run, seen: llm.seen };
}

describe('POST /api/runs/{id}/fork', () => {
  it('continues the source after a tool turn with another model, referring to its steps instead of copying them', async () => {
    const { run: source, seen } = await sourceRun();
    const sourceRows = await stepRows(source.id);
    const res = await post(`/api/runs/${source.id}/fork`, { afterSeq: 2, model: 'model-b' });
    expect(res.statusCode).toBe(201);
    const fork = res.json();
    expect(fork).toEqual({ id: expect.any(String), status: 'QUEUED', forkedFrom: { runId: source.id, afterSeq: 2 } });
    expect(await stepRows(source.id)).toBe(sourceRows);
    expect(await stepRows(fork.id)).toBe(0); // nothing copied

    const llm = new ScriptedLlm().thenText('another view');
    await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
    const first = llm.seen[0]!;
    expect(first.model).toBe('model-b');
    // Exactly what the source sent its model after step 2: its input, the first turn and its result.
    expect(first.messages).toEqual(seen[1]!.messages);
    expect(first.messages.map((m: Message) => m.role)).toEqual(['user', 'assistant', 'user']);

    const done = await get(`/api/runs/${fork.id}`);
    expect(done).toMatchObject({
      status: 'SUCCEEDED',
      output: 'another view',
      model: 'model-b',
      forkedFrom: { runId: source.id, afterSeq: 2 },
    });
    expect(await stepRows(fork.id)).toBe(1); // only its own step is stored
    expect(await stepRows(source.id)).toBe(sourceRows);
    const timeline = await get(`/api/runs/${fork.id}/timeline`);
    expect(
      timeline.map((s: { seq: number; kind: string; inherited: boolean; inheritedFrom: string | null }) => [
        s.seq,
        s.kind,
        s.inherited,
        s.inheritedFrom,
      ]),
    ).toEqual([
      [1, 'MODEL', true, source.id],
      [2, 'TOOL', true, source.id],
      [3, 'MODEL', false, null],
    ]);
    // An inherited step's detail is the source's, its request rebuilt from the fork's log.
    const step2 = await get(`/api/runs/${fork.id}/steps/2`);
    expect(step2).toMatchObject({ seq: 2, inherited: true, request: { toolUseId: 'toolu_1', name: 'echo' }, response: 'echo one' });
    const step3 = await get(`/api/runs/${fork.id}/steps/3`);
    expect(step3.request.model).toBe('model-b');
    expect(step3.request.messages).toEqual(seen[1]!.messages);
    expect((await db.records.state(source.id)).output).toBe('seen both'); // the source is untouched
  });

  it('replaces the first user input when asked, and keeps the rest of the conversation', async () => {
    const { run: source, seen } = await sourceRun();
    const fork = (await post(`/api/runs/${source.id}/fork`, { afterSeq: 4, input: 'look twice, carefully' })).json();
    const llm = new ScriptedLlm().thenText('carefully seen');
    await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
    expect(llm.seen[0]!.model).toBe('model-a'); // the source's model when none is named
    expect(llm.seen[0]!.messages[0]).toEqual({ role: 'user', content: 'look twice, carefully' });
    expect(llm.seen[0]!.messages.slice(1)).toEqual(seen[2]!.messages.slice(1));
    expect((await db.records.state(fork.id as RunId)).input).toBe('look twice, carefully');
    // An inherited step's request is shown as the source sent it; the fork's own, as the fork did.
    expect((await get(`/api/runs/${fork.id}/steps/3`)).request.messages[0].content).toBe('look twice');
    expect((await get(`/api/runs/${fork.id}/steps/5`)).request.messages[0].content).toBe('look twice, carefully');
  });

  it('refuses a seq that splits a turn, listing the seqs that end one', async () => {
    const source = await newRun(db.records, 'two at once');
    const llm = new ScriptedLlm()
      .thenToolUses([
        { id: 'toolu_x', name: 'echo', input: {} },
        { id: 'toolu_y', name: 'echo', input: {} },
      ])
      .thenText('done');
    await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
    // Steps: 1 MODEL (two calls), 2 and 3 TOOL, 4 MODEL. Whole turns end after 3 and 4.
    for (const afterSeq of [1, 2, 5]) {
      const res = await post(`/api/runs/${source.id}/fork`, { afterSeq });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toContain('a fork can start after step 3, 4');
    }
    const ok = await post(`/api/runs/${source.id}/fork`, { afterSeq: 3 });
    expect(ok.statusCode).toBe(201);
    await db.records.cancel(ok.json().id); // no later test's worker is to drive it
    expect((await post(`/api/runs/${source.id}/fork`, { afterSeq: 0 })).statusCode).toBe(400);
    expect((await post(`/api/runs/00000000-0000-4000-8000-000000000000/fork`, { afterSeq: 1 })).statusCode).toBe(404);
  });

  it('forks a fork: the log walks both links', async () => {
    const { run: source, seen } = await sourceRun();
    const first = (await post(`/api/runs/${source.id}/fork`, { afterSeq: 2 })).json();
    await testWorker(db.store, new ScriptedLlm().thenToolUse('toolu_3', 'echo', { say: 'three' }).thenText('first fork done'), [echo], {
      name: 'W',
    }).runOnce();
    // The first fork's own steps: 3 MODEL (tool), 4 TOOL, 5 MODEL.
    const second = (await post(`/api/runs/${first.id}/fork`, { afterSeq: 4, model: 'model-c' })).json();
    const llm = new ScriptedLlm().thenText('second fork done');
    await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
    const messages = llm.seen[0]!.messages;
    expect(messages.slice(0, 3)).toEqual(seen[1]!.messages);
    expect(messages).toHaveLength(5);
    expect(JSON.stringify(messages[4])).toContain('echo three');
    const timeline = await get(`/api/runs/${second.id}/timeline`);
    expect(timeline.map((s: { inheritedFrom: string | null }) => s.inheritedFrom)).toEqual([
      source.id,
      source.id,
      first.id,
      first.id,
      null,
    ]);
  });

  it('one lineage for forks and follow-ups: a follow-up of a fork, and a fork of a follow-up', async () => {
    const { run: source, seen } = await sourceRun();
    const fork = (await post(`/api/runs/${source.id}/fork`, { afterSeq: 2 })).json();
    expect((await get(`/api/runs/${fork.id}`)).agent).toBe(source.agent); // the fork is a run of its source's agent
    await testWorker(db.store, new ScriptedLlm().thenText('fork answer'), [echo], { name: 'W' }).runOnce();
    // A follow-up of the fork: the fork's whole conversation (its source's steps 1..2, then its own), then a new input.
    const followUp = (await post('/api/runs', { input: 'and then?', previousRunId: fork.id })).json();
    const llm = new ScriptedLlm().thenToolUse('toolu_f', 'echo', { say: 'four' }).thenText('follow-up answer');
    await testWorker(db.store, llm, [echo], { name: 'W' }).runOnce();
    const messages = llm.seen[0]!.messages;
    expect(messages.slice(0, 3)).toEqual(seen[1]!.messages);
    expect(messages.slice(3)).toEqual([
      { role: 'assistant', content: [{ type: 'text', text: 'fork answer' }] },
      { role: 'user', content: 'and then?' },
    ]);
    // Its log is its own: it numbers from 1 and inherits no steps.
    const timeline = await get(`/api/runs/${followUp.id}/timeline`);
    expect(timeline.map((s: { seq: number; inherited: boolean }) => [s.seq, s.inherited])).toEqual([
      [1, false],
      [2, false],
      [3, false],
    ]);
    expect((await get(`/api/runs/${followUp.id}/steps/1`)).request.messages).toEqual(messages);
    // A fork of the follow-up after its tool turn replays the same conversation before it, then its own input.
    await post(`/api/runs/${followUp.id}/fork`, { afterSeq: 2, input: 'and then, briefly?' });
    const again = new ScriptedLlm().thenText('brief');
    await testWorker(db.store, again, [echo], { name: 'W' }).runOnce();
    const expected = [...llm.seen[1]!.messages];
    expected[4] = { role: 'user', content: 'and then, briefly?' };
    expect(again.seen[0]!.messages).toEqual(expected);
    expect(expected).toHaveLength(7);
    // The fork is kept from deletion while a follow-up continues it.
    const res = await app.inject({ method: 'DELETE', url: `/api/runs/${fork.id}` });
    expect(res.statusCode).toBe(409);
  });

  it('keeps a source with forks from deletion', async () => {
    const { run: source } = await sourceRun();
    const fork = (await post(`/api/runs/${source.id}/fork`, { afterSeq: 2 })).json();
    await db.records.cancel(fork.id);
    const res = await app.inject({ method: 'DELETE', url: `/api/runs/${source.id}` });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toContain('fork');
    expect((await app.inject({ method: 'DELETE', url: `/api/runs/${fork.id}` })).statusCode).toBe(204);
    expect((await app.inject({ method: 'DELETE', url: `/api/runs/${source.id}` })).statusCode).toBe(204);
  });
});

describe('rt.runs.fork', () => {
  it('forks with the same rules', async () => {
    const { run: source } = await sourceRun();
    const runs = createRuns({ store: db.records, listing: new RunListing(db.pool), defaults, waits: null as never });
    const fork = await runs.fork(source.id, { afterSeq: 5, model: 'model-z', maxSteps: 3 });
    expect(fork).toMatchObject({ status: 'QUEUED', model: 'model-z', maxSteps: 3, forkedFrom: { runId: source.id, afterSeq: 5 } });
    await db.records.cancel(fork.id);
    await expect(runs.fork(source.id, { afterSeq: 3 })).rejects.toThrow(InputError);
    await expect(runs.fork(source.id, { afterSeq: 3 })).rejects.toThrow(/a fork can start after step 2, 4, 5/);
  });
});
