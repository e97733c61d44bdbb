import type { Usage } from './types.ts';

/** One hierarchy for everything the runtime throws on purpose. */
export class DurableAgentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A fenced write found that this worker no longer owns the run; it must stop driving it. */
export class LeaseLostError extends DurableAgentError {
  constructor(
    readonly runId: string,
    readonly worker: string,
  ) {
    super(`worker ${worker} no longer holds the lease on run ${runId}`);
  }
}

/**
 * A failure of a model call. `status` is the HTTP status (for an `error` event in the middle of a
 * stream, the status its error type stands for), or -1 when no usable answer came: the network, our
 * timeout, an abort, a reply cut off, a body that is not the API's answer. 0: the request was never sent.
 * Whether it is worth another attempt is decided here, once, for every caller.
 */
/** LlmError.type of a call refused because the conversation does not fit the model's context window. */
export const CONTEXT_WINDOW_EXCEEDED = 'context_window_exceeded';

export class LlmError extends DurableAgentError {
  /**
   * Tokens the provider reported for the failed attempt(s) before failing (a stream reports input
   * tokens at its start): billed, with no result. On the error that escapes the retry decorator, the
   * sum over every failed attempt of the call; null when none reported any.
   */
  usage: Usage | null;

  constructor(
    readonly status: number,
    message: string,
    readonly details: {
      /** Milliseconds the server asked us to wait, from retry-after / retry-after-ms. */
      retryAfterMs?: number | null;
      /** The API's error type, e.g. "rate_limit_error", "overloaded_error". */
      type?: string | null;
      requestId?: string | null;
      /** The server's own verdict (`x-should-retry: true|false`); it overrides the status rule. */
      shouldRetry?: boolean | null;
      usage?: Usage | null;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: details.cause });
    this.usage = details.usage ?? null;
  }

  get retryAfterMs(): number | null {
    return this.details.retryAfterMs ?? null;
  }
  get type(): string | null {
    return this.details.type ?? null;
  }
  get requestId(): string | null {
    return this.details.requestId ?? null;
  }

  get retryable(): boolean {
    return this.details.shouldRetry ?? isRetryableStatus(this.status);
  }
}

/**
 * The official SDKs' rule: -1 is the network or our timeout, 408 a request timeout, 409 a lock
 * timeout, 429 back-pressure, 5xx (529 overloaded included) the server's trouble. Every other status
 * is the request's fault and fails the same way again.
 */
export function isRetryableStatus(status: number): boolean {
  return status === -1 || status === 408 || status === 409 || status === 429 || status >= 500;
}

/** A tool failed in an ordinary way; the model sees the message as an `is_error` result. */
export class ToolError extends DurableAgentError {}

/**
 * Thrown to abort the current attempt at driving a run without recording anything, as a crash would:
 * the lease stays held until it lapses and another worker resumes from the last checkpoint.
 * Tests use subclasses of it to simulate a worker dying at an exact point.
 */
export class FatalError extends DurableAgentError {}

/** The steps of a run cannot be folded into a conversation (a tool result for a call never made). */
export class InconsistentLogError extends DurableAgentError {}

/**
 * A run's workspace cannot be rebuilt as its manifest says (a saved content missing or altered, a
 * path the rebuild refuses): the run ends FAILED with the cause rather than let the model work on
 * half a tree.
 */
export class WorkspaceMismatchError extends DurableAgentError {}

/** Bad input from a user: an HTTP 400 or a CLI exit code, never a stack trace. */
export class InputError extends DurableAgentError {
  constructor(
    message: string,
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super(message);
  }
}

export class NotFoundError extends DurableAgentError {}

/** A request without a valid credential: a missing, unknown or revoked API key (HTTP 401). */
export class UnauthorizedError extends DurableAgentError {
  constructor(
    message: string,
    readonly reason: 'missing' | 'invalid',
  ) {
    super(message);
  }
}

/** The request conflicts with the current state, e.g. cancelling a finished run. */
export class ConflictError extends DurableAgentError {}

/** `rt.runs.wait` gave up: the run did not finish within `timeoutMs`. The run itself goes on. */
export class WaitTimeoutError extends DurableAgentError {
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
  ) {
    super(`run ${runId} did not finish within ${timeoutMs} ms`);
  }
}

/** Configuration that cannot work; the process says so in one line and exits. */
export class ConfigError extends DurableAgentError {}

/**
 * A stored value sealed with a key this process lacks, one that fails to open (altered), or a
 * database whose encrypted values this process could not read (no ENCRYPTION_KEY, or not its keys).
 */
export class EncryptionError extends DurableAgentError {}

/**
 * A database write that fails the same way however often it is tried (a value the database cannot
 * store, a broken constraint): the run ends FAILED with this message instead of being retried.
 */
export class PermanentDatabaseError extends DurableAgentError {
  constructor(
    message: string,
    readonly sqlState: string | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A tool step was to be finished, but its STARTED row is not there (already finished, or never started). */
export class StepNotStartedError extends DurableAgentError {
  constructor(
    readonly runId: string,
    readonly toolUseId: string,
    readonly status: string | null,
  ) {
    super(`tool step ${toolUseId} of run ${runId} is not STARTED (${status === null ? 'no such step' : `it is ${status}`})`);
  }
}

/**
 * The database stayed unreachable through a built-in tool's retries. It ends the attempt (a database
 * outage says nothing to the model): the cause is recorded, the run goes back to the queue without the
 * attempt counting against it, and the tool call, still STARTED, runs again with the same idempotency
 * key when the run resumes.
 */
export class DatabaseUnavailableError extends DurableAgentError {}
