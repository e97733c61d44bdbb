import type { Config } from '../config/environment.ts';
import { ConfigError } from '../domain/errors.ts';
import { AnthropicClient } from './anthropic.ts';
import { DemoLlmClient } from '../demo/demo-llm.ts';
import { decorate, SDK_TIMEOUT_MARGIN_MS } from './factories.ts';
import { OpenAiClient } from './openai.ts';
import type { RetryingOptions } from './retrying.ts';
import type { LlmClient } from './types.ts';

export type {
  CallOptions,
  LlmCallOptions,
  LlmClient,
  LlmRequest,
  LlmResponse,
  ModelOptions,
  ThinkingOption,
  ToolChoice,
  ToolDefinition,
} from './types.ts';
export { AnthropicClient } from './anthropic.ts';
export { StreamAssembler } from './anthropic-stream.ts';
export { DemoLlmClient, DEMO_LABEL } from '../demo/demo-llm.ts';
export { OpenAiClient, DEFAULT_OPENAI_BASE_URL, type OpenAiClientOptions } from './openai.ts';
export { ChatStreamAssembler } from './openai-stream.ts';
export {
  anthropic,
  openAiCompatible,
  type AnthropicOptions,
  type OpenAiCompatibleOptions,
  type ProviderClientOptions,
} from './factories.ts';
export { aiSdk, type AiSdkLanguageModel, type AiSdkOptions } from './ai-sdk.ts';
export { AiSdkStreamAssembler, toCallOptions as toAiSdkCallOptions } from './ai-sdk-wire.ts';
export { RetryingLlmClient, backoffMs, giveUpReason, parseRetryAfterMs, retryReason } from './retrying.ts';
export { normaliseChatUsage, normaliseContent, normaliseUsage } from './normalise.ts';
export type { RandomSource, RetryListener, RetryPolicy, RetryingOptions, Sleeper } from './retrying.ts';
export { TimeLimitedLlmClient } from './time-limited.ts';
export { PriceTable, loadPrices, parsePrices, type ModelPrice } from './prices.ts';
export { MAX_TIMER_MS, timerSleeper } from '../util/sleep.ts';

export type LlmConfig = Pick<
  Config,
  'llmProvider' | 'anthropicApiKey' | 'anthropicBaseUrl' | 'demoLatencyMs' | 'stepTimeoutMs' | 'maxAttempts' | 'retryBaseMs' | 'retryCapMs'
> &
  // Optional so a configuration written before streaming (or the OpenAI provider) existed still
  // builds a client (streaming on).
  Partial<Pick<Config, 'llmStreaming' | 'openaiApiKey' | 'openaiBaseUrl' | 'anthropicBetas'>>;

/** The model client the worker uses: Retrying(TimeLimited(provider)), the time limit per attempt. */
export function createLlmClient(config: LlmConfig, options: RetryingOptions = {}): LlmClient {
  return decorate(createProvider(config), config, options);
}

/** The bare provider named by the configuration, without retries or time limit. */
export function createProvider(config: LlmConfig): LlmClient {
  switch (config.llmProvider) {
    case 'anthropic':
      if (!config.anthropicApiKey) throw new ConfigError('LLM_PROVIDER=anthropic needs ANTHROPIC_API_KEY');
      return new AnthropicClient({
        apiKey: config.anthropicApiKey,
        baseUrl: config.anthropicBaseUrl,
        timeoutMs: config.stepTimeoutMs + SDK_TIMEOUT_MARGIN_MS,
        streaming: config.llmStreaming ?? true,
        betas: config.anthropicBetas ?? [],
      });
    case 'openai':
      if (!config.openaiApiKey) throw new ConfigError('LLM_PROVIDER=openai needs OPENAI_API_KEY');
      return new OpenAiClient({
        apiKey: config.openaiApiKey,
        baseUrl: config.openaiBaseUrl,
        timeoutMs: config.stepTimeoutMs + SDK_TIMEOUT_MARGIN_MS,
        streaming: config.llmStreaming ?? true,
      });
    case 'demo':
      return new DemoLlmClient({ latencyMs: config.demoLatencyMs });
    default: {
      const unknown: never = config.llmProvider;
      throw new ConfigError(`unknown LLM provider ${String(unknown)}`);
    }
  }
}
