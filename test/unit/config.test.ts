import { describe, expect, it } from 'vitest';
import { loadConfig, loadModelCallSettings } from '../../src/config/environment.ts';
import { ConfigError } from '../../src/domain/errors.ts';

describe('loadConfig', () => {
  it("has the README's defaults, with the demo model when no key is set", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      databaseUrl: null,
      port: 8080,
      host: '127.0.0.1',
      workerConcurrency: 32,
      leaseMs: 30_000,
      llmProvider: 'demo',
      llmProviderDefaulted: true,
      defaultModel: 'demo',
      stepTimeoutMs: 120_000,
      maxAttempts: 5,
      retryBaseMs: 500,
      retryCapMs: 30_000,
      maxSteps: 50,
      toolTimeoutMs: 60_000,
      logFormat: 'json',
      logLevel: 'info',
      maxRunAttempts: 5,
    });
    expect(c.workerName).toMatch(/-\d+$/);
    expect(c.pricesFile).toMatch(/prices\.json$/);
  });

  it('chooses Anthropic when a key is set, and reads every variable', () => {
    const c = loadConfig({
      ANTHROPIC_API_KEY: 'sk-ant-x',
      PORT: '9000',
      LEASE_SECONDS: '2.5',
      WORKER_NAME: 'w1',
      LOG_FORMAT: 'pretty',
      MAX_STEPS: '7',
    });
    expect(c).toMatchObject({
      llmProvider: 'anthropic',
      llmProviderDefaulted: false,
      defaultModel: 'claude-sonnet-4-6',
      port: 9000,
      leaseMs: 2500,
      workerName: 'w1',
      logFormat: 'pretty',
      maxSteps: 7,
    });
  });

  it('reads the money budget default and the tool concurrency, within their limits', () => {
    expect(loadConfig({})).toMatchObject({ defaultCostBudgetUsd: null, toolConcurrency: 4 });
    expect(loadConfig({ DEFAULT_COST_BUDGET_USD: '2.5', TOOL_CONCURRENCY: '8' })).toMatchObject({
      defaultCostBudgetUsd: 2.5,
      toolConcurrency: 8,
    });
    expect(() => loadConfig({ DEFAULT_COST_BUDGET_USD: '0' })).toThrow(/DEFAULT_COST_BUDGET_USD: must be greater than 0/);
    expect(() => loadConfig({ DEFAULT_COST_BUDGET_USD: '10001' })).toThrow(/DEFAULT_COST_BUDGET_USD: must be at most 10000/);
    expect(() => loadConfig({ TOOL_CONCURRENCY: '0' })).toThrow(/TOOL_CONCURRENCY: must be at least 1/);
  });

  it('lets flags override the environment and treats empty variables as unset', () => {
    expect(loadConfig({ PORT: '9000' }, { PORT: 7000 as never }).port).toBe(7000);
    expect(loadConfig({ DATABASE_URL: '', PORT: '' })).toMatchObject({ databaseUrl: null, port: 8080 });
  });

  it('rejects what cannot work, naming the variable', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ LEASE_SECONDS: 'abc' }, /LEASE_SECONDS/],
      [{ LEASE_SECONDS: '0' }, /LEASE_SECONDS/],
      [{ PORT: '99999' }, /PORT/],
      [{ WORKER_CONCURRENCY: '0' }, /WORKER_CONCURRENCY/],
      [{ LLM_PROVIDER: 'gemini' }, /LLM_PROVIDER/],
      [{ LLM_PROVIDER: 'openai' }, /LLM_PROVIDER=openai needs OPENAI_API_KEY/],
      [{ OPENAI_BASE_URL: 'localhost:11434/v1' }, /OPENAI_BASE_URL: must be an http:\/\/ or https:\/\/ URL/],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT: must be an http/],
      [{ LLM_PROVIDER: 'anthropic' }, /needs ANTHROPIC_API_KEY/],
      [{ RETRY_BASE_MS: '1000', RETRY_CAP_MS: '10' }, /RETRY_CAP_MS/],
      [{ LOG_FORMAT: 'xml' }, /LOG_FORMAT/],
    ];
    for (const [env, message] of bad) {
      expect(() => loadConfig(env), JSON.stringify(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(message);
    }
  });

  it('streams model calls unless LLM_STREAMING says otherwise', () => {
    expect(loadConfig({}).llmStreaming).toBe(true);
    expect(loadConfig({ LLM_STREAMING: 'false' }).llmStreaming).toBe(false);
    expect(loadConfig({ LLM_STREAMING: '0' }).llmStreaming).toBe(false);
    expect(loadConfig({ LLM_STREAMING: 'true' }).llmStreaming).toBe(true);
    expect(() => loadConfig({ LLM_STREAMING: 'sometimes' })).toThrow(/LLM_STREAMING: must be true or false/);
  });

  it('takes the OpenAI-compatible provider only when asked, with its key, endpoint and default model', () => {
    expect(loadConfig({ OPENAI_API_KEY: 'sk-proj-x' }).llmProvider).toBe('demo'); // a key alone chooses nothing
    const c = loadConfig({ LLM_PROVIDER: 'openai', OPENAI_API_KEY: 'ollama', OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' });
    expect(c).toMatchObject({
      llmProvider: 'openai',
      llmProviderDefaulted: false,
      openaiApiKey: 'ollama',
      openaiBaseUrl: 'http://127.0.0.1:11434/v1',
      defaultModel: 'gpt-5.4-mini',
    });
    expect(loadConfig({ LLM_PROVIDER: 'openai', OPENAI_API_KEY: 'k', DEFAULT_MODEL: 'qwen3:8b' }).defaultModel).toBe('qwen3:8b');
  });

  it('reads the model call settings alone for clients made in code, ignoring the rest of the environment', () => {
    expect(loadModelCallSettings({ LLM_PROVIDER: 'anthropic', PORT: 'nope' })).toEqual({
      stepTimeoutMs: 120_000,
      maxAttempts: 5,
      retryBaseMs: 500,
      retryCapMs: 30_000,
      llmStreaming: true,
    });
    expect(loadModelCallSettings({ STEP_TIMEOUT_SECONDS: '1.5', MAX_ATTEMPTS: '2', LLM_STREAMING: 'false' })).toMatchObject({
      stepTimeoutMs: 1500,
      maxAttempts: 2,
      llmStreaming: false,
    });
    expect(() => loadModelCallSettings({ MAX_ATTEMPTS: '0' })).toThrow(/MAX_ATTEMPTS/);
  });
});

describe('OpenTelemetry export settings', () => {
  it('exports nothing without an endpoint, or when the SDK or the traces exporter is turned off', () => {
    expect(loadConfig({}).otel).toBeNull();
    expect(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_HEADERS: 'a=b' }).otel).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }).otel).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }).otel).toBeNull();
  });

  it('adds v1/traces to the general endpoint, takes the traces endpoint as it is, and reads protocol, headers and resource', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).otel).toEqual({
      tracesUrl: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      resource: { 'service.name': 'durable-agent' },
    });
    const c = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/spans',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20tok%3D1, x-tenant=a',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=b',
      OTEL_SERVICE_NAME: 'support-agents',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=staging,service.name=ignored',
    });
    expect(c.otel).toEqual({
      tracesUrl: 'https://traces.example/otlp/spans',
      protocol: 'http/json',
      headers: { authorization: 'Bearer tok=1', 'x-tenant': 'b' },
      resource: { 'deployment.environment': 'staging', 'service.name': 'support-agents' },
    });
  });

  it('refuses grpc and malformed headers, without echoing a header value', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317' };
    expect(() => loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      'OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http/protobuf (the default) or http/json',
    );
    expect(() => loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'udp' })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/protobuf, http\/json or grpc/,
    );
    const bad = () => loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_HEADERS: 'x-a=1,secret-token-123' });
    expect(bad).toThrow('invalid configuration: OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value');
    expect(bad).not.toThrow(/secret-token-123/);
    expect(() => loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_HEADERS: 'a=%E0%A4%A' })).toThrow(/entry 1 .*percent-encoding/);
  });
});
