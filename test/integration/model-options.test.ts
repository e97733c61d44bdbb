/**
 * What a run asks of the model beyond its messages: model options from the agent and over them per
 * run, extended thinking carried across tool calls with its signatures, and an input of images and
 * documents. Runs through createRuntime against a local server speaking the Messages API (streamed),
 * on a real database; what is asserted is what reached the API and what a user reads back.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, type DefineAgentOptions } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import { anthropic } from '../../src/llm/factories.ts';
import { RunEvents } from '../../src/store/run-events.ts';
import type { RunId } from '../../src/domain/types.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { toolContent } from '../../src/core/content-blocks.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { silentLogger } from '../support/engine.ts';
import { fake, startFakeAnthropic, warmUp, type FakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-model-options-0123456789';
const MODEL = 'claude-sonnet-4-6';
let db: TestDatabase;
let server: FakeAnthropic;
const runtimes: AgentRuntime[] = [];

beforeAll(async () => {
  [db, server] = await Promise.all([testDatabase(), startFakeAnthropic({ apiKey: API_KEY })]);
  await warmUp(server, API_KEY);
});
afterAll(async () => {
  await Promise.all([db?.close(), server?.close()]);
});
// Each runtime holds its pool and sessions: closed after its test, so a test never waits for connections.
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
});
beforeEach(() => {
  server.reset();
});

const lookup = tool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: async ({ word }) => `${word}: a small bird`,
});

let agentCount = 0;
async function runtimeFor(options: Partial<DefineAgentOptions>): Promise<AgentRuntime> {
  const agent = defineAgent({
    name: `agent-${++agentCount}`,
    system: 'You answer briefly.',
    tools: [lookup],
    model: MODEL,
    llm: anthropic({ apiKey: API_KEY, baseUrl: server.url, retryBaseMs: 0 }),
    ...options,
  });
  const rt = await createRuntime({ agents: [agent], api: { port: 0 }, databaseUrl: db.url, logger: silentLogger });
  runtimes.push(rt);
  return rt;
}

async function post(rt: AgentRuntime, body: unknown): Promise<{ status: number; body: any; message: string }> {
  const res = await fetch(`${rt.url}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as any;
  return { status: res.status, body: answer, message: String(answer.error?.message ?? '') };
}

async function events(runId: string) {
  return (await new RunEvents(db.pool).page(runId as RunId, 0, 1_000)).map((e) => ({ type: e.type, data: JSON.parse(e.data) as any }));
}

const THINKING = {
  type: 'thinking',
  thinking: 'The user wants a word looked up; I will call lookup.',
  signature: 'EqQBCkgIARABGAIiQ…sig-1',
};
const REDACTED = { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP' };

describe('model options', () => {
  it("sends the agent's options on every call, a run's own over them, and records them with each step", async () => {
    const rt = await runtimeFor({ modelOptions: { temperature: 0.2, stopSequences: ['END'], toolChoice: 'any', maxTokens: 900 } });
    server.enqueue(fake.toolUse('toolu_1', 'lookup', { word: 'wren' }), fake.text('A small bird.'));
    const agents = await rt.runs.create({ input: 'What is a wren?' });
    expect(await rt.runs.wait(agents.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    for (const r of server.requests) {
      expect(r.body).toMatchObject({ temperature: 0.2, stop_sequences: ['END'], tool_choice: { type: 'any' }, max_tokens: 900 });
    }
    expect(server.requests).toHaveLength(2);

    server.reset();
    server.enqueue(fake.text('Birds.'));
    const created = await post(rt, {
      input: 'And a robin?',
      modelOptions: { temperature: 0.9, toolChoice: { name: 'lookup' }, topK: 40, maxTokens: 500 },
    });
    expect(created.status).toBe(201);
    const run = await rt.runs.wait(created.body.id, { timeoutMs: 30_000 });
    expect(run).toMatchObject({ status: 'SUCCEEDED', modelOptions: { temperature: 0.9, toolChoice: { name: 'lookup' }, topK: 40 } });
    expect(server.requests[0]!.body).toMatchObject({
      temperature: 0.9,
      top_k: 40,
      stop_sequences: ['END'],
      tool_choice: { type: 'tool', name: 'lookup' },
      max_tokens: 500,
    });
    const step = (await db.store.steps(run.id as RunId))[0]!;
    expect(step.request).toMatchObject({ model: MODEL, maxTokens: 500, options: { temperature: 0.9, topK: 40 } });
    const read = (await (await fetch(`${rt.url}/api/runs/${run.id}`)).json()) as Record<string, unknown>;
    // Fixed when the run was made: the agent's, the run's own over them.
    expect(read.modelOptions).toEqual({
      temperature: 0.9,
      stopSequences: ['END'],
      toolChoice: { name: 'lookup' },
      topK: 40,
      maxTokens: 500,
    });
  });

  it('keeps the options a run was made with when a deploy changes its agent’s', async () => {
    const agent = (temperature: number) =>
      defineAgent({
        name: 'deployed',
        system: 'You answer briefly.',
        model: MODEL,
        llm: anthropic({ apiKey: API_KEY, baseUrl: server.url, retryBaseMs: 0 }),
        modelOptions: { temperature },
      });
    const api = await createRuntime({ agents: [agent(0.2)], worker: false, api: { port: 0 }, databaseUrl: db.url, logger: silentLogger });
    runtimes.push(api);
    const run = await api.runs.create({ input: 'Made before the deploy.' });
    server.enqueue(fake.text('Done.'));
    const worker = await createRuntime({ agents: [agent(0.7)], api: false, databaseUrl: db.url, logger: silentLogger });
    runtimes.push(worker);
    expect(await api.runs.wait(run.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    expect(server.requests.map((r) => r.body.temperature)).toEqual([0.2]);
  });

  it('refuses with a 400 naming the field what the provider would refuse, and stores nothing', async () => {
    const rt = await runtimeFor({ modelOptions: { thinking: { type: 'enabled', budgetTokens: 2_048 }, maxTokens: 4_096 } });
    const cases: [unknown, string][] = [
      [{ toolChoice: 'any' }, 'modelOptions.toolChoice: with thinking on, toolChoice may only be "auto" or "none"'],
      [{ temperature: 0.5 }, 'modelOptions.temperature: with thinking on, temperature may only be 1'],
      [{ topK: 5 }, 'modelOptions.topK: cannot be set with thinking on'],
      [{ maxTokens: 2_000 }, 'modelOptions.thinking.budgetTokens: must be below maxTokens (2000)'],
      [{ thinking: { type: 'enabled', budgetTokens: 100 } }, 'modelOptions.thinking.budgetTokens: Too small'],
      [{ thinking: { type: 'sometimes' } }, 'modelOptions.thinking.type'],
      [{ tools: 'x' }, 'modelOptions.tools: unknown field'],
      [{ stopSequences: ['a\u0000'] }, 'modelOptions.stopSequences.0: must not contain NUL characters'],
    ];
    for (const [modelOptions, message] of cases) {
      const res = await post(rt, { input: 'hi', modelOptions });
      expect(res.status, JSON.stringify(modelOptions)).toBe(400);
      expect(res.message).toContain(message);
    }
    // Without thinking, a temperature above 1 is one only Anthropic refuses: its client says so.
    const plain = await runtimeFor({});
    const hot = await post(plain, { input: 'hi', modelOptions: { temperature: 1.5 } });
    expect(hot.status).toBe(400);
    expect(hot.message).toBe('invalid request body: modelOptions.temperature: must be at most 1 for Anthropic models');
    expect((await plain.runs.list()).runs.filter((r) => r.input === 'hi')).toEqual([]);
    expect(server.requests).toEqual([]);
  });

  it('refuses at definition an agent whose options contradict each other', () => {
    expect(() =>
      defineAgent({ name: 'x', system: 's', modelOptions: { thinking: { type: 'adaptive' }, toolChoice: { name: 'lookup' } } }),
    ).toThrow('invalid agent "x": modelOptions.toolChoice: with thinking on, toolChoice may only be "auto" or "none"');
  });
});

describe('thinking', () => {
  it('sends the thinking blocks back byte for byte before the tool result, and streams thinking as thinking.delta', async () => {
    const rt = await runtimeFor({ modelOptions: { thinking: { type: 'enabled', budgetTokens: 2_048 }, maxTokens: 4_096 } });
    server.enqueue(
      fake.reply({
        content: [THINKING, REDACTED, { type: 'tool_use', id: 'toolu_t', name: 'lookup', input: { word: 'wren' } }],
        stopReason: 'tool_use',
      }),
      fake.reply({
        content: [
          { type: 'thinking', thinking: 'Now answer.', signature: 'sig-2' },
          { type: 'text', text: 'A small bird.' },
        ],
      }),
    );
    const created = await rt.runs.create({ input: 'What is a wren?' });
    expect(await rt.runs.wait(created.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED', output: 'A small bird.' });

    const [first, second] = server.requests;
    expect(first!.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2_048 });
    expect(second!.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2_048 });
    const assistant = second!.body.messages[1];
    expect(assistant.role).toBe('assistant');
    // Exactly as they came: no field added (no cache_control on a thinking block), none dropped.
    expect(assistant.content.slice(0, 2)).toEqual([THINKING, REDACTED]);
    expect(second!.body.messages[2].content[0]).toMatchObject({
      type: 'tool_result',
      tool_use_id: 'toolu_t',
      content: 'wren: a small bird',
    });

    const thinking = (await events(created.id)).filter((e) => e.type === 'thinking.delta');
    expect(new Set(thinking.map((e) => e.data.seq))).toEqual(new Set([1, 3]));
    expect(
      thinking
        .filter((e) => e.data.seq === 1)
        .map((e) => e.data.text)
        .join(''),
    ).toBe(THINKING.thinking);
    expect(
      thinking
        .filter((e) => e.data.seq === 3)
        .map((e) => e.data.text)
        .join(''),
    ).toBe('Now answer.');
  });

  it("a run's thinking: disabled turns its agent's off", async () => {
    const rt = await runtimeFor({ modelOptions: { thinking: { type: 'enabled', budgetTokens: 2_048 }, maxTokens: 4_096 } });
    server.enqueue(fake.text('No thought.'));
    const created = await post(rt, { input: 'Quick one.', modelOptions: { thinking: { type: 'disabled' }, temperature: 0 } });
    expect(created.status).toBe(201);
    expect(await rt.runs.wait(created.body.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    expect(server.requests[0]!.body).not.toHaveProperty('thinking');
    expect(server.requests[0]!.body.temperature).toBe(0);
  });

  it('a fork on another model leaves out the thinking the first model signed; the same model keeps it', async () => {
    const rt = await runtimeFor({ modelOptions: { thinking: { type: 'adaptive' } } });
    server.enqueue(
      fake.reply({
        content: [THINKING, { type: 'tool_use', id: 'toolu_f', name: 'lookup', input: { word: 'owl' } }],
        stopReason: 'tool_use',
      }),
      fake.text('A bird of the night.'),
    );
    const source = await rt.runs.create({ input: 'What is an owl?' });
    expect(await rt.runs.wait(source.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    expect(server.requests[0]!.body.thinking).toEqual({ type: 'adaptive' });

    for (const [model, kept] of [
      ['claude-opus-4-6', false],
      [MODEL, true],
    ] as const) {
      server.reset();
      server.enqueue(fake.text('Forked.'));
      const fork = await rt.runs.fork(source.id, { afterSeq: 2, model });
      expect(await rt.runs.wait(fork.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED', model });
      const assistant = server.requests[0]!.body.messages[1];
      expect(
        assistant.content.some((b: { type: string }) => b.type === 'thinking'),
        model,
      ).toBe(kept);
      expect(assistant.content.find((b: { type: string }) => b.type === 'tool_use')).toMatchObject({ id: 'toolu_f' });
    }
    // The source's log is untouched.
    const steps = await db.store.steps(source.id as RunId);
    expect((steps[0]!.response as unknown[])[0]).toEqual(THINKING);
  });
});

describe('images and documents', () => {
  const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
  const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n').toString('base64');

  it('takes an input of text, an image and a PDF, sends it as blocks on every call and reads it back as sent', async () => {
    const rt = await runtimeFor({});
    const input = [
      { type: 'text', text: 'What is in the picture, and what does the file say?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: PDF }, title: 'notes.pdf' },
      { type: 'image', source: { type: 'url', url: 'https://example.com/bird.jpg' } },
    ];
    server.enqueue(fake.toolUse('toolu_i', 'lookup', { word: 'pixel' }), fake.text('One pixel, and an empty PDF.'));
    const created = await post(rt, { input });
    expect(created.status).toBe(201);
    const run = await rt.runs.wait(created.body.id, { timeoutMs: 30_000 });
    expect(run).toMatchObject({ status: 'SUCCEEDED', input: 'What is in the picture, and what does the file say?', inputContent: input });
    for (const r of server.requests) {
      const first = r.body.messages[0].content.map(({ cache_control: _, ...b }: Record<string, unknown>) => b);
      expect(first).toEqual(input);
    }
    const read = (await (await fetch(`${rt.url}/api/runs/${run.id}`)).json()) as Record<string, unknown>;
    expect(read).toMatchObject({ input: 'What is in the picture, and what does the file say?', inputContent: input });
    // A page of runs leaves the blocks out.
    const page = (await (await fetch(`${rt.url}/api/runs?limit=100`)).json()) as { runs: Record<string, unknown>[] };
    const listed = page.runs.find((r) => r.id === run.id)!;
    expect(listed.input).toBe('What is in the picture, and what does the file say?');
    expect(listed).not.toHaveProperty('inputContent');
  });

  it('sends the image a tool returns as the content of its tool_result, from the log after a restart too', async () => {
    const shot = [
      { type: 'text', text: 'The page at /login:' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
    ];
    const screenshot = tool({
      name: 'screenshot',
      description: 'A screenshot of a page.',
      input: z.object({ path: z.string() }),
      execute: async () => ({ content: shot }),
    });
    const rt = await runtimeFor({ tools: [screenshot] });
    server.enqueue(fake.toolUse('toolu_s', 'screenshot', { path: '/login' }), fake.text('A login form.'));
    const created = await rt.runs.create({ input: 'What does the login page show?' });
    expect(await rt.runs.wait(created.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED', output: 'A login form.' });
    const result = server.requests[1]!.body.messages[2].content[0];
    expect(result).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_s' });
    expect(result.content.map(({ cache_control: _, ...b }: Record<string, unknown>) => b)).toEqual(shot);
    // What a resumed run folds from the log is the same blocks.
    const steps = await db.store.steps(created.id as RunId);
    expect(JSON.parse(steps[1]!.response as string)).toEqual({ $content: shot });
  });

  it('fails the tool call, telling the model why, when a tool returns { content } that is not text and images', async () => {
    const bad = tool({
      name: 'bad_shot',
      description: 'Returns a malformed image.',
      input: z.object({}),
      execute: async () => ({ content: [{ type: 'image', source: { type: 'base64', media_type: 'image/tiff', data: 'AAAA' } }] }),
    });
    const rt = await runtimeFor({ tools: [bad] });
    server.enqueue(fake.toolUse('toolu_b', 'bad_shot', {}), fake.text('It failed.'));
    const created = await rt.runs.create({ input: 'Take a shot.' });
    expect(await rt.runs.wait(created.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    const result = server.requests[1]!.body.messages[2].content[0];
    expect(result).toMatchObject({ is_error: true, content: expect.stringContaining('content.0.source.media_type') });
    // Any other { content } is the JSON text it always was.
    expect(toolContent({ content: ['a', 'b'] })).toBeNull();
    expect(toolContent({ content: [{ type: 'text', text: 'x' }], isError: false })).toBeNull();
  });

  it.each([
    [[{ type: 'image', source: { type: 'base64', media_type: 'image/bmp', data: 'AAAA' } }], 'input.0.source.media_type'],
    [[{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'not base64!' } }], 'input.0.source.data: must be base64'],
    [[{ type: 'document', source: { type: 'base64', media_type: 'text/html', data: 'AAAA' } }], 'input.0.source.media_type'],
    [[{ type: 'image', source: { type: 'url', url: 'file:///etc/passwd' } }], 'input.0.source.url'],
    [[{ type: 'tool_result', tool_use_id: 'x', content: 'y' }], 'input.0'],
    [[], 'input'],
    [[{ type: 'text', text: 'a\u0000b' }], 'input.0.text: must not contain NUL characters'],
    [[{ type: 'text', text: 'x\ud800' }], 'input.0.text: must not contain unpaired surrogates'],
    [[{ type: 'text', text: '   ' }], 'input.0.text: must not be blank'],
    [[{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }], 'input.0.cache_control: unknown field'],
  ])('refuses a malformed block with a 400 naming it: %j', async (input, where) => {
    const rt = await runtimeFor({});
    const res = await post(rt, { input });
    expect(res.status).toBe(400);
    expect(res.message).toContain(where);
  });
});

describe('compaction', () => {
  const compactor = () => runtimeFor({ compaction: { atInputTokens: 1_000, keepTurns: 1 }, system: 'You look words up.' });

  it('summarises once past atInputTokens; the step detail shows what was asked, and a follow-up continues from the summary', async () => {
    const rt = await compactor();
    server.enqueue(
      fake.toolUse('toolu_a', 'lookup', { word: 'wren' }, { input_tokens: 600 }),
      fake.toolUse('toolu_b', 'lookup', { word: 'robin' }, { input_tokens: 1_200 }),
      fake.text('SUMMARY: a wren is a small bird.', { input_tokens: 900, output_tokens: 30 }),
      fake.text('Both are small birds.', { input_tokens: 300 }),
    );
    const run = await rt.runs.create({ input: 'What are wrens and robins?' });
    expect(await rt.runs.wait(run.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED', output: 'Both are small birds.' });
    expect(server.requests).toHaveLength(4);
    // The summary call is the run's own (its system prompt, tools), the request for a summary last.
    expect(JSON.stringify(server.requests[2]!.body.system)).toContain('You look words up.');
    expect(server.requests[2]!.body.messages.at(-1).content.at(-1).text).toContain('Write a summary');
    expect(server.requests[3]!.body.messages).toHaveLength(3);

    const detail = (await (await fetch(`${rt.url}/api/runs/${run.id}/steps/5`)).json()) as any;
    expect(detail.request.compaction).toEqual({ keptMessages: 2 });
    expect(detail.request.messages).toHaveLength(3);
    expect(detail.response).toEqual([{ type: 'text', text: 'SUMMARY: a wren is a small bird.' }]);
    const finished = (await events(run.id)).filter((e) => e.type === 'step.finished' && e.data.kind === 'MODEL');
    expect(finished.map((e) => e.data.compaction ?? false)).toEqual([false, false, true, false]);

    server.reset();
    server.enqueue(fake.text('A sparrow too.'));
    const next = await rt.runs.create({ input: 'And sparrows?', previousRunId: run.id });
    expect(await rt.runs.wait(next.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
    const sent = server.requests[0]!.body.messages;
    expect(sent[0].content[0].text).toContain('SUMMARY: a wren is a small bird.');
    expect(sent.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(JSON.stringify(sent.at(-1))).toContain('And sparrows?');
  });

  it('records a summary cut short as unusable, counts what it cost, and goes on uncompacted', async () => {
    const rt = await compactor();
    server.enqueue(
      fake.toolUse('toolu_c', 'lookup', { word: 'wren' }, { input_tokens: 600 }),
      fake.toolUse('toolu_d', 'lookup', { word: 'robin' }, { input_tokens: 1_200 }),
      fake.reply({
        content: [{ type: 'text', text: 'SUMMARY: a wr' }],
        stopReason: 'max_tokens',
        usage: { input_tokens: 900, output_tokens: 50 },
      }),
      fake.text('Both are small birds.', { input_tokens: 1_300 }),
      fake.text('SUMMARY again', { input_tokens: 10 }), // must not be asked for: see pending below
    );
    const run = await rt.runs.create({ input: 'What are wrens and robins?' });
    const done = await rt.runs.wait(run.id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'SUCCEEDED', output: 'Both are small birds.' });
    expect(server.pending()).toBe(1);
    // The last call was sent the whole conversation: the unusable summary replaced nothing.
    expect(server.requests[3]!.body.messages).toHaveLength(5);
    server.reset();
    const steps = await db.store.steps(run.id as RunId);
    expect(steps[4]!.request).toMatchObject({ compaction: { keptMessages: 2, unusable: 'stop_reason max_tokens' } });
    expect(steps[4]!.outputTokens).toBe(50);
    expect(done.tokensUsed).toBe(steps.reduce((n, s) => n + s.inputTokens + s.outputTokens + s.cacheCreationInputTokens, 0));
    expect(steps).toHaveLength(6);
  });
});
