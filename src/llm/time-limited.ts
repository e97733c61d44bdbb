import type { Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { MAX_TIMER_MS } from '../util/sleep.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';
import { withFields } from '../util/with-fields.ts';

/** What an attempt that ran out of time fails with: transient, with the usage reported before (billed, no result). */
export function stepTimeout(usage: Usage | null): LlmError {
  return new LlmError(-1, 'step timeout', { type: 'timeout', usage });
}

/**
 * A client that keeps the time limit of an attempt itself, on the timer its transport has anyway, so
 * that the decorator adds nothing to a call: no AbortController, listener, timer and callbacks of its
 * own per attempt, which with thousands of calls in flight are megabytes held and tens of megabytes
 * a minute promoted. `sendWithin` does all the decorator promises: at `limitMs` the request is really
 * cancelled and the call settles at once as `stepTimeout(usage so far)`; nothing streamed after the
 * call settled, however it settled, is passed on; the caller's abort is its own error, not a timeout.
 */
export interface KeepsItsOwnTimeLimit {
  sendWithin(request: LlmRequest, options: LlmCallOptions, limitMs: number): Promise<LlmResponse>;
}

/**
 * A client that calls none of a call's callbacks once the call has settled, however it settled:
 * TimeLimitedLlmClient, whatever its delegate. The retry decorator hands it the caller's options as
 * they are on a first attempt (the attempt is numbered 1 anyway), rather than wrappers that drop what
 * an ended attempt streams late: with thousands of calls in flight, a copy of the options, two
 * closures and their context per call.
 */
export interface SettlesQuietly {
  readonly settlesQuietly: true;
}

export function settlesQuietly(client: LlmClient): client is LlmClient & SettlesQuietly {
  return (client as Partial<SettlesQuietly>).settlesQuietly === true;
}

function keepsItsOwnTimeLimit(client: LlmClient): client is LlmClient & KeepsItsOwnTimeLimit {
  return typeof (client as Partial<KeepsItsOwnTimeLimit>).sendWithin === 'function';
}

/**
 * Limits one attempt of the delegate. It sits inside the retry loop, so a hung connection costs one
 * attempt rather than the whole step. When time is up the delegate's signal is aborted (so the HTTP
 * request is really cancelled, not just abandoned) and the attempt fails as LlmError(-1, "step timeout"),
 * which the retry decorator treats as transient. The timeout carries the usage the delegate reported
 * before it (a stream that was cut short was still billed for its input), and nothing the delegate
 * streams after the attempt ended is passed on. A delegate that keeps the limit itself
 * (KeepsItsOwnTimeLimit) is handed it instead.
 */
export class TimeLimitedLlmClient implements LlmClient, SettlesQuietly {
  readonly settlesQuietly = true;
  private readonly limitMs: number;

  /** @param limitMs milliseconds one attempt may take (at most MAX_TIMER_MS, which is 24.8 days) */
  constructor(
    private readonly delegate: LlmClient,
    limitMs: number,
  ) {
    if (!(limitMs > 0)) throw new RangeError(`limitMs must be positive, got ${limitMs}`);
    this.limitMs = Math.min(limitMs, MAX_TIMER_MS);
  }

  get provider(): string {
    return this.delegate.provider;
  }

  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    return this.delegate.checkOptions?.(options) ?? null;
  }

  send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    if (keepsItsOwnTimeLimit(this.delegate)) return this.delegate.sendWithin(request, options, this.limitMs);
    const caller = options.signal;
    const controller = new AbortController();
    let settled = false;
    let usage: Usage | null = null;
    return new Promise<LlmResponse>((resolve, reject) => {
      const forwardAbort = () => controller.abort(caller?.reason);
      const cleanup = () => {
        settled = true;
        clearTimeout(timer);
        caller?.removeEventListener('abort', forwardAbort);
      };
      const timer = setTimeout(() => {
        cleanup();
        const timeout = stepTimeout(usage);
        controller.abort(timeout);
        // Settle now rather than when the delegate reacts: a delegate that ignores its signal must
        // not be able to stretch the limit. Its late outcome is dropped by the settled promise.
        reject(timeout);
      }, this.limitMs);
      if (caller?.aborted) forwardAbort();
      else caller?.addEventListener('abort', forwardAbort, { once: true });

      const { onText, onThinking, onUsage } = options;
      const delegateOptions: LlmCallOptions = withFields(options, {
        signal: controller.signal,
        onText:
          onText &&
          ((text: string, attempt: number) => {
            if (!settled) onText(text, attempt);
          }),
        onThinking:
          onThinking &&
          ((text: string, attempt: number) => {
            if (!settled) onThinking(text, attempt);
          }),
        onUsage: (reported: Usage) => {
          if (settled) return;
          usage = reported;
          onUsage?.(reported);
        },
      });
      // A caller's abort reaches here as the delegate's own error and is passed on unchanged:
      // giving up is the caller's decision, not a timeout. A synchronous throw of the delegate is
      // taken as its rejection, so the timer is always cleared (not an async wrapper: a suspended
      // frame more per call in flight, thousands of them with thousands of runs).
      let delegated: Promise<LlmResponse>;
      try {
        delegated = this.delegate.send(request, delegateOptions);
      } catch (error) {
        delegated = Promise.reject(error);
      }
      delegated.then(
        (response) => {
          cleanup();
          resolve(response);
        },
        (error: unknown) => {
          cleanup();
          reject(error);
        },
      );
    });
  }
}
