/**
 * Model clients made in code, e.g. for one agent: `openAiCompatible({ apiKey, baseUrl, model })` or
 * `anthropic({ apiKey })`. Each is the provider inside the same Retrying(TimeLimited(…)) decorators
 * as the runtime's own client, with the runtime's settings (STEP_TIMEOUT_SECONDS, MAX_ATTEMPTS,
 * RETRY_BASE_MS, RETRY_CAP_MS, LLM_STREAMING) unless the options say otherwise.
 */
import { z } from 'zod';
import { loadModelCallSettings, type ModelCallSettings } from '../config/environment.ts';
import { ConfigError } from '../domain/errors.ts';
import { AnthropicClient } from './anthropic.ts';
import { OpenAiClient } from './openai.ts';
import { RetryingLlmClient, type RetryingOptions, type RetryListener } from './retrying.ts';
import { TimeLimitedLlmClient } from './time-limited.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';

/**
 * A provider client's own HTTP timeout (the OpenAI SDK's, AnthropicClient's transport's) sits this
 * far above the step timeout, so that our abort, which yields a clean "step timeout", always fires
 * first and the client's limit only catches what slips through.
 */
export const SDK_TIMEOUT_MARGIN_MS = 5_000;

type Policy = Pick<ModelCallSettings, 'stepTimeoutMs' | 'maxAttempts' | 'retryBaseMs' | 'retryCapMs'>;

/** Retrying(TimeLimited(provider)): the time limit per attempt, retries around it. */
export function decorate(provider: LlmClient, policy: Policy, options: RetryingOptions = {}): LlmClient {
  const limited = new TimeLimitedLlmClient(provider, policy.stepTimeoutMs);
  return new RetryingLlmClient(limited, { maxAttempts: policy.maxAttempts, baseMs: policy.retryBaseMs, capMs: policy.retryCapMs }, options);
}

export interface ProviderClientOptions {
  /** The provider's API key; it never appears in an error or a log line. */
  apiKey: string;
  /** The API's endpoint; default the provider's own. */
  baseUrl?: string;
  /** The model the agent's runs call when neither the run nor the agent names one. */
  model?: string;
  /** Stream answers (text is seen as it is written); default LLM_STREAMING. */
  streaming?: boolean;
  /** @unit milliseconds — the limit of one attempt; default STEP_TIMEOUT_SECONDS. */
  stepTimeoutMs?: number;
  /** Calls per model step at most, retries included; default MAX_ATTEMPTS. */
  maxAttempts?: number;
  /** @unit milliseconds — default RETRY_BASE_MS. */
  retryBaseMs?: number;
  /** @unit milliseconds — default RETRY_CAP_MS. */
  retryCapMs?: number;
  /** Told before each retry (e.g. to count them). */
  onRetry?: RetryListener;
}

export interface AnthropicOptions extends ProviderClientOptions {
  /**
   * More headers for every request, e.g. a gateway's own. Those the client sets itself (`host`,
   * `accept`, `content-type`, `content-length`, `transfer-encoding`, `connection`, `keep-alive`,
   * `authorization`, `x-api-key`, `anthropic-version`) are refused, and `anthropic-beta` with `betas`.
   */
  headers?: Readonly<Record<string, string>>;
  /** Beta features to ask for, e.g. `['context-1m-2025-08-07']`: sent as one `anthropic-beta: a,b` header. */
  betas?: readonly string[];
}

export interface OpenAiCompatibleOptions extends ProviderClientOptions {
  /** The API's endpoint up to /v1, e.g. http://127.0.0.1:11434/v1 for Ollama; default OpenAI's. */
  baseUrl?: string;
  /** The name runs record and traces show, e.g. "vllm"; default "openai". */
  provider?: string;
}

const OptionsSchema = z.object({
  apiKey: z.string({ error: 'must be a non-empty string' }).min(1, 'must be a non-empty string'),
  baseUrl: z.url({ error: 'must be an http(s) URL', protocol: /^https?$/ }).optional(),
  model: z.string().min(1).max(200).optional(),
  streaming: z.boolean().optional(),
  stepTimeoutMs: z.number().positive().optional(),
  maxAttempts: z.number().int().min(1).max(100).optional(),
  retryBaseMs: z.number().int().min(0).optional(),
  retryCapMs: z.number().int().min(0).optional(),
  onRetry: z.custom<RetryListener>((f) => typeof f === 'function', 'must be a function').optional(),
  provider: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'use 1 to 64 lower-case letters, digits, ".", "_" or "-"')
    .optional(),
});

function check<T extends ProviderClientOptions>(options: T, factory: string): T & ModelCallSettings {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new ConfigError(`${factory}: ${first.path.length ? `${first.path.join('.')}: ` : ''}${first.message}`);
  }
  const settings = loadModelCallSettings();
  const merged = {
    ...options,
    stepTimeoutMs: options.stepTimeoutMs ?? settings.stepTimeoutMs,
    maxAttempts: options.maxAttempts ?? settings.maxAttempts,
    retryBaseMs: options.retryBaseMs ?? settings.retryBaseMs,
    retryCapMs: options.retryCapMs ?? settings.retryCapMs,
    llmStreaming: options.streaming ?? settings.llmStreaming,
  };
  if (merged.retryCapMs < merged.retryBaseMs) throw new ConfigError(`${factory}: retryCapMs must be at least retryBaseMs`);
  return merged;
}

/** A decorated client that also says which model its agent's runs call by default. */
export class ProviderClient implements LlmClient {
  constructor(
    private readonly inner: LlmClient,
    readonly defaultModel: string | null,
  ) {}

  get provider(): string {
    return this.inner.provider;
  }

  send(request: LlmRequest, options?: LlmCallOptions): Promise<LlmResponse> {
    return this.inner.send(request, options);
  }

  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    return this.inner.checkOptions?.(options) ?? null;
  }
}

/** Any server that speaks OpenAI's Chat Completions API: OpenAI, vLLM, Ollama, LM Studio … */
export function openAiCompatible(options: OpenAiCompatibleOptions): LlmClient {
  const o = check(options, 'openAiCompatible');
  const provider = new OpenAiClient({
    apiKey: o.apiKey,
    baseUrl: o.baseUrl ?? null,
    timeoutMs: o.stepTimeoutMs + SDK_TIMEOUT_MARGIN_MS,
    streaming: o.llmStreaming,
    ...(o.provider ? { provider: o.provider } : {}),
  });
  return new ProviderClient(decorate(provider, o, o.onRetry ? { onRetry: o.onRetry } : {}), o.model ?? null);
}

/** Anthropic's Messages API. */
export function anthropic(options: AnthropicOptions): LlmClient {
  const o = check(options, 'anthropic');
  let provider: AnthropicClient;
  try {
    provider = new AnthropicClient({
      apiKey: o.apiKey,
      baseUrl: o.baseUrl ?? null,
      timeoutMs: o.stepTimeoutMs + SDK_TIMEOUT_MARGIN_MS,
      streaming: o.llmStreaming,
      ...(o.headers !== undefined ? { headers: o.headers } : {}),
      ...(o.betas !== undefined ? { betas: o.betas } : {}),
    });
  } catch (error) {
    // The headers, the betas or the proxy of the environment: said as this factory's, as the options above are.
    if (error instanceof ConfigError) throw new ConfigError(`anthropic: ${error.message}`);
    throw error;
  }
  return new ProviderClient(decorate(provider, o, o.onRetry ? { onRetry: o.onRetry } : {}), o.model ?? null);
}
