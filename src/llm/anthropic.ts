import Anthropic, { APIConnectionTimeoutError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import { LlmError } from '../errors.ts';
import { toLlmResponse, toMessageParams } from './anthropic-wire.ts';
import { parseRetryAfterMs } from './retrying.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from './types.ts';

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
}

const DEFAULT_BASE_URL = 'https://api.anthropic.com';

/** The Anthropic Messages API through the official SDK. One call, no retries: those are the decorator's. */
export class AnthropicClient implements LlmClient {
  readonly provider = 'anthropic';
  private readonly sdk: Anthropic;
  private readonly apiKey: string;

  constructor(options: AnthropicClientOptions) {
    this.apiKey = options.apiKey;
    this.sdk = new Anthropic({
      apiKey: options.apiKey,
      // Always explicit, so the SDK reads no environment variable behind config's back.
      baseURL: options.baseUrl ?? DEFAULT_BASE_URL,
      maxRetries: 0,
      timeout: options.timeoutMs ?? 10 * 60 * 1000,
    });
  }

  async send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    try {
      const { data, request_id } = await this.sdk.messages
        .create(toMessageParams(request), { signal: options.signal })
        .withResponse();
      return toLlmResponse(data, request_id ?? null);
    } catch (error) {
      throw toLlmError(error, this.apiKey);
    }
  }
}

/**
 * Every failure of a call as one LlmError. The status is the HTTP status; -1 means no HTTP answer
 * (connection refused or reset, the SDK's timeout, an abort) and is retryable; 0 means the SDK refused
 * the request before sending it, which no retry can fix. The message is the API's own; headers and
 * the SDK's error object are left out so no credential can leak into logs or stored steps.
 */
export function toLlmError(error: unknown, apiKey = ''): LlmError {
  if (error instanceof LlmError) return error;
  const redact = (text: string) => (apiKey ? text.split(apiKey).join('[redacted]') : text);
  if (error instanceof APIUserAbortError) {
    return new LlmError(-1, 'request aborted', { type: 'aborted' });
  }
  if (error instanceof APIConnectionTimeoutError) {
    return new LlmError(-1, 'request timed out', { type: 'timeout' });
  }
  if (error instanceof APIError && typeof error.status === 'number') {
    return new LlmError(error.status, redact(error.apiMessage ?? `HTTP ${error.status}`), {
      type: error.type ?? null,
      requestId: error.requestID ?? null,
      retryAfterMs: parseRetryAfterMs(error.headers),
    });
  }
  if (error instanceof APIError) {
    // A connection error: the useful part is the cause (ECONNREFUSED, socket hang up …).
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error ? `: ${describeCause(cause)}` : '';
    return new LlmError(-1, redact(`connection error${detail}`), { type: 'connection_error', cause });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new LlmError(0, redact(`request not sent: ${message}`), { type: 'client_error', cause: error });
}

/** "fetch failed" alone says nothing; the system error underneath names the real problem. */
function describeCause(cause: Error): string {
  const inner = (cause as { cause?: unknown }).cause;
  if (inner instanceof Error) {
    const code = (inner as { code?: unknown }).code;
    return typeof code === 'string' ? `${cause.message} (${code})` : `${cause.message} (${inner.message})`;
  }
  return cause.message;
}
