/**
 * An agent whose model is an AI SDK language model: `defineAgent({ …, llm: aiSdk(model) })` served by
 * createRuntime on real PostgreSQL, the model the AI SDK's own MockLanguageModelV3 scripted to stream
 * a tool call, then fail once with a 429 APICallError, then stream the answer. The run calls the tool
 * once, sends its result back as the specification's tool message, is retried past the 429, and
 * records what the model streamed and what it reported using.
 */
import { APICallError } from '@ai-sdk/provider';
import type { LanguageModelV3CallOptions, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { aiSdk } from '../../src/llm/ai-sdk.ts';
import { type AgentRuntime, createRuntime, type RuntimeEvent } from '../../src/runtime/create-runtime.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { silentLogger } from '../support/engine.ts';

let db: TestDatabase;
let rt: AgentRuntime | undefined;

beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await rt?.close();
  await db?.close();
});

const usage = (total: number, output: number, cacheRead = 0): LanguageModelV3Usage => ({
  inputTokens: { total, noCache: total - cacheRead, cacheRead, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});

/** A streamed answer: the text word by word, then the parts given, a few milliseconds apart. */
function streamed(text: string, rest: LanguageModelV3StreamPart[]) {
  const words = text
    .split(' ')
    .map((w, i): LanguageModelV3StreamPart => ({ type: 'text-delta', id: 'txt-0', delta: i === 0 ? w : ` ${w}` }));
  return {
    stream: simulateReadableStream<LanguageModelV3StreamPart>({
      chunks: [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: `resp-${text.length}`, modelId: 'mock-gemini', timestamp: new Date() },
        { type: 'text-start', id: 'txt-0' },
        ...words,
        { type: 'text-end', id: 'txt-0' },
        ...rest,
      ],
      chunkDelayInMs: 5,
    }),
    response: { headers: { 'x-request-id': `req-${text.length}` } },
  };
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { headers: { accept: 'application/json' } });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

it('runs a tool-calling run on an AI SDK model to SUCCEEDED: the tool once, its result in the next prompt, a 429 retried, usage and text recorded', async () => {
  const FIRST = 'Let me check the forecast.';
  const ANSWER = 'Yes: rain all afternoon.';
  let calls = 0;
  const model = new MockLanguageModelV3({
    provider: 'mock.chat',
    modelId: 'mock-gemini',
    doStream: async (options: LanguageModelV3CallOptions) => {
      calls++;
      if (calls === 1) {
        return streamed(FIRST, [
          { type: 'tool-call', toolCallId: 'call-forecast-1', toolName: 'get_forecast', input: '{"city":"Paris"}' },
          { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: usage(300, 20) },
        ]);
      }
      if (calls === 2) {
        throw new APICallError({
          message: 'Rate limit reached, try again shortly',
          url: 'https://models.example/v1/stream',
          requestBodyValues: options.prompt,
          statusCode: 429,
          responseHeaders: { 'retry-after-ms': '20' },
        });
      }
      return streamed(ANSWER, [{ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(350, 8, 256) }]);
    },
  });

  const executions: unknown[] = [];
  const forecast = tool({
    name: 'get_forecast',
    description: 'The forecast for a city.',
    input: z.object({ city: z.string() }),
    execute: async (input) => {
      executions.push(input);
      return { city: input.city, forecast: 'rain all afternoon' };
    },
  });
  const events: RuntimeEvent[] = [];
  const retries: number[] = [];
  rt = await createRuntime({
    agents: [
      defineAgent({
        name: 'helper',
        system: 'You answer in one sentence.',
        tools: [forecast],
        llm: aiSdk(model, { retryBaseMs: 0, retryCapMs: 1_000, onRetry: (error) => retries.push(error.status) }),
      }),
    ],
    api: { port: 0 },
    databaseUrl: db.url,
    logger: silentLogger,
    onEvent: (e) => events.push(e),
  });

  const run = await rt.runs.create({ input: 'Do I need an umbrella in Paris today?' });
  expect(run.model).toBe('mock-gemini'); // neither the run nor the agent named one: the client's
  const done = await rt.runs.wait(run.id, { timeoutMs: 60_000 });
  expect(done).toMatchObject({ status: 'SUCCEEDED', output: ANSWER, stopReason: 'end_turn' });

  // The tool ran once, on the input the model streamed.
  expect(executions).toEqual([{ city: 'Paris' }]);
  // Three calls: the tool call, the 429, its retry; the retry sent what the failed attempt sent.
  expect(model.doStreamCalls).toHaveLength(3);
  expect(retries).toEqual([429]);
  const [first, failed, last] = model.doStreamCalls as [LanguageModelV3CallOptions, LanguageModelV3CallOptions, LanguageModelV3CallOptions];
  expect(first.prompt).toEqual([
    { role: 'system', content: 'You answer in one sentence.' },
    { role: 'user', content: [{ type: 'text', text: 'Do I need an umbrella in Paris today?' }] },
  ]);
  expect(first.tools).toEqual([
    expect.objectContaining({ type: 'function', name: 'get_forecast', description: 'The forecast for a city.' }),
  ]);
  expect(first.abortSignal).toBeInstanceOf(AbortSignal);
  expect(last.prompt).toEqual(failed.prompt);
  expect(last.prompt.slice(2)).toEqual([
    {
      role: 'assistant',
      content: [
        { type: 'text', text: FIRST },
        { type: 'tool-call', toolCallId: 'call-forecast-1', toolName: 'get_forecast', input: { city: 'Paris' } },
      ],
    },
    {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'call-forecast-1',
          toolName: 'get_forecast',
          output: { type: 'text', value: expect.stringContaining('rain all afternoon') },
        },
      ],
    },
  ]);

  // The run's usage is what the model reported: 300 + (350 − 256 cached) in, 20 + 8 out, 256 read from cache.
  const timeline = await getJson<
    { kind: string; attempts: number; inputTokens: number; outputTokens: number; cacheReadInputTokens: number }[]
  >(`${rt.url}/api/runs/${run.id}/timeline`);
  expect(timeline.map((s) => [s.kind, s.attempts])).toEqual([
    ['MODEL', 1],
    ['TOOL', 1],
    ['MODEL', 2],
  ]);
  const sum = (f: (s: (typeof timeline)[number]) => number) => timeline.reduce((n, s) => n + f(s), 0);
  expect([sum((s) => s.inputTokens), sum((s) => s.outputTokens), sum((s) => s.cacheReadInputTokens)]).toEqual([394, 28, 256]);
  expect(done.tokensUsed).toBe(394 + 28);
  expect(await getJson(`${rt.url}/api/runs/${run.id}`)).toMatchObject({ provider: 'mock.chat', model: 'mock-gemini' });

  // What streamed is in the run's live events (deltas written together may share an event), and in the steps' replies.
  const { events: live } = await getJson<{ events: { type: string; data: { seq: number; text: string } }[] }>(
    `${rt.url}/api/runs/${run.id}/events`,
  );
  const textOf = (seq: number) =>
    live
      .filter((e) => e.type === 'text.delta' && e.data.seq === seq)
      .map((e) => e.data.text)
      .join('');
  expect([textOf(1), textOf(3)]).toEqual([FIRST, ANSWER]);
  const replies = events.flatMap((e) => (e.type === 'modelStep' ? [e.response] : []));
  expect(replies.map((r) => [r.content, r.requestId, r.id])).toEqual([
    [
      [
        { type: 'text', text: FIRST },
        { type: 'tool_use', id: 'call-forecast-1', name: 'get_forecast', input: { city: 'Paris' } },
      ],
      `req-${FIRST.length}`,
      `resp-${FIRST.length}`,
    ],
    [[{ type: 'text', text: ANSWER }], `req-${ANSWER.length}`, `resp-${ANSWER.length}`],
  ]);
});
