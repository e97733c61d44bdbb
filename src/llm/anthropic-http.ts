/**
 * The Messages API over the global fetch (Node's undici): one POST /v1/messages, its answer read as
 * JSON or as the API's event stream. It sends what the official SDK sent for our calls (which stays
 * a dependency for its types and for `toLlmError`) and fails the way the SDK's errors were
 * classified, but costs less per call: no retry and middleware layers, no async iterator per event,
 * each event's JSON parsed once.
 *
 * Every failure is an LlmError (see anthropic-failures.ts) or an error of the HTTP stack or JSON,
 * which the client classifies knowing whether the answer had begun.
 */
import type { LlmError } from '../errors.ts';
import { aborted, connectionFailed, errorBodyFields, fromErrorAnswer, isAbortError, isTimeout, timedOut } from './anthropic-failures.ts';
import { SseReader } from './sse.ts';

/**
 * The API version the official SDK in package.json sends, so the answers' shape is the one the
 * assembler and the wire code were written and tested against. A new version is a deliberate change.
 */
export const ANTHROPIC_VERSION = '2026-10-21';

export const DEFAULT_BASE_URL = 'https://api.anthropic.com';

export interface MessagesEndpointOptions {
  apiKey: string;
  /** Null, absent or empty: DEFAULT_BASE_URL. With or without a trailing slash; a path is kept. */
  baseUrl?: string | null;
  /** @unit milliseconds — how long to wait for an answer's headers (not for its whole body). */
  timeoutMs: number;
}

/** Where and how to send: the URL, the headers and the time limit, worked out once per client. */
export class MessagesEndpoint {
  /** The base URL with the path appended (one slash between), as given. */
  private readonly rawUrl: string;
  /** The URL parsed; null when it is none, and then every call fails as not sent, as with the SDK. */
  private readonly url: string | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;

  constructor(options: MessagesEndpointOptions) {
    const base = options.baseUrl || DEFAULT_BASE_URL;
    this.rawUrl = base + (base.endsWith('/') ? 'v1/messages' : '/v1/messages');
    this.url = URL.canParse(this.rawUrl) ? new URL(this.rawUrl).href : null;
    // What the API reads. The SDK's others (user agent, x-stainless-* platform and retry
    // telemetry) say nothing the API needs. The key only ever goes here: errors never show headers.
    this.headers = Object.freeze({
      accept: 'application/json',
      'content-type': 'application/json',
      authorization: `Bearer ${options.apiKey}`,
      'anthropic-version': ANTHROPIC_VERSION,
    });
    this.timeoutMs = options.timeoutMs;
  }

  /** The URL to POST to; throws the URL parser's own error when the base URL is none. */
  messagesUrl(): string {
    return this.url ?? new URL(this.rawUrl).href;
  }
}

/**
 * One call: the request, then its answer's body. The caller's signal aborts it at any point; the
 * endpoint's time limit only until the answer's headers arrive (a long stream is the decorators'
 * business, not a transport's). `abort` closes an answer the client gives up on, `release` lets go
 * of the caller's signal: a long-lived signal must not collect one listener per call.
 */
export class MessagesExchange {
  private readonly controller = new AbortController();
  private readonly abortListener = (): void => this.controller.abort();

  constructor(
    private readonly endpoint: MessagesEndpoint,
    private readonly signal: AbortSignal | undefined,
  ) {
    signal?.addEventListener('abort', this.abortListener, { once: true });
  }

  /**
   * Sends `body` (JSON) and waits for the answer's headers. Resolves with a 2xx answer, its body
   * unread; an error answer is read and thrown as an LlmError with the API's status and message, as
   * is a request that got no answer (refused, reset, timed out, aborted).
   */
  async post(body: string): Promise<Response> {
    const url = this.endpoint.messagesUrl();
    if (this.signal?.aborted) throw aborted();
    const timer = setTimeout(this.abortListener, this.endpoint.timeoutMs);
    let response: Response;
    try {
      response = await fetch(url, { method: 'POST', headers: this.endpoint.headers, body, signal: this.controller.signal });
    } catch (error) {
      if (this.signal?.aborted) throw aborted();
      // An abort that is not the caller's is the time limit's.
      throw isTimeout(error) ? timedOut() : connectionFailed(error);
    } finally {
      clearTimeout(timer);
    }
    if (!response.ok) throw await errorAnswer(response);
    return response;
  }

  /** Closes the answer, if it is still being sent: the client gave up on it. */
  abort(): void {
    this.controller.abort();
  }

  release(): void {
    this.signal?.removeEventListener('abort', this.abortListener);
  }
}

/** An error answer as an LlmError. A body that is not the API's JSON (or that broke) leaves "HTTP <status>". */
async function errorAnswer(response: Response): Promise<LlmError> {
  const text = await response.text().catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
  return fromErrorAnswer({ status: response.status, ...errorBodyFields(parseJson(text)), headers: response.headers });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The body of a non-streamed 2xx answer: parsed when it says it is JSON (an empty one is undefined),
 * else the text, for the wire code to reject as not a message. JSON that does not parse throws.
 */
export async function readBody(response: Response): Promise<unknown> {
  if (response.status === 204) return null; // fetch has no body to read for a 204
  const mediaType = response.headers.get('content-type')?.split(';')[0]?.trim();
  if (mediaType?.includes('application/json') || mediaType?.endsWith('+json')) {
    if (response.headers.get('content-length') === '0') return undefined;
    return response.json();
  }
  return response.text();
}

/**
 * Reads a streamed 2xx answer to its end and passes each of its events, parsed, to `onEvent`, in
 * order and as they arrive; what `onEvent` throws stops the reading and comes out of here. `ping`
 * and events without a name are skipped; an `error` event throws as the error its type stands for.
 * Data that is not JSON throws JSON's SyntaxError. When the call is aborted it returns quietly,
 * whatever was left unread: the client tells an aborted answer by its signal.
 */
export async function readEvents(response: Response, onEvent: (event: unknown) => void): Promise<void> {
  const body = response.body;
  if (!body) throw new Error('Attempted to iterate over a response with no body');
  const headers = response.headers;
  const sse = new SseReader((event, data) => {
    if (event === null || event === 'ping') return;
    if (event === 'error') throw fromErrorAnswer({ status: undefined, ...errorBodyFields(parseJson(data)), headers });
    if (data === '') return;
    onEvent(JSON.parse(data));
  });
  const reader = body.getReader();
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (error) {
      if (isAbortError(error)) return;
      throw error;
    }
    if (chunk.done) break;
    sse.push(chunk.value);
  }
  sse.end();
}
