/**
 * The library surface in-process, on real PostgreSQL: tool() with zod, defineAgent, createRuntime and
 * rt.runs, as a program embedding durable-agent uses them (a scripted model stands in for Claude).
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { loadConfig } from '../../src/config/environment.ts';
import { type AgentRuntime, createRuntime, type CreateRuntimeOptions, type RuntimeEvent } from '../../src/runtime/create-runtime.ts';
import type { ToolResultBlock } from '../../src/domain/types.ts';
import { ConfigError, ConflictError, InputError, NotFoundError, WaitTimeoutError } from '../../src/domain/errors.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

let db: TestDatabase;
const runtimes: AgentRuntime[] = [];
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await db.close();
});

function weatherTool() {
  const execute = vi.fn(async ({ city, days }: { city: string; days: number }) => ({ city, forecast: 'rain', days }));
  const weather = tool({
    name: 'get_weather',
    description: 'The forecast for a city.',
    input: z.object({ city: z.string(), days: z.number().int().min(1).max(7).default(1) }),
    execute,
  });
  return { weather, execute };
}

const helperWith = (tools: Parameters<typeof defineAgent>[0]['tools']) =>
  defineAgent({ name: 'helper', system: 'You answer in one sentence.', tools, model: 'helper-model', maxTokens: 512 });

/** Lines a host program's own pino logger (not ours) receives. */
function hostLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { logger, lines };
}

async function start(options: Partial<CreateRuntimeOptions> & Pick<CreateRuntimeOptions, 'agents'>): Promise<AgentRuntime> {
  const rt = await createRuntime({ api: false, databaseUrl: db.url, logger: hostLogger().logger, ...options });
  runtimes.push(rt);
  return rt;
}

describe('an agent with a zod tool, end to end', () => {
  it('tells the model the schema, runs the tool with the parsed input, and answers an invalid input with an is_error naming the field', async () => {
    const { weather, execute } = weatherTool();
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_ok', 'get_weather', { city: 'Paris' })
      .thenToolUse('toolu_bad', 'get_weather', { city: 42, days: 2 })
      .thenText('Take an umbrella.');
    const { logger, lines } = hostLogger();
    const events: RuntimeEvent[] = [];
    const rt = await start({ agents: [helperWith([weather])], llm, logger, onEvent: (e) => events.push(e) });

    const run = await rt.runs.create({ input: 'Do I need an umbrella in Paris?' });
    expect(run).toMatchObject({ status: 'QUEUED', model: 'helper-model' });
    const done = await rt.runs.wait(run.id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ id: run.id, status: 'SUCCEEDED', output: 'Take an umbrella.' });

    // The valid call ran once with the parsed input (the default filled in); the invalid one never ran.
    expect(execute).toHaveBeenCalledTimes(1);
    expect(execute).toHaveBeenCalledWith(
      { city: 'Paris', days: 1 },
      expect.objectContaining({ idempotencyKey: 'toolu_ok', runId: run.id }),
    );

    const [first, , last] = llm.seen;
    expect(first).toMatchObject({ model: 'helper-model', maxTokens: 512, system: 'You answer in one sentence.' });
    expect(first!.tools).toEqual([
      {
        name: 'get_weather',
        description: 'The forecast for a city.',
        input_schema: {
          type: 'object',
          properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7, default: 1 } },
          required: ['city'],
        },
      },
    ]);
    const results = last!.messages
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b): b is ToolResultBlock => b.type === 'tool_result');
    expect(results).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_ok', content: '{"city":"Paris","forecast":"rain","days":1}' },
      {
        type: 'tool_result',
        tool_use_id: 'toolu_bad',
        content: 'error: invalid input for get_weather: city: Invalid input: expected string, received number',
        is_error: true,
      },
    ]);

    // The host's own logger got the run's lines with their run context. The run is visible as finished
    // the moment its last step commits; the worker reports that step a moment later.
    await vi.waitFor(() => expect(events.at(-1)?.type).toBe('runFinished'), { timeout: 5_000 });
    const stepLines = lines.filter((l) => l.event === 'model_step' || l.event === 'tool_step');
    expect(stepLines).toHaveLength(5);
    for (const l of stepLines) expect(l).toMatchObject({ run_id: run.id, step_seq: expect.any(Number), worker: expect.any(String) });
    expect(stepLines.map((l) => l.step_seq)).toEqual([1, 2, 3, 4, 5]);

    expect(events.map((e) => e.type)).toEqual([
      'runClaimed',
      'modelStep',
      'toolStarted',
      'toolStep',
      'modelStep',
      'toolStarted',
      'toolStep',
      'modelStep',
      'runFinished',
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'runFinished', status: 'SUCCEEDED', run: { id: run.id } });
    // Each event's run is a whole Run, as the store reads it when claimed: its times as Dates, and
    // nothing the engine keeps for itself (the lease's token is the right to write to the run).
    const claimed = events[0]!.type === 'runClaimed' ? events[0]!.run : null;
    expect(Object.keys(claimed!).sort()).toEqual(Object.keys(run).sort());
    expect(claimed).toMatchObject({ id: run.id, status: 'RUNNING', createdAt: run.createdAt, deadlineAt: run.deadlineAt, attempts: 1 });
    expect(claimed!.lockedUntil).toBeInstanceOf(Date);
    expect(claimed).not.toHaveProperty('lease');
  });
});

describe('rt.runs', () => {
  it('creates runs with the defaults and limits of POST /api/runs, which it shares', async () => {
    const rt = await start({ agents: [helperWith([])], worker: false, api: { port: 0 } });
    const config = loadConfig(undefined, { DATABASE_URL: db.url });
    const run = await rt.runs.create({ input: 'hello' });
    expect(run).toMatchObject({
      status: 'QUEUED',
      input: 'hello',
      model: 'helper-model',
      tokenBudget: config.defaultTokenBudget,
      maxSteps: config.maxSteps,
      metadata: {},
    });
    expect(run.deadlineAt.getTime() - run.createdAt.getTime()).toBe(config.defaultTimeoutSeconds * 1000);
    expect(
      await rt.runs.create({
        input: 'x',
        agent: 'helper',
        model: 'm2',
        tokenBudget: 5,
        timeoutSeconds: 9,
        maxSteps: 2,
        metadata: { a: 1 },
      }),
    ).toMatchObject({
      model: 'm2',
      tokenBudget: 5,
      maxSteps: 2,
      metadata: { a: 1 },
    });

    const refused = async (input: Record<string, unknown>) => {
      const e = await rt.runs.create(input as never).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(InputError);
      return (e as InputError).message;
    };
    expect(await refused({ input: '  ' })).toBe('invalid options: input: must not be blank');
    expect(await refused({ input: 'x', maxSteps: config.maxSteps + 1 })).toBe(
      `invalid options: maxSteps: must be at most ${config.maxSteps} (the server's MAX_STEPS)`,
    );
    expect(await refused({ input: 'x', agent: 'billing' })).toBe(
      'invalid options: agent: no agent "billing" here (this runtime has "helper")',
    );
    expect(await refused({ input: 'x', previousRunId: '00000000-0000-4000-8000-000000000000' })).toBe(
      'invalid options: previousRunId: no run 00000000-0000-4000-8000-000000000000',
    );
    const once = await rt.runs.create({ input: 'x', idempotencyKey: 'order-7' });
    expect((await rt.runs.create({ input: 'x', idempotencyKey: 'order-7' })).id).toBe(once.id);
    await expect(rt.runs.create({ input: 'y', idempotencyKey: 'order-7' })).rejects.toBeInstanceOf(ConflictError);
    expect(await refused({ input: 'x', startAt: 'tomorrow' })).toMatch(/^invalid options: startAt: /);
    expect(await refused({ input: 'x', previousRunId: 'nope' })).toMatch(/^invalid options: previousRunId: /);
    expect(await refused({ input: 'x', colour: 'red' })).toBe('invalid options: colour: unknown field');

    // The HTTP API refuses what rt.runs refuses, through the same function.
    const post = (body: unknown) =>
      fetch(`${rt.url}/api/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const wrongAgent = await post({ input: 'x', agent: 'billing' });
    expect(wrongAgent.status).toBe(400);
    expect(await wrongAgent.json()).toEqual({
      error: {
        code: 'invalid_request',
        message: 'invalid request body: agent: no agent "billing" here (this runtime has "helper")',
        issues: [{ path: 'agent', message: 'no agent "billing" here (this runtime has "helper")' }],
      },
    });
    const created = await post({ input: 'x', agent: 'helper' });
    expect(created.status).toBe(201);
    const viaHttp = await rt.runs.get(((await created.json()) as { id: string }).id);
    expect(viaHttp).toMatchObject({ status: 'QUEUED', model: 'helper-model', tokenBudget: config.defaultTokenBudget });
  });

  it('gets, lists and cancels runs; bad ids are InputErrors, unknown ones null or NotFoundError', async () => {
    const rt = await start({ agents: [helperWith([])], worker: false });
    const a = await rt.runs.create({ input: 'a' });
    const b = await rt.runs.create({ input: 'b' });
    expect(await rt.runs.get(a.id)).toMatchObject({ id: a.id, input: 'a' });
    expect(await rt.runs.get(UNKNOWN_ID)).toBeNull();
    await expect(rt.runs.get('nope')).rejects.toThrow('invalid options: id: must be a run id (a UUID)');

    const page = await rt.runs.list({ limit: 1 });
    expect(page.runs.map((r) => r.id)).toEqual([b.id]);
    expect((await rt.runs.list({ cursor: page.nextCursor! })).runs.map((r) => r.id)).toEqual([a.id]);
    await expect(rt.runs.list({ limit: 1000 })).rejects.toThrow(InputError);

    expect(await rt.runs.cancel(a.id)).toMatchObject({ id: a.id, status: 'CANCELLED', cancelRequested: true });
    await expect(rt.runs.cancel(a.id)).rejects.toThrow(ConflictError);
    await expect(rt.runs.cancel(UNKNOWN_ID)).rejects.toThrow(NotFoundError);
    expect((await rt.runs.list({ status: 'CANCELLED' })).runs.map((r) => r.id)).toEqual([a.id]);
  });

  it('waits for a run another process drives: woken by the database when the run finishes', async () => {
    const agents = [helperWith([])];
    const client = await start({ agents, worker: false });
    const run = await client.runs.create({ input: 'hello' });
    const waiting = client.runs.wait(run.id, { timeoutMs: 30_000 });
    // A second runtime on the same database, as another process would be, drives the run.
    const driver = await start({ agents, llm: new ScriptedLlm().thenText('Hi there.') });
    expect(await waiting).toMatchObject({ id: run.id, status: 'SUCCEEDED', output: 'Hi there.' });
    await driver.close();

    // A run cancelled while queued ends at once, and so does its wait.
    const queued = await client.runs.create({ input: 'never mind' });
    const cancelled = client.runs.wait(queued.id, { timeoutMs: 30_000 });
    await client.runs.cancel(queued.id);
    expect(await cancelled).toMatchObject({ status: 'CANCELLED' });
    // A finished run is answered at once.
    expect(await client.runs.wait(run.id)).toMatchObject({ status: 'SUCCEEDED' });
  });

  it('gives up waiting after timeoutMs, leaving the run alone; unknown runs and bad options are errors', async () => {
    const rt = await start({ agents: [helperWith([])], worker: false });
    const run = await rt.runs.create({ input: 'nobody drives me' });
    await expect(rt.runs.wait(run.id, { timeoutMs: 50 })).rejects.toThrow(new WaitTimeoutError(run.id, 50));
    expect(await rt.runs.get(run.id)).toMatchObject({ status: 'QUEUED' });
    await expect(rt.runs.wait(UNKNOWN_ID)).rejects.toThrow(new NotFoundError(`run ${UNKNOWN_ID} not found`));
    await expect(rt.runs.wait(run.id, { timeoutMs: 0 })).rejects.toThrow(/^invalid options: timeoutMs: /);

    // The expectation is attached before close rejects the wait, so the rejection is never unhandled.
    const pending = expect(rt.runs.wait(run.id)).rejects.toThrow('the runtime was closed while waiting for a run');
    await rt.close();
    await pending;
  });
});

describe('createRuntime', () => {
  it('serves the API on a free port with port 0, every operation named in /openapi.json', async () => {
    const rt = await start({ agents: [helperWith([])], worker: false, api: { port: 0, host: '127.0.0.1' } });
    expect(rt.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(rt.url).not.toMatch(/:0$/);
    expect((await fetch(`${rt.url}/healthz`)).status).toBe(200);
    const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    const ids = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.entries(ops).map(([method, op]) => [`${method.toUpperCase()} ${p}`, op.operationId]),
    );
    expect(Object.fromEntries(ids)).toMatchObject({
      'POST /api/runs': 'createRun',
      'GET /api/runs': 'listRuns',
      'GET /api/runs/{id}': 'getRun',
    });
    for (const [, id] of ids) expect(id).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids.map(([, id]) => id)).size).toBe(ids.length);
  });

  it('refuses agents that are not a non-empty list of distinct definitions, before touching the database', async () => {
    const one = helperWith([]);
    await expect(createRuntime({ agents: [one, { ...one }], databaseUrl: 'postgres://nobody@127.0.0.1:1/none' })).rejects.toThrow(
      new ConfigError('createRuntime: two agents are named "helper"'),
    );
    await expect(createRuntime({ agents: [] })).rejects.toThrow(ConfigError);
  });
});
