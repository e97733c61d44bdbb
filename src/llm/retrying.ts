import type { Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { addUsage } from '../domain/types.ts';
import { MAX_TIMER_MS, timerSleeper, type Sleeper } from '../util/sleep.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';
import { settlesQuietly } from './time-limited.ts';
import { withFields } from '../util/with-fields.ts';
import { promised } from '../util/promised.ts';

export type { Sleeper } from '../util/sleep.ts';

export interface RetryPolicy {
  /** Calls to the delegate at most, the first one included. */
  maxAttempts: number;
  /** @unit milliseconds — the ceiling of the first backoff; it doubles per attempt. */
  baseMs: number;
  /**
   * @unit milliseconds — the ceiling never grows past this, and neither does a wait: when the server
   * asks for a longer one, the decorator gives up at once with that error (its `retryAfterMs` says
   * when to ask again), so the caller can park the work instead of a worker sleeping on it.
   */
  capMs: number;
}

/** A number in [0, 1), like Math.random. */
export type RandomSource = () => number;

/**
 * Told before each wait: the error that failed attempt number `attempt` (1-based) and how long the
 * decorator will wait before the next one. `retryReason(error)` gives a low-cardinality metric label.
 */
/** Told of each retry; `call` is the call's options (its `logFields` name the run and step it is for). */
export type RetryListener = (error: LlmError, attempt: number, waitMs: number, call: LlmCallOptions) => void;

export interface RetryingOptions {
  sleeper?: Sleeper;
  random?: RandomSource;
  onRetry?: RetryListener;
  /** The clock the deadline is compared with (milliseconds since the epoch); default Date.now. */
  now?: () => number;
}

/**
 * The wait after failed attempt `attempt` (0-based): full jitter, a uniform draw below
 * min(cap, base·2^attempt), so workers that recover together do not stampede together. The server's
 * retry-after wins when it is longer, because retrying sooner while rate limited prolongs the limit.
 */
export function backoffMs(
  attempt: number,
  policy: Pick<RetryPolicy, 'baseMs' | 'capMs'>,
  random: RandomSource = Math.random,
  retryAfterMs: number | null = null,
): number {
  // The exponent is clamped so a large attempt number cannot overflow to Infinity.
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(Math.max(attempt, 0), 40));
  const draw = Math.min(Math.max(random(), 0), 1);
  const jitter = Math.min(Math.floor(draw * ceiling), ceiling);
  return Math.max(jitter, retryAfterMs ?? 0);
}

/** A metric label for why an attempt is retried: "429", "529", "5xx", "timeout", "network" or the status. */
export function retryReason(error: LlmError): string {
  if (error.status === 429 || error.status === 529) return String(error.status);
  if (error.status >= 500) return '5xx';
  if (error.status === -1) return error.type === 'timeout' ? 'timeout' : 'network';
  return String(error.status);
}

/** Why the decorator stops retrying a retryable error, or null to wait `waitMs` and try again. */
export function giveUpReason(
  attempt: number,
  waitMs: number,
  policy: RetryPolicy,
  deadlineAt: Date | null | undefined,
  now: number,
): 'attempts' | 'wait-too-long' | 'deadline' | null {
  if (attempt >= policy.maxAttempts) return 'attempts';
  if (waitMs > policy.capMs) return 'wait-too-long';
  if (deadlineAt && now + waitMs >= deadlineAt.getTime()) return 'deadline';
  return null;
}

interface HeaderSource {
  get(name: string): string | null | undefined;
}

/**
 * Reads how long the server asked us to wait. `retry-after-ms` is preferred because it is exact;
 * `retry-after` is either seconds or an HTTP date (RFC 9110). Unreadable values count as absent. A
 * wait beyond MAX_TIMER_MS (24.8 days) is taken as that long: no timer and no millisecond column
 * downstream can hold more, and no server means it.
 * @returns milliseconds, or null when the server said nothing usable
 */
export function parseRetryAfterMs(headers: HeaderSource | null | undefined, now: number = Date.now()): number | null {
  const ms = readRetryAfterMs(headers, now);
  return ms === null ? null : Math.min(ms, MAX_TIMER_MS);
}

function readRetryAfterMs(headers: HeaderSource | null | undefined, now: number): number | null {
  if (!headers) return null;
  const ms = headers.get('retry-after-ms');
  if (ms != null && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return Math.ceil(value);
  }
  const after = headers.get('retry-after')?.trim();
  if (!after) return null;
  if (/^\d+(\.\d+)?$/.test(after)) return Math.ceil(Number(after) * 1000);
  const date = Date.parse(after);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** A first attempt's response: nothing failed before it. */
const firstAttempt = (response: LlmResponse): LlmResponse => withFields(response, { attempts: 1 });

/**
 * Retries transient failures of the delegate (see `LlmError.retryable`); everything else, including
 * errors that are not `LlmError`s, passes straight through. Sits outside the per-attempt time limit.
 * It never sleeps longer than the policy's cap nor past the caller's deadline: it gives up instead,
 * with the error at hand. Each attempt's streamed text is tagged with its number, and the caller is
 * told when an attempt failed and another follows (what it streamed is void). Usage reported by
 * failed attempts is summed: on the response as `failedAttemptsUsage`, on an escaping error as `usage`.
 */
export class RetryingLlmClient implements LlmClient {
  private readonly sleeper: Sleeper;
  private readonly random: RandomSource;
  private readonly onRetry: RetryListener | undefined;
  private readonly now: () => number;

  constructor(
    private readonly delegate: LlmClient,
    private readonly policy: RetryPolicy,
    options: RetryingOptions = {},
  ) {
    if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) {
      throw new RangeError(`maxAttempts must be a positive integer, got ${policy.maxAttempts}`);
    }
    this.sleeper = options.sleeper ?? timerSleeper;
    this.random = options.random ?? Math.random;
    this.onRetry = options.onRetry;
    this.now = options.now ?? Date.now;
  }

  get provider(): string {
    return this.delegate.provider;
  }

  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    return this.delegate.checkOptions?.(options) ?? null;
  }

  send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    return this.attempt(request, options, 1, null);
  }

  /**
   * Attempt number `attempt`, then the next if it fails and may be retried. Not an async function: a
   * call waits for its answer nearly all its life, and a suspended frame here would be one per call.
   */
  private attempt(request: LlmRequest, options: LlmCallOptions, attempt: number, failedUsage: Usage | null): Promise<LlmResponse> {
    // The first attempt of a delegate that settles quietly numbers its text 1 and streams none after it
    // settled: it takes the caller's options as they are, with nothing allocated for them.
    if (attempt === 1 && settlesQuietly(this.delegate)) {
      return promised(() => this.delegate.send(request, options)).then(firstAttempt, (error: unknown) =>
        this.failed(error, request, options, 1, null),
      );
    }
    // Text that arrives after its attempt has ended (a late chunk of an abandoned stream) is dropped.
    let current = true;
    const { onText, onThinking } = options;
    const attemptOptions: LlmCallOptions = withFields(options, {
      onText:
        onText &&
        ((text: string) => {
          if (current) onText(text, attempt);
        }),
      onThinking:
        onThinking &&
        ((text: string) => {
          if (current) onThinking(text, attempt);
        }),
    });
    return promised(() => this.delegate.send(request, attemptOptions)).then(
      (response) => {
        current = false;
        const result: LlmResponse = withFields(response, { attempts: attempt });
        if (failedUsage) result.failedAttemptsUsage = failedUsage;
        return result;
      },
      (error: unknown) => {
        current = false;
        return this.failed(error, request, options, attempt, failedUsage);
      },
    );
  }

  /** Attempt `attempt` failed with `error`: the next one after the backoff, or the error, with the usage of every attempt. */
  private async failed(
    error: unknown,
    request: LlmRequest,
    options: LlmCallOptions,
    attempt: number,
    failedUsage: Usage | null,
  ): Promise<LlmResponse> {
    if (!(error instanceof LlmError)) throw error;
    if (error.usage) failedUsage = failedUsage ? addUsage(failedUsage, error.usage) : error.usage;
    const waitMs = backoffMs(attempt - 1, this.policy, this.random, error.retryAfterMs);
    // An abort by the caller surfaces as a network error (-1); it is a decision, not a fault.
    const retry =
      error.retryable && !options.signal?.aborted && giveUpReason(attempt, waitMs, this.policy, options.deadlineAt, this.now()) === null;
    if (!retry) {
      error.usage = failedUsage;
      throw error;
    }
    options.onAttemptFailed?.(attempt, error);
    this.onRetry?.(error, attempt, waitMs, options);
    await this.sleeper.sleep(waitMs, options.signal);
    return this.attempt(request, options, attempt + 1, failedUsage);
  }
}
