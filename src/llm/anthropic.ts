import Anthropic from '@anthropic-ai/sdk';
import { LlmError } from '../errors.ts';
import { toLlmError } from './anthropic-errors.ts';
import { StreamAssembler } from './anthropic-stream.ts';
import { toLlmResponse, toMessageParams } from './anthropic-wire.ts';
import { MAX_TIMER_MS } from './sleep.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from './types.ts';
import { type Call, report } from './failure.ts';

export { toLlmError } from './anthropic-errors.ts';

export interface AnthropicClientOptions {
  apiKey: string;
  /** The API's endpoint; null or absent means the SDK's default (https://api.anthropic.com). */
  baseUrl?: string | null;
  /**
   * @unit milliseconds — the SDK's own limit for one HTTP request, a backstop only: the time-limited
   * decorator aborts sooner. Passing it also stops the SDK from refusing large max_tokens without
   * streaming. Default 10 minutes.
   */
  timeoutMs?: number;
  /** Ask for the answer as a stream of events (`stream: true`) and report its text as it comes. Default true. */
  streaming?: boolean;
}

const DEFAULT_BASE_URL = 'https://api.anthropic.com';

/** The Anthropic Messages API through the official SDK. One call, no retries: those are the decorator's. */
export class AnthropicClient implements LlmClient {
  readonly provider = 'anthropic';
  private readonly sdk: Anthropic;
  private readonly apiKey: string;
  private readonly streaming: boolean;

  constructor(options: AnthropicClientOptions) {
    this.apiKey = options.apiKey;
    this.streaming = options.streaming ?? true;
    this.sdk = new Anthropic({
      apiKey: options.apiKey,
      // Always explicit, so the SDK reads no environment variable behind config's back.
      baseURL: options.baseUrl ?? DEFAULT_BASE_URL,
      maxRetries: 0,
      timeout: Math.min(options.timeoutMs ?? 10 * 60 * 1000, MAX_TIMER_MS),
    });
  }

  async send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    const call: Call = { answered: false, requestId: null, usage: null, callbackError: undefined };
    try {
      return this.streaming ? await this.stream(request, options, call) : await this.create(request, options, call);
    } catch (error) {
      // The caller's own callback failed: not the provider's fault, so not classified as one.
      if (call.callbackError !== undefined && error === call.callbackError) throw error;
      throw toLlmError(error, { apiKey: this.apiKey, ...call });
    }
  }

  private async create(request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const pending = this.sdk.messages.create(toMessageParams(request), { signal: options.signal });
    const response = await pending.asResponse();
    call.answered = true;
    call.requestId = response.headers.get('request-id');
    // An HTML page or an empty body comes back as a string or undefined, not a message.
    return toLlmResponse((await pending) as unknown, call.requestId, request.model);
  }

  private async stream(request: LlmRequest, options: LlmCallOptions, call: Call): Promise<LlmResponse> {
    const { data: events, request_id } = await this.sdk.messages
      .create({ ...toMessageParams(request), stream: true }, { signal: options.signal })
      .withResponse();
    call.answered = true;
    call.requestId = request_id ?? null;
    const assembler = new StreamAssembler(request.model);
    for await (const event of events) {
      const text = assembler.add(event);
      if (event.type === 'message_start' || event.type === 'message_delta') {
        call.usage = assembler.usage();
        if (call.usage) report(call, () => options.onUsage?.(call.usage!));
      }
      if (text) report(call, () => options.onText?.(text, 1));
    }
    // The SDK ends the iteration quietly when the request is aborted; an aborted answer is no answer.
    if (options.signal?.aborted) throw new LlmError(-1, 'request aborted', { type: 'aborted' });
    return assembler.finish(call.requestId);
  }
}

