/**
 * The OTLP export the CLI registers (observability/otel-export.ts), in-process: the spans of a run
 * driven by a real worker on real PostgreSQL reach a local collector stand-in over OTLP/HTTP JSON,
 * with the configured headers and resource; and a collector that is down does not fail silently.
 */
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { startOtelExport } from '../../src/observability/otel-export.ts';
import { traceEvents } from '../../src/observability/tracing.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { startOtlpCollector, type OtlpCollector } from '../support/otlp-collector.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let collector: OtlpCollector;
beforeAll(async () => {
  [db, collector] = await Promise.all([testDatabase(), startOtlpCollector()]);
});
afterAll(async () => {
  await Promise.all([db?.close(), collector?.close()]);
});

const ping = defineTool({ name: 'ping', description: 'pong', inputSchema: { type: 'object' }, execute: async () => 'pong' });

/** Drives one run to its end with a worker whose spans go to the global tracer provider. */
async function driveRun(): Promise<string> {
  const run = await newRun(db.records, 'ping it');
  const llm = new ScriptedLlm().thenToolUse('call_1', 'ping', {}).thenText('pong received');
  const worker = testWorker(db.store, llm, [ping], { name: 'w-otel', events: [traceEvents({ provider: 'openai' })] });
  expect((await worker.runOnce())?.runId).toBe(run.id);
  return run.id;
}

it('sends the spans of a run as OTLP/JSON, with the configured headers and resource, when it stops', async () => {
  const otel = await startOtelExport(
    {
      tracesUrl: `${collector.url}/custom/traces`,
      protocol: 'http/json',
      headers: { 'x-tenant': 'acme' },
      resource: { 'service.name': 'agents-json', 'deployment.environment': 'test' },
    },
    { 'service.instance.id': 'w-otel' },
  );
  const runId = await driveRun();
  await otel.shutdown();
  await otel.shutdown(); // twice is harmless

  expect(collector.requests.length).toBeGreaterThan(0);
  for (const r of collector.requests) {
    expect([r.path, r.headers['content-type'], r.headers['x-tenant']]).toEqual(['/custom/traces', 'application/json', 'acme']);
  }
  const spans = collector.spans().filter((s) => s.attributes['durable_agent.run.id'] === runId);
  expect(spans.map((s) => s.name).sort()).toEqual(['chat test-model', 'chat test-model', 'execute_tool ping', 'invoke_agent']);
  const root = spans.find((s) => s.name === 'invoke_agent')!;
  expect(root.resource).toMatchObject({ 'service.name': 'agents-json', 'deployment.environment': 'test', 'service.instance.id': 'w-otel' });
  expect(root.attributes['gen_ai.provider.name']).toBe('openai');
  for (const s of spans.filter((x) => x !== root)) expect([s.traceId, s.parentSpanId]).toEqual([root.traceId, root.spanId]);

  // Stopped: the global provider is gone, spans started now are not recorded.
  expect(trace.getTracer('after').startSpan('late').isRecording()).toBe(false);
});

it('a collector that is down: stopping says in the log that the spans were not sent, without the header values', async () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'info',
    destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  const closed = await freePort();
  const otel = await startOtelExport({
    tracesUrl: `http://127.0.0.1:${closed}/v1/traces`,
    protocol: 'http/protobuf',
    headers: { authorization: 'Bearer otel-secret-token-0123456789' },
    resource: { 'service.name': 'x' },
  });
  otel.reportTo(logger);
  await driveRun();
  await otel.shutdown();
  const warnings = lines.filter((l) => l.event === 'otel_export');
  expect(warnings.length).toBeGreaterThan(0);
  expect(String(warnings[0]!.msg)).toMatch(/^OpenTelemetry: /);
  expect(JSON.stringify(lines)).not.toContain('otel-secret-token-0123456789');
});

it('stands down, saying so, when another SDK registered its tracer provider first, and leaves that one in place', async () => {
  const theirs = new BasicTracerProvider();
  expect(trace.setGlobalTracerProvider(theirs)).toBe(true);
  const lines: Record<string, unknown>[] = [];
  const otel = await startOtelExport({
    tracesUrl: `${collector.url}/v1/traces`,
    protocol: 'http/json',
    headers: {},
    resource: { 'service.name': 'x' },
  });
  otel.reportTo(
    createLogger({ level: 'info', destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } }),
  );
  expect(lines.map((l) => l.msg)).toContain(
    'OpenTelemetry: another tracer provider is already registered: its exporter gets the spans, the OTEL_EXPORTER_OTLP_* settings are not used',
  );
  await otel.shutdown();
  expect(trace.getTracer('still theirs').startSpan('span').isRecording()).toBe(true);
  trace.disable();
  await theirs.shutdown();
});
