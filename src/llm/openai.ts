import type OpenAI from 'openai';
import { LlmError } from '../domain/errors.ts';
import { ChatStreamAssembler } from './openai-stream.ts';
import { chatRefusal, toChatParams, toLlmResponse } from './openai-wire.ts';
import { MAX_TIMER_MS } from '../util/sleep.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';
import { type Call, report } from './failure.ts';

export interface OpenAiClientOptions {
  /** Sent as `Authorization: Bearer`; a local server that checks none takes any non-empty value. */
  apiKey: string;
  /** The API's endpoint up to /v1 (vLLM, Ollama, LM Studio …); null or absent means OpenAI's. */
  baseUrl?: string | null;
  /**
   * @unit milliseconds — the SDK's own limit for one HTTP request, a backstop only: the time-limited
   * decorator aborts sooner. Default 10 minutes.
   */
  timeoutMs?: number;
  /** Ask for the answer as a stream of chunks (`stream: true`) and report its text as it comes. Default true. */
  streaming?: boolean;
  /** The name runs record and traces show; default "openai". A self-hosted server may say which it is. */
  provider?: string;
}

export const DEFAULT_OPENAI_BASE_URL = 'https://api.openai.com/v1';

/**
 * The Chat Completions API (OpenAI's, or any server that speaks it) through the official SDK. One
 * call, no retries: those are the decorator's.
 */
export class OpenAiClient implements LlmClient {
  readonly provider: string;
  private readonly options: OpenAiClientOptions;
  private readonly apiKey: string;
  private readonly streaming: boolean;
  private loaded?: Promise<OpenAI>;

  constructor(options: OpenAiClientOptions) {
    this.provider = options.provider ?? 'openai';
    this.options = options;
    this.apiKey = options.apiKey;
    this.streaming = options.streaming ?? true;
  }

  /**
   * The SDK, loaded at the first call: it is a large module graph (~14 MB resident), and a runtime
   * whose agents never call this API should not carry it.
   */
  private sdk(): Promise<OpenAI> {
    const options = this.options;
    return (this.loaded ??= import('openai').then(
      ({ default: OpenAI }) =>
        new OpenAI({
          apiKey: options.apiKey,
          // Every option the SDK would otherwise read from the environment is explicit, so it reads none
          // behind config's back; and it logs nothing itself (a chunk it cannot parse would be printed).
          baseURL: options.baseUrl ?? DEFAULT_OPENAI_BASE_URL,
          organization: null,
          project: null,
          webhookSecret: null,
          logLevel: 'off',
          maxRetries: 0,
          timeout: Math.min(options.timeoutMs ?? 10 * 60 * 1000, MAX_TIMER_MS),
        }),
    ));
  }

  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    return chatRefusal(options);
  }

  async send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    const call: Call = { responded: false, requestId: null, usage: null, callbackError: undefined };
    try {
      return this.streaming ? await this.stream(request, options, call) : await this.create(request, options, call);
    } catch (error) {
      // The caller's own callback failed: not the provider's fault, so not classified as one.
      if (call.callbackError !== undefined && error === call.callbackError) throw error;
      const { toLlmError } = await import('./openai-errors.ts');
      throw toLlmError(error, { apiKey: this.apiKey, ...call });
    }
  }

  private async create(request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const pending = (await this.sdk()).chat.completions.create(toChatParams(request), { signal: options.signal });
    const response = await pending.asResponse();
    call.responded = true;
    call.requestId = response.headers.get('x-request-id');
    // An HTML page or an empty body comes back as a string or undefined, not a completion.
    return toLlmResponse((await pending) as unknown, call.requestId, request.model);
  }

  private async stream(request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const params = { ...toChatParams(request), stream: true as const, stream_options: { include_usage: true } };
    const { data: chunks, request_id } = await (
      await this.sdk()
    ).chat.completions
      .create(params, { signal: options.signal })
      .withResponse();
    call.responded = true;
    call.requestId = request_id ?? null;
    const assembler = new ChatStreamAssembler(request.model);
    for await (const chunk of chunks) {
      const text = assembler.add(chunk);
      if (chunk.usage) {
        call.usage = assembler.usage();
        if (call.usage) report(call, () => options.onUsage?.(call.usage!));
      }
      if (text) report(call, () => options.onText?.(text, 1));
    }
    // The SDK ends the iteration quietly when the request is aborted; an aborted response counts as none.
    if (options.signal?.aborted) throw new LlmError(-1, 'request aborted', { type: 'aborted' });
    return assembler.finish(call.requestId);
  }
}
