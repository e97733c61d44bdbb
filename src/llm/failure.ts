/** What every provider's error classification shares: the call's context and how a cause is told. */
import type { Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';

/** What is known about the call when it failed. */
export interface FailureContext {
  /** The API key, cut out of every message (a proxy or a misconfigured gateway may echo it). */
  apiKey?: string;
  /** The response's headers had arrived: whatever fails now was sent, and may have been billed. */
  responded?: boolean;
  requestId?: string | null;
  /** What the response had reported before it failed. */
  usage?: Usage | null;
}

/** A function that cuts `apiKey` out of a text (the identity when there is no key). */
export function redactor(apiKey: string | undefined): (text: string) => string {
  return (text) => (apiKey ? text.split(apiKey).join('[redacted]') : text);
}

/** "fetch failed" or "terminated" alone says little; the system error underneath names the real problem. */
export function describeCause(cause: Error): string {
  const inner = (cause as { cause?: unknown }).cause;
  if (inner instanceof Error) {
    const code = (inner as { code?: unknown }).code;
    return typeof code === 'string' ? `${cause.message} (${code})` : `${cause.message} (${inner.message})`;
  }
  return cause.message;
}

/** Ours, raised while reading the response (an error body, a stream that ended early): the key cut out, the usage so far kept. */
export function ownFailure(error: LlmError, context: FailureContext): LlmError {
  error.message = redactor(context.apiKey)(error.message);
  if (error.usage === null) error.usage = context.usage ?? null;
  return error;
}

/**
 * A failure that is neither a response of the API nor the caller's: after the response's headers, the
 * request was sent and the response broke (the connection closed mid-body, a body that is not JSON),
 * which the next attempt may well not repeat; before, it was never sent (a bad option, a bad URL),
 * which no retry can fix.
 */
export function brokenOrUnsent(error: unknown, context: FailureContext): LlmError {
  const redact = redactor(context.apiKey);
  const detail = error instanceof Error ? describeCause(error) : String(error);
  if (context.responded) {
    return new LlmError(-1, redact(`the answer was cut off or unreadable: ${detail}`), {
      type: 'incomplete_response',
      requestId: context.requestId ?? null,
      cause: error,
      usage: context.usage ?? null,
    });
  }
  return new LlmError(0, redact(`request not sent: ${detail}`), { type: 'client_error', cause: error });
}

/** What one call has learnt so far, for classifying its failure. */
export interface Call {
  responded: boolean;
  requestId: string | null;
  usage: Usage | null;
  callbackError: unknown;
}

/** Runs a caller's callback (onText, onUsage); an error it throws is the caller's, remembered as such. */
export function report(call: Call, callback: () => void): void {
  try {
    callback();
  } catch (error) {
    call.callbackError = error;
    throw error;
  }
}
