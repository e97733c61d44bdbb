import { LlmError } from '../errors.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from './types.ts';

/**
 * Limits one attempt of the delegate. It sits inside the retry loop, so a hung connection costs one
 * attempt rather than the whole step. When time is up the delegate's signal is aborted (so the HTTP
 * request is really cancelled, not just abandoned) and the attempt fails as LlmError(-1, "step timeout"),
 * which the retry decorator treats as transient.
 */
export class TimeLimitedLlmClient implements LlmClient {
  /** @param limitMs milliseconds one attempt may take */
  constructor(
    private readonly delegate: LlmClient,
    private readonly limitMs: number,
  ) {
    if (!(limitMs > 0)) throw new RangeError(`limitMs must be positive, got ${limitMs}`);
  }

  get provider(): string {
    return this.delegate.provider;
  }

  send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    const caller = options.signal;
    const controller = new AbortController();
    return new Promise<LlmResponse>((resolve, reject) => {
      const forwardAbort = () => controller.abort(caller?.reason);
      const cleanup = () => {
        clearTimeout(timer);
        caller?.removeEventListener('abort', forwardAbort);
      };
      const timer = setTimeout(() => {
        cleanup();
        const timeout = new LlmError(-1, 'step timeout', { type: 'timeout' });
        controller.abort(timeout);
        // Settle now rather than when the delegate reacts: a delegate that ignores its signal must
        // not be able to stretch the limit. Its late outcome is dropped by the settled promise.
        reject(timeout);
      }, this.limitMs);
      if (caller?.aborted) forwardAbort();
      else caller?.addEventListener('abort', forwardAbort, { once: true });

      // A caller's abort reaches here as the delegate's own error and is passed on unchanged:
      // giving up is the caller's decision, not a timeout.
      this.call(request, { ...options, signal: controller.signal }).then(
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

  /** Turns a synchronous throw of the delegate into a rejection, so the timer is always cleared. */
  private async call(request: LlmRequest, options: LlmCallOptions): Promise<LlmResponse> {
    return this.delegate.send(request, options);
  }
}
