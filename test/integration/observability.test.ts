import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RUN_STATUSES, type Usage } from '../../src/domain/types.ts';
import { LlmError } from '../../src/domain/errors.ts';
import { logEvents } from '../../src/observability/log-events.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { formatPretty } from '../../src/observability/pretty.ts';
import { traceEvents } from '../../src/observability/tracing.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const FAKE_KEY = 'sk-ant-api03-FAKEFAKEFAKEFAKE0123456789';
// USD per million tokens, as a prices file would say.
const costOf = (_model: string, u: Usage) =>
  (u.inputTokens * 3 + u.outputTokens * 15 + u.cacheCreationInputTokens * 3.75 + u.cacheReadInputTokens * 0.3) / 1e6;

let db: TestDatabase;
let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;
beforeAll(async () => {
  db = await testDatabase();
  exporter = new InMemorySpanExporter();
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
});
afterAll(async () => {
  await provider.shutdown();
  await db.close();
});
beforeEach(() => exporter.reset());

/** Everything one test observes: a logger writing into an array, fresh metrics, spans into the exporter. */
function observe() {
  const raw: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void raw.push(s.trimEnd()) } });
  const metrics = createMetrics(new RunStats(db.pool), { models: ['test-model'], agents: ['demo'] });
  const events = [logEvents(logger), metrics.events, traceEvents({ provider: 'anthropic', tracer: provider.getTracer('test') })];
  const lines = () => raw.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, metrics, events, raw, lines };
}

/** The value of the one sample of `name` whose labels include `labels`, from Prometheus text. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const found = text.split('\n').flatMap((line) => {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) return [];
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    return Object.entries(labels).every(([k, v]) => have[k] === v) ? [Number(m[3])] : [];
  });
  expect(found, `${name}${JSON.stringify(labels)}`).toHaveLength(1);
  return found[0]!;
}

const byName = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;

describe('observability of a run', () => {
  it('counts tokens and cost, logs with run context and no secrets, and traces the attempt', async () => {
    const o = observe();
    const llm = new ScriptedLlm()
      .then(() => ({
        ...response(
          [{ type: 'tool_use', id: 'toolu_01Ab', name: 'list_tickets', input: { filter: 'TOOL-INPUT-TEXT' } }],
          'tool_use',
          usage(812, 64, 300, 100),
        ),
        id: 'msg_first',
        model: 'claude-sonnet-4-6-20250101',
        requestId: 'req_first',
        attempts: 2,
      }))
      .thenText('MODEL-ANSWER-TEXT', 1210, 140);
    const listTickets = defineTool({
      name: 'list_tickets',
      description: 'lists tickets',
      inputSchema: { type: 'object' },
      async execute(_input, ctx) {
        // A careless tool: logs its credentials in every shape they come in.
        ctx.log!.info(
          { apiKey: FAKE_KEY, headers: { authorization: `Bearer ${FAKE_KEY}`, 'x-api-key': FAKE_KEY }, client: { api_key: FAKE_KEY } },
          'calling the ticket API',
        );
        ctx.log!.warn(`ticket API refused key ${FAKE_KEY}`);
        return 'TOOL-RESULT-TEXT';
      },
    });
    const run = await newRun(db.records, 'USER-INPUT-TEXT');

    const result = await testWorker(db.store, llm, [listTickets], {
      name: 'worker-A',
      events: o.events,
      costOf,
      logger: o.logger,
    }).runOnce();
    expect(result).toEqual({ runId: run.id, status: 'SUCCEEDED' });

    // Metrics: tokens per direction and cost under the run's model; runs by status from the database.
    const { body, contentType } = await o.metrics.render();
    expect(contentType).toContain('text/plain');
    const model = { model: 'test-model' };
    expect(sample(body, 'agent_tokens_total', { ...model, direction: 'input' })).toBe(812 + 1210);
    expect(sample(body, 'agent_tokens_total', { ...model, direction: 'output' })).toBe(64 + 140);
    expect(sample(body, 'agent_tokens_total', { ...model, direction: 'cache_read' })).toBe(300);
    expect(sample(body, 'agent_tokens_total', { ...model, direction: 'cache_write' })).toBe(100);
    const expectedCost = costOf('', usage(812, 64, 300, 100)) + costOf('', usage(1210, 140));
    expect(sample(body, 'agent_cost_usd_total', model)).toBeCloseTo(expectedCost, 12);
    expect(Number((await db.records.state(run.id)).costUsd)).toBeCloseTo(expectedCost, 8);
    expect(sample(body, 'agent_step_latency_seconds_count', { kind: 'MODEL', outcome: 'retried' })).toBe(1);
    expect(sample(body, 'agent_step_latency_seconds_count', { kind: 'MODEL', outcome: 'ok' })).toBe(1);
    expect(sample(body, 'agent_step_latency_seconds_count', { kind: 'TOOL', outcome: 'ok' })).toBe(1);
    expect(sample(body, 'agent_runs_claimed_total')).toBe(1);
    expect(sample(body, 'agent_runs_finished_total', { status: 'SUCCEEDED' })).toBe(1);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM durable_agent.run WHERE status = 'SUCCEEDED'`);
    expect(sample(body, 'agent_runs', { status: 'SUCCEEDED' })).toBe(rows[0]!.n);
    for (const status of RUN_STATUSES) expect(sample(body, 'agent_runs', { status })).toBeGreaterThanOrEqual(0);
    expect(sample(body, 'agent_queue_depth', { agent: 'demo' })).toBe(0);
    expect(body).toContain('process_cpu_user_seconds_total'); // default metrics, on this registry
    expect(body).not.toContain(run.id); // no unbounded labels

    // Logs: the tool's own lines, written through its ctx.log, carry the run context.
    const lines = o.lines();
    expect(lines.find((l) => l.msg === 'calling the ticket API')).toMatchObject({
      run_id: run.id,
      step_seq: 2,
      worker: 'worker-A',
      tool_use_id: 'toolu_01Ab',
      apiKey: '[redacted]',
      headers: { authorization: '[redacted]', 'x-api-key': '[redacted]' },
      client: { api_key: '[redacted]' },
    });
    for (const line of o.raw) {
      expect(line).not.toContain('FAKEFAKE');
      for (const content of ['USER-INPUT-TEXT', 'TOOL-INPUT-TEXT', 'TOOL-RESULT-TEXT', 'MODEL-ANSWER-TEXT'])
        expect(line).not.toContain(content);
    }
    const events = lines.filter((l) => l.event);
    expect(events.map((l) => [l.event, l.step_seq, l.run_id, l.worker])).toEqual([
      ['run_claimed', undefined, run.id, 'worker-A'],
      ['model_step', 1, run.id, 'worker-A'],
      ['tool_started', 2, run.id, 'worker-A'],
      ['tool_step', 2, run.id, 'worker-A'],
      ['model_step', 3, run.id, 'worker-A'],
      ['run_finished', undefined, run.id, 'worker-A'],
    ]);
    expect(events[1]).toMatchObject({
      kind: 'MODEL',
      status: 'DONE',
      stop_reason: 'tool_use',
      input_tokens: 812,
      output_tokens: 64,
      cache_read_input_tokens: 300,
      cache_creation_input_tokens: 100,
      attempts: 2,
      request_id: 'req_first',
      cost_usd: Math.round(costOf('', usage(812, 64, 300, 100)) * 1e8) / 1e8,
    });
    expect(events[1]!.latency_ms).toEqual(expect.any(Number));
    expect(events[3]).toMatchObject({ kind: 'TOOL', status: 'DONE', tool_name: 'list_tickets', tool_use_id: 'toolu_01Ab', attempts: 1 });
    expect(events[5]).toMatchObject({ status: 'SUCCEEDED', tokens_used: 812 + 64 + 100 + 1210 + 140 });
    const short = run.id.slice(0, 8);
    expect(events.map(formatPretty)).toEqual([
      `worker-A run=${short} claimed`,
      expect.stringMatching(
        new RegExp(
          `^worker-A run=${short} seq=1 MODEL stop=tool_use in=812 out=64 cache_read=300 cache_write=100 latency=\\d+ms attempts=2$`,
        ),
      ),
      `worker-A run=${short} seq=2 TOOL list_tickets id=toolu_01Ab started`,
      expect.stringMatching(new RegExp(`^worker-A run=${short} seq=2 TOOL list_tickets id=toolu_01Ab done \\d+ms$`)),
      expect.stringMatching(new RegExp(`^worker-A run=${short} seq=3 MODEL stop=end_turn in=1210 out=140 latency=\\d+ms$`)),
      `worker-A run=${short} SUCCEEDED tokens=2326`,
    ]);

    // Traces: one attempt span with the model and tool calls as its children.
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['chat test-model', 'execute_tool list_tickets', 'chat test-model', 'invoke_agent']);
    const [attempt] = byName(spans, 'invoke_agent');
    expect(attempt!.parentSpanContext).toBeUndefined();
    expect(attempt!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'test-model',
      'durable_agent.run.id': run.id,
      'durable_agent.run.status': 'SUCCEEDED',
    });
    expect(attempt!.status.code).not.toBe(SpanStatusCode.ERROR);
    for (const child of spans.filter((s) => s !== attempt)) {
      expect(child.parentSpanContext?.spanId).toBe(attempt!.spanContext().spanId);
      expect(child.spanContext().traceId).toBe(attempt!.spanContext().traceId);
      expect(ms(child.startTime)).toBeGreaterThanOrEqual(ms(attempt!.startTime) - 1);
      expect(ms(child.endTime)).toBeLessThanOrEqual(ms(attempt!.endTime) + 1);
    }
    expect(spans[0]!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'test-model',
      'gen_ai.response.model': 'claude-sonnet-4-6-20250101',
      'gen_ai.response.id': 'msg_first',
      'gen_ai.response.finish_reasons': ['tool_use'],
      'gen_ai.usage.input_tokens': 812 + 300 + 100, // the convention counts cached input as input
      'gen_ai.usage.output_tokens': 64,
      'gen_ai.usage.cache_read.input_tokens': 300,
      'gen_ai.usage.cache_creation.input_tokens': 100,
      'durable_agent.step.attempts': 2,
      'durable_agent.cost_usd': costOf('', usage(812, 64, 300, 100)),
      'durable_agent.provider.request_id': 'req_first',
      'durable_agent.run.id': run.id,
      'durable_agent.step.seq': 1,
    });
    expect(spans[1]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'list_tickets',
      'gen_ai.tool.call.id': 'toolu_01Ab',
      'durable_agent.run.id': run.id,
      'durable_agent.step.seq': 2,
    });
    expect(spans[2]!.attributes).toMatchObject({ 'gen_ai.response.finish_reasons': ['end_turn'], 'durable_agent.step.seq': 3 });
    const everything = JSON.stringify(spans.map((s) => [s.attributes, s.events]));
    for (const content of ['USER-INPUT-TEXT', 'TOOL-INPUT-TEXT', 'TOOL-RESULT-TEXT', 'MODEL-ANSWER-TEXT'])
      expect(everything).not.toContain(content);
  });

  it('shows a crash and the resume on another worker in logs, metrics and traces', async () => {
    const o = observe();
    const llm = new ScriptedLlm().thenToolUse('toolu_01Ab', 'list_tickets', {}).thenText('done');
    let calls = 0;
    const crashOnce = defineTool({
      name: 'list_tickets',
      description: 'lists tickets',
      inputSchema: { type: 'object' },
      async execute() {
        if (++calls === 1) throw new SimulatedCrash('worker A dies here');
        return 'two tickets';
      },
    });
    const run = await newRun(db.records);
    await expect(testWorker(db.store, llm, [crashOnce], { name: 'worker-A', events: o.events }).runOnce()).rejects.toThrow(SimulatedCrash);
    await expireLease(db.pool, run.id);
    await testWorker(db.store, llm, [crashOnce], { name: 'worker-B', events: o.events }).runOnce();

    const short = run.id.slice(0, 8);
    const pretty = o.lines().map(formatPretty);
    expect(pretty).toContain(`ERROR worker-A run=${short} attempt ended (crash) err=worker A dies here`);
    expect(pretty).toContain(`worker-B run=${short} resumed at seq=2`);
    expect(pretty).toContain(`worker-B run=${short} seq=2 TOOL list_tickets id=toolu_01Ab started again (resumed)`);

    const body = (await o.metrics.render()).body;
    expect(sample(body, 'agent_attempts_ended_total', { reason: 'crash' })).toBe(1);
    expect(sample(body, 'agent_runs_claimed_total')).toBe(2);

    const attempts = byName(exporter.getFinishedSpans(), 'invoke_agent');
    expect(attempts.map((s) => [s.attributes['durable_agent.worker'], s.status.code, s.attributes['durable_agent.attempt.end']])).toEqual([
      ['worker-A', SpanStatusCode.ERROR, 'crash'],
      ['worker-B', SpanStatusCode.UNSET, undefined],
    ]);
    expect(attempts[1]!.attributes['durable_agent.resumed_at_seq']).toBe(2);
    const tool = byName(exporter.getFinishedSpans(), 'execute_tool list_tickets');
    expect(tool).toHaveLength(1); // the crashed call never finished, so only B's call has a span
    expect(tool[0]!.parentSpanContext?.spanId).toBe(attempts[1]!.spanContext().spanId);
  });

  it('reports a failed model call as an error step, a failed run and error spans', async () => {
    const o = observe();
    const llm = new ScriptedLlm().thenFail(
      new LlmError(400, 'prompt is too long', { type: 'invalid_request_error', requestId: 'req_bad' }),
    );
    const run = await newRun(db.records);
    await testWorker(db.store, llm, [], { name: 'worker-A', events: o.events }).runOnce();

    const body = (await o.metrics.render()).body;
    expect(sample(body, 'agent_step_latency_seconds_count', { kind: 'MODEL', outcome: 'error' })).toBe(1);
    expect(sample(body, 'agent_runs_finished_total', { status: 'FAILED' })).toBe(1);
    expect(o.lines().find((l) => l.event === 'model_failed')).toMatchObject({
      level: 40,
      run_id: run.id,
      step_seq: 1,
      http_status: 400,
      error_type: 'invalid_request_error',
      request_id: 'req_bad',
    });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.status.code])).toEqual([
      ['chat test-model', SpanStatusCode.ERROR],
      ['invoke_agent', SpanStatusCode.ERROR],
    ]);
    expect(spans[0]!.attributes['error.type']).toBe('400');
  });
});

describe('model labels', () => {
  it('gives the known models their name and every other name "other", however many names clients send', async () => {
    const own = await testDatabase();
    try {
      const metrics = createMetrics(new RunStats(own.pool), { models: ['claude-sonnet-4-6', 'demo'] });
      const names = ['claude-sonnet-4-6', 'made-up-1', 'made-up-2', 'made-up-3'];
      for (const model of names) {
        const run = await newRun(own.records, 'x', { model });
        const llm = new ScriptedLlm().thenText('done', 100, 10);
        expect(await testWorker(own.store, llm, [], { name: 'W', events: [metrics.events] }).runOnce()).toEqual({
          runId: run.id,
          status: 'SUCCEEDED',
        });
      }
      const { body } = await metrics.render();
      expect(sample(body, 'agent_tokens_total', { model: 'claude-sonnet-4-6', direction: 'input' })).toBe(100);
      expect(sample(body, 'agent_tokens_total', { model: 'other', direction: 'input' })).toBe(300);
      expect(sample(body, 'agent_cost_usd_total', { model: 'other' })).toBe(0);
      expect(body).not.toContain('made-up');
    } finally {
      await own.close();
    }
  });
});

describe('gauges read from the database', () => {
  it('counts claimable runs: queued and due, or running with a lapsed lease', async () => {
    const before = (await new RunStats(db.pool).queueDepth()).demo ?? 0;
    const due = await newRun(db.records);
    const later = await newRun(db.records);
    const leased = await newRun(db.records);
    const lapsed = await newRun(db.records);
    await db.pool.query(`UPDATE durable_agent.run SET run_at = now() + interval '1 hour' WHERE id = $1`, [later.id]);
    await db.pool.query(
      `UPDATE durable_agent.run SET status = 'RUNNING', locked_by = 'w', locked_until = now() + interval '1 minute' WHERE id = ANY($1)`,
      [[leased.id, lapsed.id]],
    );
    await expireLease(db.pool, lapsed.id);
    expect(((await new RunStats(db.pool).queueDepth()).demo ?? 0) - before).toBe(2);
    const counts = await new RunStats(db.pool).countRunsByStatus();
    expect(counts.RUNNING).toBeGreaterThanOrEqual(2);
    await db.pool.query('DELETE FROM durable_agent.run WHERE id = ANY($1)', [[due.id, later.id, leased.id, lapsed.id]]);
  });

  it('keeps the last values when a read fails or hangs, instead of failing the scrape; counts retries by reason', async () => {
    let fail = false;
    const metrics = createMetrics(
      {
        countRunsByStatus: async () => {
          if (fail) throw new Error('connection refused');
          return { SUCCEEDED: 3, WAITING: 1 };
        },
        queueDepth: () => (fail ? new Promise<Record<string, number>>(() => {}) : Promise.resolve({ helper: 5 })),
        readTimeoutMs: 50,
      },
      { models: [] },
    );
    for (const reason of ['429', '429', 'timeout']) metrics.onLlmRetry(reason);
    for (const round of [1, 2]) {
      const { body } = await metrics.render();
      expect(sample(body, 'agent_runs', { status: 'SUCCEEDED' })).toBe(3);
      expect(sample(body, 'agent_runs', { status: 'QUEUED' })).toBe(0);
      expect(sample(body, 'agent_runs', { status: 'WAITING' })).toBe(1);
      expect(sample(body, 'agent_queue_depth', { agent: 'helper' })).toBe(5);
      if (round === 2) {
        expect(sample(body, 'agent_metrics_read_failures_total', { gauge: 'agent_runs' })).toBe(1);
        expect(sample(body, 'agent_metrics_read_failures_total', { gauge: 'agent_queue_depth' })).toBe(1);
        expect(sample(body, 'agent_llm_retries_total', { reason: '429' })).toBe(2);
        expect(sample(body, 'agent_llm_retries_total', { reason: 'timeout' })).toBe(1);
      }
      fail = true;
    }
  });
});
