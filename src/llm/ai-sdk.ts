/**
 * `aiSdk(model)`: a language model of the AI SDK — @ai-sdk/google, @ai-sdk/amazon-bedrock,
 * @ai-sdk/mistral, an Ollama provider, any provider of the specification LanguageModelV3
 * (@ai-sdk/provider 3.x) — as a model client, inside the same Retrying(TimeLimited(…)) decorators as
 * `anthropic()` and `openAiCompatible()`, with the runtime's settings unless the options say otherwise.
 *
 * The SDK is the caller's: nothing of it is imported here at run time (its errors are told by their
 * marker and fields), so a runtime that never calls an AI SDK model needs none of it installed, and
 * the package's types describe the part of the model they use instead of naming @ai-sdk/provider.
 */
import { z } from 'zod';
import { loadModelCallSettings } from '../config/environment.ts';
import { ConfigError, LlmError } from '../domain/errors.ts';
import { AiSdkStreamAssembler, type ProviderOptions, thinkingOptions, toCallOptions } from './ai-sdk-wire.ts';
import { statusOfErrorType } from './anthropic-failures.ts';
import { decorate, ProviderClient } from './factories.ts';
import { brokenOrUnsent, type Call, describeCause, type FailureContext, ownFailure, report } from './failure.ts';
import { kindOfChatError, shouldRetry, statusOfChatError } from './openai-error-object.ts';
import { parseRetryAfterMs, type RetryListener } from './retrying.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';

/** The call a model's `doStream` takes (LanguageModelV3CallOptions), as far as this client's type needs to say. */
export type AiSdkCallOptions = { prompt: unknown[]; abortSignal?: AbortSignal } & Record<string, unknown>;

/** What `doStream` answers (LanguageModelV3StreamResult), as far as this client's type needs to say. */
export interface AiSdkStreamResult {
  stream: ReadableStream<unknown>;
  response?: { headers?: Record<string, string> };
}

/**
 * The part of an AI SDK language model (LanguageModelV3) the client uses: a provider's model object,
 * e.g. `google('gemini-2.5-pro')`, fits it as it is.
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: 'v3';
  /** The provider's id, e.g. "google.generative-ai", "amazon-bedrock", "mistral.chat". */
  readonly provider: string;
  readonly modelId: string;
  /** URLs the model fetches itself, by media type; content by any other URL is refused before the call. */
  readonly supportedUrls: PromiseLike<Record<string, RegExp[]>> | Record<string, RegExp[]>;
  doStream(options: AiSdkCallOptions): PromiseLike<AiSdkStreamResult>;
}

export interface AiSdkOptions {
  /** The name runs record and traces show; default the model's provider id, e.g. "google.generative-ai". */
  provider?: string;
  /**
   * Provider options sent with every call, by provider key, e.g. `{ openai: { reasoningEffort: 'high' } }`
   * or `{ google: { safetySettings: [...] } }`; a run's `thinking`, where it maps, is set over them.
   */
  providerOptions?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
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

const PROVIDER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const PROVIDER_OPTIONS = "must be an object of options by provider key, e.g. { openai: { reasoningEffort: 'high' } }";

const OptionsSchema = z.strictObject({
  provider: z.string().regex(PROVIDER_NAME, 'use 1 to 64 lower-case letters, digits, ".", "_" or "-"').optional(),
  providerOptions: z
    .record(z.string(), z.record(z.string(), z.unknown(), { error: PROVIDER_OPTIONS }), { error: PROVIDER_OPTIONS })
    .optional(),
  stepTimeoutMs: z.number().positive().optional(),
  maxAttempts: z.number().int().min(1).max(100).optional(),
  retryBaseMs: z.number().int().min(0).optional(),
  retryCapMs: z.number().int().min(0).optional(),
  onRetry: z.custom<RetryListener>((f) => typeof f === 'function', 'must be a function').optional(),
});

/**
 * An AI SDK language model as a model client. It calls `doStream` (text and thinking are seen as they
 * are written; LLM_STREAMING does not apply), maps the log's messages to the specification's prompt and
 * the stream back (see ai-sdk-wire.ts), and classifies failures for the retries: an APICallError by its
 * status (429, 408, 409 and 5xx, or the provider's `isRetryable`, are retried, waiting at least as long
 * as retry-after / retry-after-ms say; 400, 401, 403 and 404 are not), one without a status (the
 * network) is retried, a stream cut short or unreadable is retried, and an option or a block the
 * model cannot take fails the call before it is sent.
 *
 * The client is bound to its model: a run that names another model than `model.modelId` (in the run,
 * or the agent's `model`) fails its call with a permanent error naming both, rather than send a
 * request for one model that is priced and recorded as another. Leave the agent's and the run's model
 * unset: `modelId` is the client's `defaultModel`, so runs call it.
 *
 *   defineAgent({ name: 'helper', system, tools, llm: aiSdk(google('gemini-2.5-pro')) })
 */
export function aiSdk(model: AiSdkLanguageModel, options: AiSdkOptions = {}): LlmClient {
  checkModel(model);
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new ConfigError(`aiSdk: ${first.path.length ? `${first.path.join('.')}: ` : ''}${first.message}`);
  }
  const settings = loadModelCallSettings();
  const policy = {
    stepTimeoutMs: options.stepTimeoutMs ?? settings.stepTimeoutMs,
    maxAttempts: options.maxAttempts ?? settings.maxAttempts,
    retryBaseMs: options.retryBaseMs ?? settings.retryBaseMs,
    retryCapMs: options.retryCapMs ?? settings.retryCapMs,
  };
  if (policy.retryCapMs < policy.retryBaseMs) throw new ConfigError('aiSdk: retryCapMs must be at least retryBaseMs');
  const client = new AiSdkClient(
    model,
    options.provider ?? providerName(model.provider),
    options.providerOptions as ProviderOptions | undefined,
  );
  return new ProviderClient(decorate(client, policy, options.onRetry ? { onRetry: options.onRetry } : {}), model.modelId);
}

function checkModel(model: unknown): void {
  if (typeof model === 'string') {
    throw new ConfigError(
      `aiSdk: model must be a provider's model object, e.g. google('gemini-2.5-pro'), not the string ${JSON.stringify(model)}`,
    );
  }
  const m = model as Partial<AiSdkLanguageModel> | null;
  if (
    m === null ||
    typeof m !== 'object' ||
    typeof m.doStream !== 'function' ||
    typeof m.provider !== 'string' ||
    typeof m.modelId !== 'string'
  ) {
    throw new ConfigError("aiSdk: model must be an AI SDK language model, e.g. google('gemini-2.5-pro') from @ai-sdk/google");
  }
  if (m.specificationVersion !== 'v3') {
    throw new ConfigError(
      `aiSdk: model "${m.modelId}" of ${m.provider} implements specification ${JSON.stringify(m.specificationVersion ?? null)}; aiSdk takes "v3" (the providers released for AI SDK 6, on @ai-sdk/provider 3.x)`,
    );
  }
  if (m.modelId === '' || m.modelId.length > 200)
    throw new ConfigError("aiSdk: the model's modelId must be 1 to 200 characters, as a run's model is");
}

/** The model's provider id as a provider name (lower case; letters, digits, ".", "_", "-"; at most 64). */
export function providerName(provider: string): string {
  const name = provider
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64);
  return name === '' ? 'ai-sdk' : name;
}

type StreamPart = Parameters<AiSdkStreamAssembler['add']>[0];

/** One call of the model's `doStream`, no retries: those are the decorator's. */
class AiSdkClient implements LlmClient {
  private urls?: Promise<Readonly<Record<string, readonly RegExp[]>>>;

  constructor(
    private readonly model: AiSdkLanguageModel,
    readonly provider: string,
    private readonly providerOptions: ProviderOptions | undefined,
  ) {}

  /** Thinking is refused where it is not mapped (see thinkingOptions); the rest maps for every provider. */
  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    if (!options.thinking || options.thinking.type === 'disabled') return null;
    try {
      thinkingOptions(this.model.provider, options.thinking);
      return null;
    } catch (e) {
      return { path: 'modelOptions.thinking', message: (e as Error).message };
    }
  }

  async send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    const call: Call = { responded: false, requestId: null, usage: null, callbackError: undefined };
    try {
      return await this.stream(request, options, call);
    } catch (error) {
      // The caller's own callback failed: not the provider's fault, so not classified as one.
      if (call.callbackError !== undefined && error === call.callbackError) throw error;
      throw toLlmError(error, { ...call, aborted: options.signal?.aborted === true });
    }
  }

  /** The model's own URL patterns, asked once; a model that cannot say fetches none. */
  private supportedUrls(): Promise<Readonly<Record<string, readonly RegExp[]>>> {
    return (this.urls ??= Promise.resolve()
      .then(() => this.model.supportedUrls)
      .then(
        (urls) => (urls !== null && typeof urls === 'object' ? urls : {}),
        () => ({}),
      ));
  }

  private async stream(request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const { modelId } = this.model;
    if (request.model !== modelId) {
      throw new LlmError(
        0,
        `the run's model is "${request.model}", but its client is aiSdk(${this.model.provider} "${modelId}"), bound to that one model: leave the agent's and the run's model unset, or name "${modelId}"`,
        { type: 'model_mismatch' },
      );
    }
    const params = toCallOptions(request, {
      provider: this.model.provider,
      modelId,
      supportedUrls: await this.supportedUrls(),
      ...(this.providerOptions ? { providerOptions: this.providerOptions } : {}),
    });
    if (options.signal) params.abortSignal = options.signal;
    const result = await this.model.doStream(params);
    call.responded = true;
    call.requestId = requestIdOf(result.response?.headers);
    return this.read(result.stream as ReadableStream<StreamPart>, request, options, call);
  }

  private async read(stream: ReadableStream<StreamPart>, request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const assembler = new AiSdkStreamAssembler(request.model);
    const reader = stream.getReader();
    const { signal } = options;
    // A stream that does not watch the signal itself still ends when the call is aborted.
    const cancel = () => void reader.cancel().catch(() => {});
    signal?.addEventListener('abort', cancel, { once: true });
    let whole = false;
    try {
      for (;;) {
        if (signal?.aborted) break;
        const { done, value } = await reader.read();
        if (done) break;
        if (value.type === 'error') throw streamError(value.error, call);
        const streamed = assembler.add(value);
        if (value.type === 'finish') {
          const usage = assembler.usage();
          if (usage) {
            call.usage = usage;
            report(call, () => options.onUsage?.(usage));
          }
        }
        if (streamed) report(call, () => (streamed.kind === 'text' ? options.onText : options.onThinking)?.(streamed.text, 1));
      }
      whole = !signal?.aborted;
    } finally {
      signal?.removeEventListener('abort', cancel);
      if (!whole) cancel();
    }
    if (signal?.aborted) throw new LlmError(-1, 'request aborted', { type: 'aborted', usage: call.usage });
    return assembler.finish(call.requestId);
  }
}

/** The response headers that carry a provider's request id (Anthropic's, OpenAI's and Mistral's, Bedrock's). */
const REQUEST_ID_HEADERS = ['request-id', 'x-request-id', 'x-amzn-requestid'];

function headerSource(headers: unknown): { get(name: string): string | null } {
  const entries = headers !== null && typeof headers === 'object' ? Object.entries(headers as Record<string, unknown>) : [];
  return {
    get: (name) => {
      const found = entries.find(([key, value]) => key.toLowerCase() === name && typeof value === 'string');
      return found ? (found[1] as string) : null;
    },
  };
}

function requestIdOf(headers: unknown): string | null {
  const source = headerSource(headers);
  for (const name of REQUEST_ID_HEADERS) {
    const id = source.get(name);
    if (id) return id;
  }
  return null;
}

/**
 * Credentials a provider's message might echo: a key in a URL's query (Google's `?key=`) or a bearer
 * token. The client never knows the key (the provider holds it), so these shapes are cut out instead.
 */
const SECRETS = [/(\b(?:api[_-]?key|key|access[_-]?token|token|sig|signature)=)[^&\s"'<>]+/gi, /(\bBearer\s+)[A-Za-z0-9._~+/=-]+/g];

/** The most characters of a provider's message kept in an error (a parse error can quote a whole chunk). */
const MAX_MESSAGE = 1_000;

function clean(message: string): string {
  const redacted = SECRETS.reduce((text, pattern) => text.replace(pattern, '$1[redacted]'), message);
  return redacted.length > MAX_MESSAGE ? `${redacted.slice(0, MAX_MESSAGE)}…` : redacted;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The AI SDK's error of an HTTP call, told by its marker or name: the SDK is not imported to ask `isInstance`. */
export function isApiCallError(error: unknown): error is {
  message: string;
  statusCode?: unknown;
  isRetryable?: unknown;
  responseHeaders?: unknown;
  data?: unknown;
  cause?: unknown;
} {
  if (!isRecord(error) && !(error instanceof Error)) return false;
  const e = error as Record<string | symbol, unknown>;
  return e[Symbol.for('vercel.ai.error.AI_APICallError')] === true || e.name === 'AI_APICallError';
}

/** Error codes of a connection that failed or broke, anywhere in an error's chain of causes. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

function isNetworkError(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = error; e instanceof Error && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    if (e instanceof TypeError && /^(fetch failed|failed to fetch)$/i.test(e.message)) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
  }
  return false;
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'ResponseAborted');
}

/** The kind a provider's error body names (`error.type`, `error.code`, Google's `error.status`), if any. */
function kindOfBody(data: unknown): string | null {
  const inner = isRecord(data) && isRecord(data.error) ? data.error : isRecord(data) ? data : {};
  for (const kind of [inner.type, inner.code, inner.status]) if (typeof kind === 'string' && kind !== '' && kind !== 'error') return kind;
  return null;
}

/**
 * Every failure of a call as one LlmError, with the statuses of the other providers: the HTTP status,
 * -1 for no usable response (the network, a stream cut short or unreadable, an abort; retried), 0 for a
 * request never sent (a setting or a prompt the provider refused before sending; not retried). The
 * message is the provider's own, cleaned of credentials; the request's body is never part of it.
 */
export function toLlmError(error: unknown, context: FailureContext & { aborted?: boolean } = {}): LlmError {
  if (error instanceof LlmError) {
    const own = ownFailure(error, context);
    own.message = clean(own.message);
    return own;
  }
  const usage = context.usage ?? null;
  if (context.aborted || isAbort(error)) return new LlmError(-1, 'request aborted', { type: 'aborted', usage });
  if (isApiCallError(error)) {
    const status = typeof error.statusCode === 'number' && Number.isInteger(error.statusCode) ? error.statusCode : -1;
    const message = typeof error.message === 'string' && error.message !== '' ? error.message : `HTTP ${status}`;
    return new LlmError(status, clean(message), {
      type: kindOfBody(error.data) ?? (status === -1 ? 'connection_error' : null),
      requestId: requestIdOf(error.responseHeaders) ?? context.requestId ?? null,
      retryAfterMs: parseRetryAfterMs(headerSource(error.responseHeaders)),
      // The provider's verdict adds retries (a 400 it knows to be transient), never removes the status rule's.
      shouldRetry: error.isRetryable === true ? true : null,
      usage,
      // Not the error itself: it holds the request's body (the whole conversation) and URL.
      ...(status === -1 && error.cause !== undefined ? { cause: error.cause } : {}),
    });
  }
  if (isNetworkError(error)) {
    return new LlmError(-1, clean(`connection error: ${describeCause(error as Error)}`), { type: 'connection_error', cause: error, usage });
  }
  const failure = brokenOrUnsent(error, context);
  failure.message = clean(failure.message);
  return failure;
}

/**
 * An `error` part of the stream. The AI SDK's own errors (a chunk that is not JSON, an HTTP error) are
 * classified as thrown ones; a provider's error object (`{type, message}` of the Messages API, `{message,
 * type, code}` of Chat Completions) by the status its kind stands for, an unknown kind as the server's
 * trouble (500, retried): the stream itself began with a 200.
 */
export function streamError(error: unknown, context: FailureContext = {}): LlmError {
  if (error instanceof Error || isApiCallError(error)) return toLlmError(error, { ...context, responded: true });
  const body = isRecord(error) ? (isRecord(error.error) ? error.error : error) : {};
  const message =
    typeof body.message === 'string' && body.message !== ''
      ? body.message
      : typeof error === 'string'
        ? error
        : 'the stream reported an error';
  const status = statusOfChatError(body);
  return new LlmError(status !== 500 ? status : statusOfErrorType(typeof body.type === 'string' ? body.type : null), clean(message), {
    type: kindOfChatError(body) ?? 'stream_error',
    requestId: context.requestId ?? null,
    shouldRetry: shouldRetry(body, null),
    usage: context.usage ?? null,
  });
}
