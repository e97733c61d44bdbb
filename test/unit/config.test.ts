import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { ConfigError } from '../../src/errors.ts';

describe('loadConfig', () => {
  it("has the README's defaults, with the demo model when no key is set", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      databaseUrl: null, port: 8080, host: '127.0.0.1', workerConcurrency: 32, leaseMs: 30_000, llmProvider: 'demo',
      llmProviderDefaulted: true, defaultModel: 'demo', stepTimeoutMs: 120_000, maxAttempts: 5, retryBaseMs: 500,
      retryCapMs: 30_000, maxSteps: 50, toolTimeoutMs: 60_000, logFormat: 'json', logLevel: 'info', maxRunAttempts: 5,
    });
    expect(c.workerName).toMatch(/-\d+$/);
    expect(c.pricesFile).toMatch(/prices\.json$/);
  });

  it('chooses Anthropic when a key is set, and reads every variable', () => {
    const c = loadConfig({
      ANTHROPIC_API_KEY: 'sk-ant-x', PORT: '9000', LEASE_SECONDS: '2.5', WORKER_NAME: 'w1', LOG_FORMAT: 'pretty', MAX_STEPS: '7',
    });
    expect(c).toMatchObject({ llmProvider: 'anthropic', llmProviderDefaulted: false, defaultModel: 'claude-sonnet-4-6', port: 9000, leaseMs: 2500, workerName: 'w1', logFormat: 'pretty', maxSteps: 7 });
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
      [{ LLM_PROVIDER: 'openai' }, /LLM_PROVIDER/],
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
});
