/**
 * Several agents by name on one database: each runtime claims only the runs of the agents it has,
 * a run of an agent nobody serves waits visibly, and runs are created, read and listed by agent.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime, type CreateRuntimeOptions } from '../../src/runtime/create-runtime.ts';
import { InputError } from '../../src/domain/errors.ts';
import type { LlmClient, LlmRequest } from '../../src/llm/types.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { silentLogger } from '../support/engine.ts';
import { response, usage } from '../support/scripted-llm.ts';

let db: TestDatabase;
const runtimes: AgentRuntime[] = [];
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await db.close();
});

/**
 * A runtime whose worker writes `worker` into every step it records. WORKER_NAME is read from the
 * environment when the runtime starts, as a deployment would set it.
 */
async function start(worker: string, options: Partial<CreateRuntimeOptions> & Pick<CreateRuntimeOptions, 'agents'>): Promise<AgentRuntime> {
  const saved = process.env.WORKER_NAME;
  process.env.WORKER_NAME = worker;
  try {
    const rt = await createRuntime({ api: false, databaseUrl: db.url, logger: silentLogger, ...options });
    runtimes.push(rt);
    return rt;
  } finally {
    if (saved === undefined) delete process.env.WORKER_NAME;
    else process.env.WORKER_NAME = saved;
  }
}

/** Calls the first tool it is offered once, then answers with the system prompt it was given. */
const politeModel: LlmClient = {
  provider: 'scripted',
  defaultModel: 'scripted-model',
  async send(req: LlmRequest) {
    const last = req.messages.at(-1)!;
    if (typeof last.content === 'string' && req.tools.length > 0) {
      const id = `toolu_${Math.random().toString(36).slice(2, 12)}`;
      return response([{ type: 'tool_use', id, name: req.tools[0]!.name, input: { ref: 'x' } }], 'tool_use', usage(50, 10));
    }
    return response([{ type: 'text', text: `done as: ${req.system}` }], 'end_turn', usage(60, 5));
  },
};

/** An agent whose one tool records which agent ran it for which run. */
function recordingAgent(name: string, toolName: string, calls: { agent: string; runId: string }[]) {
  const t = tool({
    name: toolName,
    description: `${toolName} for ${name}`,
    input: z.object({ ref: z.string() }),
    execute: async (_input, ctx) => {
      calls.push({ agent: name, runId: ctx.runId });
      return 'ok';
    },
  });
  return defineAgent({ name, system: `You are ${name}.`, tools: [t], version: `${name}-v1` });
}

it('two runtimes with different agents on one database: 50 runs each, every one driven by its own agent', async () => {
  const calls: { agent: string; runId: string }[] = [];
  const weather = recordingAgent('weather', 'get_forecast', calls);
  const billing = recordingAgent('billing', 'refund_invoice', calls);
  const forWeather = await start('worker-weather', { agents: [weather], llm: politeModel });
  const forBilling = await start('worker-billing', { agents: [billing], llm: politeModel });

  // Interleaved, so both workers see both agents' runs in the queue at once.
  const created = [];
  for (let i = 0; i < 50; i++) {
    created.push(await forWeather.runs.create({ input: `weather ${i}` }));
    created.push(await forBilling.runs.create({ input: `billing ${i}`, agent: 'billing' }));
  }
  const done = await Promise.all(created.map((r) => forWeather.runs.wait(r.id, { timeoutMs: 60_000 })));

  for (const run of done) {
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: `done as: You are ${run.agent}.`, agentVersion: `${run.agent}-v1` });
    const steps = await db.store.steps(run.id);
    expect(steps.map((s) => [s.kind, s.toolName, s.worker])).toEqual([
      ['MODEL', null, `worker-${run.agent}`],
      ['TOOL', run.agent === 'weather' ? 'get_forecast' : 'refund_invoice', `worker-${run.agent}`],
      ['MODEL', null, `worker-${run.agent}`],
    ]);
  }
  expect(done.filter((r) => r.agent === 'weather')).toHaveLength(50);
  expect(calls).toHaveLength(100);
  const agentOf = new Map(done.map((r) => [r.id as string, r.agent]));
  for (const call of calls) expect(call.agent).toBe(agentOf.get(call.runId));

  // Listed by agent.
  const page = await forBilling.runs.list({ agent: 'billing', limit: 100 });
  expect(page.runs).toHaveLength(50);
  expect(new Set(page.runs.map((r) => r.agent))).toEqual(new Set(['billing']));
});

it('a runtime serves several agents; a run of an agent nobody serves waits in the queue, visible per agent', async () => {
  const calls: { agent: string; runId: string }[] = [];
  const weather = recordingAgent('weather', 'get_forecast', calls);
  const billing = recordingAgent('billing', 'refund_invoice', calls);
  const ghost = recordingAgent('ghost', 'haunt', calls);
  const both = await start('worker-both', { agents: [weather, billing], llm: politeModel, api: { port: 0, host: '127.0.0.1' } });
  // A process that creates runs of an agent no worker has.
  const creator = await start('creator', { agents: [ghost], worker: false });

  const lost = await creator.runs.create({ input: 'boo' });
  const w = await both.runs.create({ input: 'rain?' });
  const b = await both.runs.create({ input: 'refund', agent: 'billing' });
  expect(w.agent).toBe('weather'); // the first agent is the default
  expect((await both.runs.wait(w.id, { timeoutMs: 20_000 })).output).toBe('done as: You are weather.');
  expect((await both.runs.wait(b.id, { timeoutMs: 20_000 })).output).toBe('done as: You are billing.');

  expect((await both.runs.get(lost.id))?.status).toBe('QUEUED');
  expect(await new RunStats(db.pool).queueDepth()).toEqual({ ghost: 1 });
  const metrics = await (await fetch(`${both.url}/metrics`)).text();
  expect(metrics).toMatch(/^agent_queue_depth\{agent="ghost"\} 1$/m);
  expect(metrics).toMatch(/^agent_queue_depth\{agent="weather"\} 0$/m);
  expect(calls.map((c) => c.agent).sort()).toEqual(['billing', 'weather']);

  // Over HTTP: the agent is named, shown, and filtered on; one this runtime lacks is a 400 naming it.
  const post = (body: unknown) =>
    fetch(`${both.url}/api/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const unknown = await post({ input: 'x', agent: 'ghost' });
  expect(unknown.status).toBe(400);
  expect(((await unknown.json()) as { error: { message: string } }).error.message).toBe(
    'invalid request body: agent: no agent "ghost" here (this runtime has "weather", "billing")',
  );
  const viaHttp = (await (await post({ input: 'refund 2', agent: 'billing' })).json()) as { id: string };
  const shown = (await (await fetch(`${both.url}/api/runs/${viaHttp.id}`)).json()) as Record<string, unknown>;
  expect(shown).toMatchObject({ agent: 'billing', agentVersion: 'billing-v1', previousRunId: null });
  const listed = (await (await fetch(`${both.url}/api/runs?agent=ghost`)).json()) as { runs: { id: string; agent: string }[] };
  expect(listed.runs.map((r) => [r.id, r.agent])).toEqual([[lost.id, 'ghost']]);

  await expect(creator.runs.create({ input: 'x', agent: 'weather' })).rejects.toThrow(InputError);
});
