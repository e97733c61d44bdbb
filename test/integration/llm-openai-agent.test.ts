/**
 * A model client per agent, from code: `defineAgent({ …, llm: openAiCompatible({ apiKey, baseUrl, model }) })`
 * served by createRuntime against a local Chat Completions server, on real PostgreSQL. The run calls
 * the client's model, through its retries, and the API says which provider it went to.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import { openAiCompatible } from '../../src/llm/factories.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { silentLogger } from '../support/engine.ts';
import { startFakeOpenAi, type FakeOpenAi } from '../support/fake-openai.ts';

const API_KEY = 'sk-proj-test-agent-client-0123456789';
let db: TestDatabase;
let server: FakeOpenAi;
const runtimes: AgentRuntime[] = [];

beforeAll(async () => {
  [db, server] = await Promise.all([testDatabase(), startFakeOpenAi({ apiKey: API_KEY })]);
});
afterAll(async () => {
  await Promise.all(runtimes.map((rt) => rt.close()));
  await Promise.all([db?.close(), server?.close()]);
});

async function getRun(rt: AgentRuntime, id: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${rt.url}/api/runs/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

it("runs an agent's runs on its own OpenAI-compatible client: its default model, its retries, and the provider on GET /api/runs/{id}", async () => {
  const forecast = tool({
    name: 'get_forecast',
    description: 'The forecast for a city.',
    input: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, forecast: 'rain all afternoon' }),
  });
  const agent = () =>
    defineAgent({
      name: 'helper',
      system: 'You answer in one sentence.',
      tools: [forecast],
      // retryBaseMs 0: the 503 below is retried without a wait worth the name.
      llm: openAiCompatible({ apiKey: API_KEY, baseUrl: server.baseUrl, model: 'gpt-5.4-mini', retryBaseMs: 0 }),
    });
  server
    .error(503, { message: 'The engine is currently overloaded, please try again later', type: 'server_error' })
    .toolCalls([{ id: 'call_f', name: 'get_forecast', arguments: { city: 'Paris' } }], { prompt_tokens: 300, completion_tokens: 20 })
    .text('Yes: rain all afternoon.', { prompt_tokens: 350, completion_tokens: 8, cached_tokens: 256 });

  // An API-only runtime first: the run is queued and has made no model call yet.
  const api = await createRuntime({ agents: [agent()], worker: false, api: { port: 0 }, databaseUrl: db.url, logger: silentLogger });
  runtimes.push(api);
  const run = await api.runs.create({ input: 'Do I need an umbrella in Paris today?' });
  expect(run.model).toBe('gpt-5.4-mini'); // neither the run nor the agent named one: the client's
  expect(await getRun(api, run.id)).toMatchObject({ status: 'QUEUED', provider: null });

  const worker = await createRuntime({ agents: [agent()], api: false, databaseUrl: db.url, logger: silentLogger });
  runtimes.push(worker);
  const done = await api.runs.wait(run.id, { timeoutMs: 60_000 });
  expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'Yes: rain all afternoon.' });

  expect(server.requests.map((r) => [r.status, r.body.model])).toEqual([
    [503, 'gpt-5.4-mini'],
    [200, 'gpt-5.4-mini'],
    [200, 'gpt-5.4-mini'],
  ]);
  expect(server.requests.map((r) => r.invalid)).toEqual([null, null, null]);
  expect(server.requests[1]!.body.tools[0].function.name).toBe('get_forecast');
  const body = await getRun(api, run.id);
  expect(body).toMatchObject({ status: 'SUCCEEDED', provider: 'openai', model: 'gpt-5.4-mini' });
  // gpt-5.4-mini's prices: 0.75 in, 4.50 out, 0.075 cached, per million tokens.
  expect(body.costUsd).toBeCloseTo((300 * 0.75 + 20 * 4.5 + (350 - 256) * 0.75 + 8 * 4.5 + 256 * 0.075) / 1e6, 8);
  const timeline = (await (await fetch(`${api.url}/api/runs/${run.id}/timeline`)).json()) as { kind: string; attempts: number }[];
  expect(timeline.map((s) => [s.kind, s.attempts])).toEqual([
    ['MODEL', 2],
    ['TOOL', 1],
    ['MODEL', 1],
  ]);
});
