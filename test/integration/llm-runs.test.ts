/**
 * Whole runs through the engine with the real model client stack — Retrying(TimeLimited(AnthropicClient))
 * over HTTP — against a local server speaking the Messages API's wire format (streamed,
 * the default), on a real database. What is asserted is what a user sees through the store: run status, error, output, cost,
 * and the step rows (one per model step, however many HTTP attempts it took).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { timelineItem } from '../../src/api/present.ts';
import type { Run, Step } from '../../src/domain/types.ts';
import type { EngineEvents } from '../../src/ports/engine-events.ts';
import { createLlmClient, loadPrices, type LlmConfig } from '../../src/llm/index.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { fake, startFakeAnthropic, warmUp, type FakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-llm-runs-0123456789';
const MODEL = 'claude-sonnet-4-6';
const prices = loadPrices('prices.json');
let db: TestDatabase;
let server: FakeAnthropic;
let waits: number[];

beforeAll(async () => {
  // The server echoes the key it got in every error it sends: the client must be what keeps it out.
  [db, server] = await Promise.all([testDatabase(), startFakeAnthropic({ apiKey: API_KEY, echoKey: true })]);
  await warmUp(server, API_KEY);
});
afterAll(async () => {
  await Promise.all([db?.close(), server?.close()]);
});
beforeEach(() => {
  server.reset();
  waits = [];
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
    llmProvider: 'anthropic',
    anthropicApiKey: API_KEY,
    anthropicBaseUrl: server.url,
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
      return `${name}:${input.q ?? ''}`;
    },
  });

/** Creates one run and drives it to its end with one worker using the real client stack. */
async function drive(
  opts: { config?: Partial<LlmConfig>; tools?: Tool[]; input?: string; events?: EngineEvents[] } = {},
): Promise<{ run: Run; steps: Step[] }> {
  const created = await newRun(db.records, opts.input ?? 'find x', { model: MODEL });
  const llm = createLlmClient(llmConfig(opts.config), { sleeper });
  const worker = testWorker(db.store, llm, opts.tools ?? [], {
    name: 'W',
    costOf: (m, u) => prices.costOf(m, u),
    events: opts.events ?? [],
  });
  const result = await worker.runOnce();
  expect(result?.runId).toBe(created.id);
  return { run: await db.records.state(created.id), steps: await db.store.steps(created.id) };
}

const statuses = () => server.requests.map((r) => r.status);
const withoutCache = (blocks: any[]) => blocks.map(({ cache_control: _, ...b }) => b);

describe('runs through the real client stack against a Messages API server', () => {
  it('survives two 429s: one step, checkpointed once with the final usage and attempts = 3', async () => {
    const limited = () =>
      fake.error(429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit', { retryAfter: 7 });
    server.enqueue(limited(), limited()).text('done', { input_tokens: 120, output_tokens: 30 });
    const { run, steps } = await drive();

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'done', error: null, tokensUsed: 150 });
    expect(statuses()).toEqual([429, 429, 200]);
    expect(waits).toHaveLength(2);
    for (const ms of waits) expect(ms).toBeGreaterThanOrEqual(7_000); // retry-after beats the jitter
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ seq: 1, kind: 'MODEL', status: 'DONE', attempts: 3, inputTokens: 120, outputTokens: 30 });
    expect(steps[0]!.costUsd).toBeCloseTo(
      prices.costOf(MODEL, { inputTokens: 120, outputTokens: 30, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 }),
      8,
    );
  });

  it.each([true, false])('repairs a negative usage and says so in a step warning (streaming %s)', async (streaming) => {
    server.reply({ content: [], usage: { input_tokens: -5000, output_tokens: 7 } });
    const warnings: string[] = [];
    const { run } = await drive({
      config: { llmStreaming: streaming },
      events: [{ stepWarning: (e) => warnings.push(`${e.warning}: ${e.detail}`) }],
    });
    expect(run).toMatchObject({ status: 'SUCCEEDED', tokensUsed: 7 });
    expect(warnings).toEqual([expect.stringMatching(/^provider-value-repaired: usage\.input_tokens was -5000: counted as 0$/)]);
  });

  it("fails on a 400 after exactly one request, with the API's message in error and no step row", async () => {
    server.error(400, 'invalid_request_error', 'prompt is too long: 215000 tokens > 200000 maximum');
    const { run, steps } = await drive();

    expect(run.status).toBe('FAILED');
    expect(run.error).toContain('prompt is too long: 215000 tokens > 200000 maximum');
    expect(run.error).toContain("(HTTP 400 context_window_exceeded): the conversation no longer fits the model's context window");
    expect(server.requests).toHaveLength(1);
    expect(waits).toEqual([]);
    expect(steps).toEqual([]);
    expect(run.tokensUsed).toBe(0);
  });

  it('aborts a response slower than the step timeout and retries it within the same step', async () => {
    server.delay(2_000).text('too late').text('in time', { input_tokens: 40, output_tokens: 4 });
    const { run, steps } = await drive({ config: { stepTimeoutMs: 300 } });

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'in time', tokensUsed: 44 });
    expect(server.requests).toHaveLength(2);
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true)); // the HTTP request was really cancelled
    expect(server.requests[0]!.status).toBeNull(); // never answered: the client gave up first
    expect(waits).toHaveLength(1);
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ kind: 'MODEL', attempts: 2, inputTokens: 40, outputTokens: 4 });
  });

  it('brings cache usage to the step rows, the timeline and the cost; cache reads stay out of the budget', async () => {
    const first = { input_tokens: 100, output_tokens: 50, cache_creation_input_tokens: 2_000, cache_read_input_tokens: 0 };
    const second = { input_tokens: 30, output_tokens: 20, cache_creation_input_tokens: 150, cache_read_input_tokens: 2_000 };
    server.toolUse('toolu_1', 'lookup', { q: 'x' }, first).text('found it', second);
    const { run, steps } = await drive({ tools: [echo('lookup')] });

    expect(run.status).toBe('SUCCEEDED');
    const models = steps.filter((s) => s.kind === 'MODEL');
    const usages = [first, second].map((u) => ({
      inputTokens: u.input_tokens,
      outputTokens: u.output_tokens,
      cacheCreationInputTokens: u.cache_creation_input_tokens,
      cacheReadInputTokens: u.cache_read_input_tokens,
    }));
    expect(models.map((s) => timelineItem(s))).toMatchObject(usages);
    const costs = usages.map((u) => prices.costOf(MODEL, u));
    expect(costs[0]).toBeCloseTo((100 * 3 + 50 * 15 + 2_000 * 3.75) / 1e6, 10); // the table holds the real prices
    models.forEach((s, i) => expect(s.costUsd).toBeCloseTo(costs[i]!, 8));
    expect(run.costUsd).toBeCloseTo(costs[0]! + costs[1]!, 8);
    expect(run.tokensUsed).toBe(100 + 50 + 2_000 + (30 + 20 + 150));
  });

  it('sends valid Messages API requests for a run with parallel tool calls', async () => {
    const uses = [
      { type: 'tool_use', id: 'toolu_a', name: 'lookup', input: { q: 'a' } },
      { type: 'tool_use', id: 'toolu_b', name: 'weather', input: { q: 'b' } },
    ];
    server.reply({ content: [{ type: 'text', text: 'Checking both.' }, ...uses], stopReason: 'tool_use' }).text('both done');
    const { run, steps } = await drive({ tools: [echo('weather'), echo('lookup')] });

    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'both done' });
    expect(steps.map((s) => [s.seq, s.kind, s.toolUseId])).toEqual([
      [1, 'MODEL', null],
      [2, 'TOOL', 'toolu_a'],
      [3, 'TOOL', 'toolu_b'],
      [4, 'MODEL', null],
    ]);
    expect(server.requests).toHaveLength(2);
    for (const r of server.requests) {
      expect(r.invalid).toBeNull();
      expect(r.status).toBe(200);
      expect(r.headers['anthropic-version']).toBeTruthy();
      expect(r.body).toMatchObject({ model: MODEL, max_tokens: 1024 });
      expect(r.body.system).toEqual([{ type: 'text', text: 'You are a test agent.', cache_control: { type: 'ephemeral' } }]);
      expect(r.body.tools.map((t: { name: string }) => t.name)).toEqual(['weather', 'lookup']);
      expect(JSON.stringify(r.body).split('"cache_control"').length - 1).toBeLessThanOrEqual(4);
    }
    const messages = server.requests[1]!.body.messages;
    expect(messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(messages[1].content).toEqual([{ type: 'text', text: 'Checking both.' }, ...uses]);
    expect(withoutCache(messages[2].content)).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_a', content: 'lookup:a' },
      { type: 'tool_result', tool_use_id: 'toolu_b', content: 'weather:b' },
    ]);
    expect(messages[2].content.at(-1).cache_control).toEqual({ type: 'ephemeral' }); // the next step reads this prefix
  });

  it('retries a 529 overloaded within one step', async () => {
    server.error(529, 'overloaded_error', 'Overloaded').text('ok');
    const { run, steps } = await drive();
    expect(run.status).toBe('SUCCEEDED');
    expect(statuses()).toEqual([529, 200]);
    expect(waits).toHaveLength(1);
    expect(steps.map((s) => [s.kind, s.attempts])).toEqual([['MODEL', 2]]);
  });

  it('fails on a 401 after one call, without the key in the error though the server echoed it', async () => {
    const { run, steps } = await drive({ config: { anthropicApiKey: 'sk-ant-test-wrong-key' } });
    expect(run.status).toBe('FAILED');
    expect(run.error).toMatch(/401 authentication_error.*invalid x-api-key/);
    expect(server.requests[0]!.errorMessage).toContain('sk-ant-test-wrong-key');
    expect(run.error).toContain('[redacted]');
    expect(run.error).not.toContain('sk-ant-test-wrong-key');
    expect(server.requests).toHaveLength(1);
    expect(steps).toEqual([]);
  });

  it('keeps the key out of the run error of a failure in the middle of a stream', async () => {
    server.enqueue(fake.streamError(fake.text('one two three four'), 2, 'invalid_request_error', 'Output blocked'));
    const { run } = await drive();
    expect(run.status).toBe('FAILED');
    expect(server.requests[0]!.errorMessage).toContain(API_KEY);
    expect(run.error).toMatch(/HTTP 400 invalid_request_error.*Output blocked/);
    expect(run.error).not.toContain(API_KEY);
  });

  it('streams: the run SUCCEEDED with the streamed text as its output', async () => {
    server.text('The three overdue tickets are ACME-101, ACME-102 and ACME-107.', { input_tokens: 300, output_tokens: 20 });
    const { run, steps } = await drive();
    expect(server.requests.map((r) => r.streamed)).toEqual([true]);
    expect(run).toMatchObject({
      status: 'SUCCEEDED',
      output: 'The three overdue tickets are ACME-101, ACME-102 and ACME-107.',
      tokensUsed: 320,
    });
    expect(steps).toHaveLength(1);
  });

  it('does not stream with LLM_STREAMING off, and the run is the same', async () => {
    server.text('not streamed', { input_tokens: 300, output_tokens: 20 });
    const { run } = await drive({ config: { llmStreaming: false } });
    expect(server.requests.map((r) => r.streamed)).toEqual([false]);
    expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'not streamed', tokensUsed: 320 });
  });

  it.each([
    // The broken streams had reported their usage so far (message_start: 10 in, 1 out): billed, so counted.
    ['a 529 error event after 3 deltas', () => fake.streamError(fake.text('Overdue are ACME-101, ACME-102 and more'), 3), [50, 5]],
    ['a connection cut mid-stream', () => fake.cut(fake.text('Overdue are ACME-101, ACME-102 and more'), 2), [50, 5]],
    ['an HTML page with status 200', () => fake.html(200), [40, 4]],
  ] as const)(
    'retries %s within the step and SUCCEEDED with the text of the attempt that finished',
    async (_what, broken, [inTokens, outTokens]) => {
      server.enqueue(broken()).text('ACME-101 and ACME-102', { input_tokens: 40, output_tokens: 4 });
      const { run, steps } = await drive();
      expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'ACME-101 and ACME-102', error: null });
      expect(server.requests).toHaveLength(2);
      expect(waits).toHaveLength(1);
      expect(steps.map((s) => [s.kind, s.attempts, s.inputTokens, s.outputTokens])).toEqual([['MODEL', 2, inTokens, outTokens]]);
    },
  );

  it('a retry-after of an hour is not slept in the worker: the run goes back to the queue at once', async () => {
    server.error(429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit', { retryAfter: 3600 });
    const { run, steps } = await drive();
    expect(waits).toEqual([]); // not an hour, nor any wait at all
    expect(server.requests).toHaveLength(1);
    expect(run).toMatchObject({ status: 'QUEUED', error: null });
    expect(run.lastError?.message).toMatch(/HTTP 429 rate_limit_error/);
    expect(steps).toEqual([]);
  });

  describe('stop reasons through the wire', () => {
    it('max_tokens: SUCCEEDED with the cut-short output and stopReason max_tokens', async () => {
      server.reply({ content: [{ type: 'text', text: 'The answer is forty' }], stopReason: 'max_tokens' });
      const { run, steps } = await drive();
      expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'The answer is forty', stopReason: 'max_tokens' });
      expect(steps.map((s) => s.stopReason)).toEqual(['max_tokens']);
    });

    it('refusal: FAILED with a clear error', async () => {
      server.reply({ content: [], stopReason: 'refusal' });
      const { run, steps } = await drive();
      expect(run).toMatchObject({ status: 'FAILED', stopReason: 'refusal' });
      expect(run.error).toMatch(/refused/);
      expect(steps).toHaveLength(1);
      expect(server.requests).toHaveLength(1);
    });

    it('pause_turn: the paused content is sent back as one assistant turn and the run SUCCEEDED', async () => {
      const search = (n: number) => [
        { type: 'server_tool_use', id: `srvtoolu_${n}`, name: 'web_search', input: { query: `x ${n}` } },
        { type: 'web_search_tool_result', tool_use_id: `srvtoolu_${n}`, content: [] },
      ];
      server
        .reply({ content: search(1), stopReason: 'pause_turn' })
        .reply({ content: search(2), stopReason: 'pause_turn' })
        .text('x is 42');
      const { run, steps } = await drive();

      expect(run).toMatchObject({ status: 'SUCCEEDED', output: 'x is 42', stopReason: 'end_turn' });
      expect(steps.map((s) => s.stopReason)).toEqual(['pause_turn', 'pause_turn', 'end_turn']);
      expect(server.requests.map((r) => r.invalid)).toEqual([null, null, null]);
      const sent = server.requests.map((r) => r.body.messages);
      expect(sent.map((messages) => messages.map((m: { role: string }) => m.role))).toEqual([
        ['user'],
        ['user', 'assistant'],
        ['user', 'assistant'],
      ]);
      expect(withoutCache(sent[1][1].content)).toEqual(search(1));
      expect(withoutCache(sent[2][1].content)).toEqual([...search(1), ...search(2)]); // one turn, continued
    });
  });
});
