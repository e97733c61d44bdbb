/**
 * Whole runs through the engine with the real client stack for LLM_PROVIDER=openai —
 * Retrying(TimeLimited(OpenAiClient)) and the official `openai` SDK — against a local server speaking
 * the Chat Completions wire format (streamed, the default, and not), on a real database. What is
 * asserted is what a user sees: the run's status, error, output, tokens and cost, its step rows, and
 * the requests as the server received them.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { timelineItem } from '../../src/api/present.ts';
import type { Run, Step } from '../../src/domain/types.ts';
import { createLlmClient, loadPrices, type LlmConfig } from '../../src/llm/index.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { chat, startFakeOpenAi, type FakeOpenAi } from '../support/fake-openai.ts';

const API_KEY = 'sk-proj-test-llm-openai-0123456789abcdef';
const MODEL = 'gpt-5.4-mini';
const prices = loadPrices('prices.json');
let db: TestDatabase;
let server: FakeOpenAi;
let waits: number[];
let executed: string[];

beforeAll(async () => {
  // The server echoes the key it got in every error it sends: the client must be what keeps it out.
  [db, server] = await Promise.all([testDatabase(), startFakeOpenAi({ apiKey: API_KEY, echoKey: true })]);
  // The first request of a process pays for loading the HTTP client; not inside a test's time limit.
  server.text('warm');
  await createLlmClient(llmConfig()).send({
    model: MODEL,
    maxTokens: 1,
    system: null,
    messages: [{ role: 'user', content: 'hi' }],
    tools: [],
  });
});
afterAll(async () => {
  await Promise.all([db?.close(), server?.close()]);
});
beforeEach(() => {
  server.reset();
  waits = [];
  executed = [];
});
afterEach(() => {
  expect(server.pending()).toBe(0); // every scripted answer was asked for
});

/** Waits nothing, remembers what it was asked to wait, and honours an abort like the real one. */
const sleeper = {
  async sleep(ms: number, signal?: AbortSignal) {
    waits.push(ms);
    signal?.throwIfAborted();
  },
};

function llmConfig(overrides: Partial<LlmConfig> = {}): LlmConfig {
  return {
    llmProvider: 'openai',
    openaiApiKey: API_KEY,
    openaiBaseUrl: server.baseUrl,
    anthropicApiKey: null,
    anthropicBaseUrl: null,
    demoLatencyMs: 0,
    stepTimeoutMs: 5_000,
    maxAttempts: 3,
    retryBaseMs: 10,
    retryCapMs: 30_000,
    ...overrides,
  };
}

const echo = (name: string) =>
  defineTool({
    name,
    description: `answers for ${name}`,
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    async execute(input: { q?: string }) {
      executed.push(name);
      return `${name}:${input.q ?? ''}`;
    },
  });

async function drive(opts: { config?: Partial<LlmConfig>; tools?: Tool[] } = {}): Promise<{ run: Run; steps: Step[] }> {
  const created = await newRun(db.records, 'find x', { model: MODEL });
  const llm = createLlmClient(llmConfig(opts.config), { sleeper });
  const worker = testWorker(db.store, llm, opts.tools ?? [], { name: 'W', costOf: (m, u) => prices.costOf(m, u) });
  const result = await worker.runOnce();
  expect(result?.runId).toBe(created.id);
  return { run: await db.records.state(created.id), steps: await db.store.steps(created.id) };
}

const statuses = () => server.requests.map((r) => r.status);
const usageOf = (inputTokens: number, outputTokens: number, cacheReadInputTokens = 0) => ({
  inputTokens,
  outputTokens,
  cacheCreationInputTokens: 0,
  cacheReadInputTokens,
});

describe('runs through the openai SDK against a Chat Completions server', () => {
  it.each([
    ['streamed', true],
    ['not streamed', false],
  ])('two tool calls in one turn (%s): both run, and the next request carries the calls and their results', async (_mode, streaming) => {
    const calls = [
      { id: 'call_a', name: 'lookup', arguments: { q: 'a' } },
      { id: 'call_b', name: 'weather', arguments: { q: 'b' } },
    ];
    server
      .toolCalls(calls, { prompt_tokens: 200, completion_tokens: 30 }, 'Checking both.')
      .text('both done', { prompt_tokens: 260, completion_tokens: 4 });
    const { run, steps } = await drive({ config: { llmStreaming: streaming }, tools: [echo('weather'), echo('lookup')] });

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'both done', stopReason: 'end_turn', tokensUsed: 230 + 264 });
    expect(steps.map((s) => [s.seq, s.kind, s.toolUseId, s.stopReason])).toEqual([
      [1, 'MODEL', null, 'tool_use'],
      [2, 'TOOL', 'call_a', null],
      [3, 'TOOL', 'call_b', null],
      [4, 'MODEL', null, 'end_turn'],
    ]);
    expect(executed).toEqual(['lookup', 'weather']);
    expect(steps[0]!.response).toEqual([
      { type: 'text', text: 'Checking both.' },
      { type: 'tool_use', id: 'call_a', name: 'lookup', input: { q: 'a' } },
      { type: 'tool_use', id: 'call_b', name: 'weather', input: { q: 'b' } },
    ]);
    expect(steps.filter((s) => s.kind === 'MODEL').map((s) => s.request?.provider)).toEqual(['openai', 'openai']);
    expect(await db.records.latestProvider(run.id)).toBe('openai');

    expect(server.requests.map((r) => [r.invalid, r.streamed])).toEqual([
      [null, streaming],
      [null, streaming],
    ]);
    for (const r of server.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(r.body).toMatchObject({ model: MODEL, max_completion_tokens: 1024 });
      expect(r.body.stream_options).toEqual(streaming ? { include_usage: true } : undefined);
      expect(r.body.tools.map((t: any) => [t.type, t.function.name])).toEqual([
        ['function', 'weather'],
        ['function', 'lookup'],
      ]);
      expect(r.body.tools[0].function.parameters).toEqual({ type: 'object', properties: { q: { type: 'string' } } });
    }
    expect(server.requests[1]!.body.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'find x' },
      {
        role: 'assistant',
        content: 'Checking both.',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '{"q":"a"}' } },
          { id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"q":"b"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: 'lookup:a' },
      { role: 'tool', tool_call_id: 'call_b', content: 'weather:b' },
    ]);
  });

  it('survives two 429s with retry-after: one step, attempts = 3, each wait at least what the server asked', async () => {
    const limited = () =>
      chat.error(429, { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' }, { retryAfter: 7 });
    server.enqueue(limited(), limited()).text('done', { prompt_tokens: 120, completion_tokens: 30 });
    const { run, steps } = await drive();

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'done', error: null, tokensUsed: 150 });
    expect(statuses()).toEqual([429, 429, 200]);
    expect(waits).toHaveLength(2);
    for (const ms of waits) expect(ms).toBeGreaterThanOrEqual(7_000);
    expect(steps.map((s) => [s.kind, s.attempts, s.inputTokens, s.outputTokens])).toEqual([['MODEL', 3, 120, 30]]);
  });

  it("fails on a 400 after exactly one request, with the server's message and no step", async () => {
    server.error(400, {
      message: "This model's maximum context length is 400000 tokens.",
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
    });
    const { run, steps } = await drive();

    expect(run.status).toBe('FAILED');
    expect(run.error).toMatch(/HTTP 400 context_length_exceeded.*maximum context length is 400000 tokens/);
    expect(run.error).not.toContain(API_KEY); // the server echoed it
    expect(server.requests[0]!.errorMessage).toContain(API_KEY);
    expect(server.requests).toHaveLength(1);
    expect(waits).toEqual([]);
    expect(steps).toEqual([]);
  });

  it('does not retry a 429 that says the quota is used up: waiting does not end it', async () => {
    server.error(429, {
      message: 'You exceeded your current quota, please check your plan and billing details.',
      type: 'insufficient_quota',
      code: 'insufficient_quota',
    });
    const { run } = await drive();
    expect(run.status).toBe('FAILED');
    expect(run.error).toMatch(/HTTP 429 insufficient_quota/);
    expect(server.requests).toHaveLength(1);
  });

  it('fails on a 401 after one call, without the key in the error though the server echoed it', async () => {
    const { run, steps } = await drive({ config: { openaiApiKey: 'sk-proj-test-wrong-key-0123456789' } });
    expect(run.status).toBe('FAILED');
    expect(run.error).toMatch(/HTTP 401 invalid_api_key.*Incorrect API key/);
    expect(server.requests[0]!.errorMessage).toContain('sk-proj-test-wrong-key-0123456789');
    expect(run.error).toContain('[redacted]');
    expect(run.error).not.toContain('sk-proj-test-wrong-key-0123456789');
    expect(steps).toEqual([]);
  });

  it.each([
    ['a connection cut mid-stream', () => chat.cut(chat.text('Overdue are ACME-101, ACME-102 and more'), 2), true],
    [
      'a stream that ends without a finish reason',
      () => ({ ...chat.text('Overdue are ACME-101, ACME-102 and more'), stream: { endAfterDeltas: 3 } }),
      true,
    ],
    [
      'a server_error in the middle of the stream',
      () => chat.streamError(chat.text('Overdue are ACME-101 and more'), 2, { message: 'The server had an error', type: 'server_error' }),
      true,
    ],
    ['a body cut off mid-way', () => chat.cut(chat.text('Overdue are ACME-101, ACME-102 and more')), false],
    ['an HTML page with status 200', () => chat.html(200), false],
  ] as const)('retries %s within the step and SUCCEEDED with the answer that came whole', async (_what, broken, streaming) => {
    server.enqueue(broken()).text('ACME-101 and ACME-102', { prompt_tokens: 40, completion_tokens: 4 });
    const { run, steps } = await drive({ config: { llmStreaming: streaming } });
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'ACME-101 and ACME-102', error: null });
    expect(server.requests).toHaveLength(2);
    expect(waits).toHaveLength(1);
    expect(steps.map((s) => [s.kind, s.attempts, s.inputTokens, s.outputTokens])).toEqual([['MODEL', 2, 40, 4]]);
  });

  it('fails a run on an invalid_request_error in the middle of a stream, without retrying it', async () => {
    server.enqueue(chat.streamError(chat.text('one two three four'), 2, { message: 'Output blocked', type: 'invalid_request_error' }));
    const { run } = await drive();
    expect(run.status).toBe('FAILED');
    expect(run.error).toMatch(/HTTP 400 invalid_request_error.*Output blocked/);
    expect(run.error).not.toContain(API_KEY);
    expect(server.requests).toHaveLength(1);
  });

  it('aborts an answer slower than the step timeout and retries it within the same step', async () => {
    server.delay(2_000).text('too late').text('in time', { prompt_tokens: 40, completion_tokens: 4 });
    const { run, steps } = await drive({ config: { stepTimeoutMs: 300 } });
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'in time' });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true)); // the HTTP request was really cancelled
    expect(server.requests[0]!.status).toBeNull();
    expect(steps.map((s) => [s.kind, s.attempts])).toEqual([['MODEL', 2]]);
  });

  it('brings cached prompt tokens to the step rows, the timeline and the cost; cache reads stay out of the budget', async () => {
    server
      .toolCalls([{ id: 'call_1', name: 'lookup', arguments: { q: 'x' } }], {
        prompt_tokens: 2_100,
        completion_tokens: 50,
        cached_tokens: 0,
      })
      .text('found it', { prompt_tokens: 2_300, completion_tokens: 20, cached_tokens: 2_048 });
    const { run, steps } = await drive({ tools: [echo('lookup')] });

    expect(run.status).toBe('SUCCEEDED');
    const models = steps.filter((s) => s.kind === 'MODEL');
    const usages = [usageOf(2_100, 50), usageOf(2_300 - 2_048, 20, 2_048)];
    expect(models.map((s) => timelineItem(s))).toMatchObject(usages);
    // gpt-5.4-mini: 0.75 in, 4.50 out, 0.075 cached, per million.
    expect(models[1]!.costUsd).toBeCloseTo((252 * 0.75 + 20 * 4.5 + 2_048 * 0.075) / 1e6, 10);
    expect(run.costUsd).toBeCloseTo(prices.costOf(MODEL, usages[0]!) + prices.costOf(MODEL, usages[1]!), 8);
    expect(run.tokensUsed).toBe(2_100 + 50 + 252 + 20);
  });

  it('arguments that are not JSON: the tool is not run, and the model gets its call back with an error result', async () => {
    server.toolCalls([{ id: 'call_bad', name: 'lookup', arguments: '{"q": "a"' }]).text('Sorry, let me stop there.');
    const { run, steps } = await drive({ tools: [echo('lookup')] });

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'Sorry, let me stop there.' });
    expect(executed).toEqual([]);
    expect(steps.map((s) => [s.kind, s.status])).toEqual([
      ['MODEL', 'DONE'],
      ['TOOL', 'ERROR'],
      ['MODEL', 'DONE'],
    ]);
    const [, assistant, tool] = server.requests[1]!.body.messages.slice(1);
    expect(assistant.tool_calls[0].function.arguments).toBe('{"q": "a"'); // what the model wrote, not a repaired guess
    expect(tool).toMatchObject({ role: 'tool', tool_call_id: 'call_bad' });
    expect(tool.content).toMatch(/^Error: error: the arguments are not a JSON object, so lookup was not run/);
  });

  it('reports streamed text as it arrives, numbered by attempt; an attempt cut mid-stream is voided before the next one streams', async () => {
    const answer = 'The three overdue tickets are ACME-101, ACME-102 and ACME-107.';
    server.enqueue(chat.cut(chat.text('Overdue are ACME-101 and more'), 3), {
      ...chat.text(answer, { prompt_tokens: 9, completion_tokens: 9 }),
      stream: { deltaDelayMs: 20 },
    });
    const log: string[] = [];
    const response = await createLlmClient(llmConfig(), { sleeper }).send(
      { model: MODEL, maxTokens: 100, system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] },
      {
        onText: (text, attempt) => log.push(`${attempt}:${text}`),
        onAttemptFailed: (attempt, error) => log.push(`failed ${attempt} (${error.status})`),
      },
    );
    expect(log).toEqual(['1:Overdue ', '1:are ', '1:ACME-101 ', 'failed 1 (-1)', ...answer.split(/(?<= )/).map((t) => `2:${t}`)]);
    expect(response).toMatchObject({ attempts: 2, content: [{ type: 'text', text: answer }], stopReason: 'end_turn' });
  });

  describe('finish reasons', () => {
    it('length: SUCCEEDED with the cut-short output and stopReason max_tokens', async () => {
      server.enqueue(chat.reply({ content: 'The answer is forty', finishReason: 'length' }));
      const { run } = await drive();
      expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'The answer is forty', stopReason: 'max_tokens' });
    });

    it('content_filter: FAILED as a refusal', async () => {
      server.enqueue(chat.reply({ content: 'I', finishReason: 'content_filter' }));
      const { run } = await drive();
      expect(run).toMatchObject({ status: 'FAILED', stopReason: 'refusal' });
      expect(run.error).toMatch(/refused/);
    });

    it('a refusal message: FAILED as a refusal, its text kept as the output', async () => {
      server.enqueue(chat.reply({ refusal: "I can't help with that.", finishReason: 'stop' }));
      const { run } = await drive();
      expect(run).toMatchObject({ status: 'FAILED', stopReason: 'refusal', output: "I can't help with that." });
    });

    it('one the engine does not know: FAILED, saying so', async () => {
      server.enqueue(chat.reply({ content: 'x', finishReason: 'function_call' }));
      const { run, steps } = await drive();
      expect(run.status).toBe('FAILED');
      expect(run.error).toMatch(/unknown stop reason "unknown"/);
      expect(steps.map((s) => s.stopReason)).toEqual(['unknown']);
    });
  });
});
