/**
 * `durable-agent serve` as a user runs it with LLM_PROVIDER=openai and an OpenTelemetry collector
 * named by OTEL_EXPORTER_OTLP_ENDPOINT, as a child process: a local Chat Completions server stands in
 * for the model, a local OTLP/HTTP endpoint for the collector. The demo agent's run calls a tool and
 * answers; the API says the run went to "openai"; and on SIGTERM the process sends the run's spans
 * (protobuf, the default encoding) with the configured headers and service name before it exits.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { CliProcesses, cleanEnv, exitWithin, until, waitForOutput } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from '../support/fake-openai.ts';
import { type CollectedSpan, type OtlpCollector, startOtlpCollector } from '../support/otlp-collector.ts';

const API_KEY = 'sk-proj-test-e2e-openai-0123456789abcdef';
const OTEL_TOKEN = 'otel-secret-token-0123456789';
const ANSWER = 'Two acme tickets are overdue: ACME-101 and ACME-104.';

const procs = new CliProcesses();
let db: TestDatabase;
let model: FakeOpenAi;
let collector: OtlpCollector;

beforeAll(async () => {
  [db, model, collector] = await Promise.all([testDatabase(), startFakeOpenAi({ apiKey: API_KEY }), startOtlpCollector()]);
});
afterAll(async () => {
  await procs.killAll();
  await Promise.all([model?.close(), collector?.close(), db?.close()]);
});
beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    console.error(procs.transcript());
    console.error('model requests:', JSON.stringify(model.requests.map((r) => ({ seq: r.seq, status: r.status, invalid: r.invalid }))));
    console.error(
      'collector requests:',
      JSON.stringify(collector.requests.map((r) => ({ path: r.path, spans: r.spans.map((s) => s.name) }))),
    );
  });
});

it('serves a run on an OpenAI-compatible server and exports its spans over OTLP', async () => {
  model
    .toolCalls([{ id: 'call_list', name: 'list_tickets', arguments: { customer: 'acme', overdue: true } }], {
      prompt_tokens: 812,
      completion_tokens: 64,
    })
    .text(ANSWER, { prompt_tokens: 1_210, completion_tokens: 40, cached_tokens: 768 });
  const serve = procs.start(
    'serve',
    ['serve'],
    cleanEnv({
      DATABASE_URL: db.url,
      PORT: '0',
      WORKER_NAME: 'worker-otel',
      POLL_INTERVAL_MS: '200',
      LLM_PROVIDER: 'openai',
      OPENAI_API_KEY: API_KEY,
      OPENAI_BASE_URL: model.baseUrl,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${OTEL_TOKEN}`,
      OTEL_SERVICE_NAME: 'support-agents',
      // Not one batch before shutdown: the spans that arrive are the ones SIGTERM flushed.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    }),
  );
  const [, url] = await waitForOutput(serve, /listening on (http:\/\/\S+)/, 60_000);
  expect(serve.out).toContain('model:    openai, default gpt-5.4-mini');
  expect(serve.out).toContain(`traces:   OTLP to ${collector.url}/v1/traces`);

  const created = await fetch(`${url}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'Which acme tickets are overdue?' }),
  });
  expect(created.status).toBe(201);
  const { id } = (await created.json()) as { id: string };
  const run = await until(
    'the run to finish',
    async () => {
      const r = (await (await fetch(`${url}/api/runs/${id}`)).json()) as Record<string, any>;
      return r.status !== 'QUEUED' && r.status !== 'RUNNING' && r;
    },
    60_000,
  );
  expect(run).toMatchObject({
    status: 'SUCCEEDED',
    output: ANSWER,
    model: 'gpt-5.4-mini',
    provider: 'openai',
    tokensUsed: 812 + 64 + (1_210 - 768) + 40,
  });
  expect(run.costUsd).toBeGreaterThan(0);
  expect(model.requests.map((r) => [r.status, r.invalid, r.streamed])).toEqual([
    [200, null, true],
    [200, null, true],
  ]);
  expect(model.requests[1]!.body.messages.at(-1)).toMatchObject({
    role: 'tool',
    tool_call_id: 'call_list',
    content: expect.stringContaining('ACME-101'),
  });
  expect(collector.requests).toEqual([]); // still in the batch

  serve.child.kill('SIGTERM');
  expect(await exitWithin(serve, 30_000)).toEqual({ code: 0, signal: null });

  expect(collector.requests.length).toBeGreaterThan(0);
  for (const r of collector.requests) {
    expect(r.path).toBe('/v1/traces');
    expect(r.headers['content-type']).toBe('application/x-protobuf');
    expect(r.headers.authorization).toBe(`Bearer ${OTEL_TOKEN}`);
  }
  const spans = collector.spans().filter((s) => s.attributes['durable_agent.run.id'] === id);
  const named = (name: string) => spans.filter((s) => s.name === name);
  const [attempt] = named('invoke_agent') as [CollectedSpan];
  expect(named('invoke_agent')).toHaveLength(1);
  expect(attempt.attributes).toMatchObject({
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-5.4-mini',
    'durable_agent.worker': 'worker-otel',
    'durable_agent.run.status': 'SUCCEEDED',
  });
  expect(attempt.resource).toMatchObject({ 'service.name': 'support-agents', 'service.instance.id': 'worker-otel' });

  const chats = named('chat gpt-5.4-mini');
  const tools = named('execute_tool list_tickets');
  expect([chats.length, tools.length]).toEqual([2, 1]);
  for (const child of [...chats, ...tools]) {
    expect(child.traceId).toBe(attempt.traceId);
    expect(child.parentSpanId).toBe(attempt.spanId);
  }
  expect(chats.map((s) => s.attributes['durable_agent.step.seq'])).toEqual([1, 3]);
  expect(chats[1]!.attributes).toMatchObject({
    'gen_ai.provider.name': 'openai',
    'gen_ai.response.finish_reasons': ['end_turn'],
    'gen_ai.usage.input_tokens': 1_210, // the convention counts cached tokens as input too
    'gen_ai.usage.cache_read.input_tokens': 768,
    'gen_ai.usage.output_tokens': 40,
  });
  expect(tools[0]!.attributes).toMatchObject({ 'gen_ai.tool.call.id': 'call_list', 'gen_ai.tool.name': 'list_tickets' });

  // Neither key shows in what the process printed.
  expect(serve.out + serve.err).not.toContain(API_KEY);
  expect(serve.out + serve.err).not.toContain(OTEL_TOKEN);
}, 180_000);
