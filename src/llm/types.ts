import type { ContentBlock, Message, Usage } from '../domain.ts';

/** A tool as the model sees it (the Messages API's `tools` entry). */
export interface ToolDefinition {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface LlmRequest {
  model: string;
  maxTokens: number;
  system: string | null;
  messages: readonly Message[];
  tools: readonly ToolDefinition[];
}

export interface LlmResponse {
  /** The provider's id of the response (msg_…), when it has one. */
  id: string | null;
  model: string;
  content: ContentBlock[];
  stopReason: string;
  usage: Usage;
  /** The provider's request id (`request-id` header), for support tickets and logs. */
  requestId: string | null;
  /** Calls it took to get this response, retries included. */
  attempts: number;
  /** Usage the provider reported for failed attempts of this call (billed, no result); absent = none. */
  failedAttemptsUsage?: Usage;
}

export interface LlmCallOptions {
  /** Aborts the call (the HTTP request, not only the wait for it). */
  signal?: AbortSignal;
  /** The run's deadline: the retry decorator never waits past it; it gives up with the last error instead. */
  deadlineAt?: Date | null;
}

/**
 * One model call. Providers implement it; decorators (retrying, time-limited) take one and return one.
 * Failures are `LlmError`s.
 */
export interface LlmClient {
  /** The provider's name as it shows in traces and the startup banner, e.g. "anthropic" or "demo". */
  readonly provider: string;
  send(request: LlmRequest, options?: LlmCallOptions): Promise<LlmResponse>;
}
