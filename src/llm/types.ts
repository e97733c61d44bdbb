import type { CallOptions, ContentBlock, Message, ModelOptions, Usage } from '../domain/types.ts';

export type { CallOptions, ModelOptions, ThinkingOption, ToolChoice } from '../domain/types.ts';
import type { LlmError } from '../domain/errors.ts';

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
  /** Sampling, thinking and tool choice for this call; absent or empty: the provider's defaults. */
  options?: CallOptions;
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
  /**
   * What was wrong in the provider's answer and was repaired to keep it storable (usage counts out of
   * range, missing content …), one sentence each, for the caller to log; absent = nothing.
   */
  warnings?: string[];
}

export interface LlmCallOptions {
  /** Aborts the call (the HTTP request, not only the wait for it). */
  signal?: AbortSignal;
  /** The run's deadline: the retry decorator never waits past it; it gives up with the last error instead. */
  deadlineAt?: Date | null;
  /** Model text as it streams; `attempt` numbers the tries of this call (1, 2, …) across its retries. */
  onText?: (text: string, attempt: number) => void;
  /** Thinking text as it streams (extended thinking), numbered by attempt as `onText`. */
  onThinking?: (text: string, attempt: number) => void;
  /** Attempt `attempt` failed and will be retried: the text it streamed is void. */
  onAttemptFailed?: (attempt: number, error: LlmError) => void;
  /**
   * The usage the provider has reported so far in this attempt (a stream reports input tokens at its
   * start, output tokens as it goes), so a decorator that abandons the attempt can still count it.
   */
  onUsage?: (usage: Usage) => void;
  /** Fields for the lines logged about this call (the run, worker and step it is for). */
  logFields?: Readonly<Record<string, unknown>>;
}

/**
 * One model call. Providers implement it; decorators (retrying, time-limited) take one and return one.
 * Failures are `LlmError`s.
 */
export interface LlmClient {
  /** The provider's name as it shows in traces and the startup banner, e.g. "anthropic" or "demo". */
  readonly provider: string;
  /**
   * The model to call when neither the run nor its agent names one (a client made for one agent,
   * e.g. against a self-hosted server); absent or null: the runtime's DEFAULT_MODEL.
   */
  readonly defaultModel?: string | null;
  send(request: LlmRequest, options?: LlmCallOptions): Promise<LlmResponse>;
  /**
   * The first of `options` this provider refuses or has no equivalent for (e.g. topK on the Chat
   * Completions API), named by field; null: it takes them. Asked when an agent starts and when a run
   * is created, so a run that could never make a call is refused then. Absent: it takes them all.
   */
  checkOptions?(options: ModelOptions): { path: string; message: string } | null;
}
