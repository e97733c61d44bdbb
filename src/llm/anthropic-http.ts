/**
 * The Messages API over `node:http` / `node:https`: one POST /v1/messages on a kept-alive connection
 * (http-pool.ts), its response read as JSON or as the API's event stream. It sends what the official
 * SDK sent for our calls (which stays a dependency for its types) and fails the way the SDK's errors
 * were classified, but costs less per call: no retry and middleware layers, no web streams, no
 * AbortController, each event's JSON parsed once.
 *
 * Every failure is an LlmError (see anthropic-failures.ts) or an error of the HTTP stack or JSON,
 * which the client classifies knowing whether the response had begun.
 */
import http, { type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import https from 'node:https';
import { urlToHttpOptions } from 'node:url';
import { ConfigError, type LlmError } from '../domain/errors.ts';
import { aborted, connectionFailed, errorBodyFields, fromErrorResponse, isTimeout, proxyRefused, timedOut } from './anthropic-failures.ts';
import { discard, forEachChunk, headerSource, readText } from './http-response.ts';
import { stepTimeout } from './time-limited.ts';
import { isStaleConnection, keepAliveAgent, ProxyRefusal } from './http-pool.ts';
import { SseReader } from './sse.ts';
import { flattenInPlace } from '../util/flat-string.ts';
import { promised } from '../util/promised.ts';
import { DeadlineList } from '../util/deadline-list.ts';

/**
 * The API version the official SDK in package.json sends, so the responses' shape is the one the
 * assembler and the wire code were written and tested against. A new version is a deliberate change.
 */
export const ANTHROPIC_VERSION = '2026-10-21';

export const DEFAULT_BASE_URL = 'https://api.anthropic.com';

/**
 * The headers the transport sets itself, which a caller's `headers` may not: the key (and the SDK's
 * other way of sending it), the API version, the body's framing and the connection's.
 */
export const OWN_HEADERS: readonly string[] = [
  'host',
  'accept',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'authorization',
  'x-api-key',
  'anthropic-version',
];

export interface MessagesEndpointOptions {
  apiKey: string;
  /** Null, absent or empty: DEFAULT_BASE_URL. With or without a trailing slash; a path is kept. */
  baseUrl?: string | null;
  /** @unit milliseconds — how long to wait for a response's headers (not for its whole body). */
  timeoutMs: number;
  /** More headers for every request; none of OWN_HEADERS, nor `anthropic-beta` with `betas`. */
  headers?: Readonly<Record<string, string>>;
  /** Beta features, sent as one `anthropic-beta` header, comma-separated. */
  betas?: readonly string[];
}

/**
 * Where and how to send: the request's options (URL parts, headers, connection pool) and the time
 * limit, worked out once per client and shared by its calls.
 */
export class MessagesEndpoint {
  /** The base URL with the path appended (one slash between), as given. */
  private readonly rawUrl: string;
  /** Null when the URL is none or not http(s): then every call fails as not sent. */
  private readonly options: RequestOptions | null;
  /** The request's headers as name, value pairs, Host included; a call adds its body's length. */
  private readonly headers: readonly string[] = [];
  private readonly send: typeof http.request;
  readonly timeoutMs: number;
  /** The attempts' time limits in flight, by length (one length per time-limited decorator: one, as a rule). */
  private readonly limits = new Map<number, DeadlineList<MessagesExchange>>();

  constructor(options: MessagesEndpointOptions) {
    const base = options.baseUrl || DEFAULT_BASE_URL;
    this.rawUrl = base + (base.endsWith('/') ? 'v1/messages' : '/v1/messages');
    const url = URL.canParse(this.rawUrl) ? new URL(this.rawUrl) : null;
    // Checked first: a mistake in the caller's own options is theirs to see whatever the URL.
    const extra = extraHeaders(options.headers, options.betas);
    const agent = url && keepAliveAgent(url);
    this.send = url?.protocol === 'https:' ? https.request : http.request;
    this.timeoutMs = options.timeoutMs;
    if (!url || !agent) {
      this.options = null;
      return;
    }
    // urlToHttpOptions takes an IPv6 host out of its brackets; the fragment is not sent.
    const { protocol, hostname, port, path } = urlToHttpOptions(url);
    this.options = { protocol, hostname, port, path, agent, method: 'POST' };
    // Given as a list, the headers are written out as the request is made, as they are: Node keeps no
    // header table per request (a dictionary-mode object, and a [name, value] array per header, which
    // live as long as the call: with thousands of calls in flight, megabytes), and adds no Host of its
    // own, so it is here (URL.host: brackets kept, the protocol's default port left out, as Node does).
    // What the API reads; the SDK's others (user agent, x-stainless-* platform and retry telemetry) say
    // nothing the API needs. The key only ever goes here: errors never show headers. No
    // accept-encoding: the responses are small, and inflating them would cost CPU on every call.
    // The caller's own headers and betas follow ours.
    this.headers = Object.freeze([
      'host',
      url.host,
      'accept',
      'application/json',
      'content-type',
      'application/json',
      'authorization',
      `Bearer ${options.apiKey}`,
      'anthropic-version',
      ANTHROPIC_VERSION,
      ...extra,
    ]);
  }

  /** Throws when the base URL is unusable: the URL parser's own error, or the protocol's. */
  check(): void {
    if (this.options) return;
    const url = new URL(this.rawUrl);
    throw new TypeError(`unsupported protocol ${url.protocol} (only http: and https:)`);
  }

  /** What to send a body of `length` bytes with; only after `check` passed. */
  requestOptions(length: number): RequestOptions {
    return { ...this.options!, headers: [...this.headers, 'content-length', String(length)] };
  }

  /** Where the exchanges with a time limit of `ms` keep it. */
  deadlines(ms: number): DeadlineList<MessagesExchange> {
    let list = this.limits.get(ms);
    if (!list) this.limits.set(ms, (list = new DeadlineList(ms, MessagesExchange.runOut)));
    return list;
  }

  /** Opens a request for a body of `length` bytes on a pooled connection; nothing is sent before its `end`. */
  open(length: number): ClientRequest {
    const request = this.send(this.requestOptions(length));
    flattenHead(request);
    return request;
  }
}

/**
 * The caller's headers and betas as name, value pairs (names in lower case), checked before anything is
 * sent: a ConfigError names the header that cannot be sent and why, never a value (a gateway's token
 * is one). Names are compared without case, as HTTP does.
 */
export function extraHeaders(headers: Readonly<Record<string, string>> | undefined, betas: readonly string[] | undefined): string[] {
  const list: string[] = [];
  if (betas !== undefined && !Array.isArray(betas)) throw new ConfigError('betas must be a list of beta names');
  const betaList = betas ?? [];
  for (const beta of betaList) {
    // A name is one item of the comma-separated header: no commas, no blanks, nothing a header cannot carry.
    if (typeof beta !== 'string' || !/^[\x21-\x2b\x2d-\x7e]+$/.test(beta)) {
      throw new ConfigError(`betas: each must be a beta's name, such as "context-1m-2025-08-07" (got ${describeBeta(beta)})`);
    }
  }
  if (headers !== undefined) {
    if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
      throw new ConfigError('headers must be an object of header names and string values');
    }
    const seen = new Set<string>();
    for (const name of Object.keys(headers)) {
      const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
      const lower = name.toLowerCase();
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new ConfigError(`headers: ${shown} is not a header name`);
      if (OWN_HEADERS.includes(lower)) throw new ConfigError(`headers: ${shown} is set by the client itself and cannot be given`);
      if (lower === 'anthropic-beta' && betaList.length > 0) {
        throw new ConfigError(`headers: ${shown} cannot be given with betas: name every beta in betas`);
      }
      if (seen.has(lower)) throw new ConfigError(`headers: ${shown} is given twice (names do not differ by case)`);
      seen.add(lower);
      const value: unknown = headers[name];
      // Tab and the visible characters (and non-ASCII ones), as Node's own check: no line breaks, no NUL.
      if (typeof value !== 'string' || !/^[\t\x20-\x7e\x80-\xff]*$/.test(value)) {
        throw new ConfigError(`headers: the value of ${shown} must be a string of characters a header can carry (no line breaks)`);
      }
      list.push(lower, value);
    }
  }
  if (betaList.length > 0) list.push('anthropic-beta', betaList.join(','));
  return list;
}

/** A beta that is not a name, for the error: its kind, or the string when it is short (a name is no secret). */
function describeBeta(beta: unknown): string {
  if (typeof beta !== 'string') return beta === null ? 'null' : typeof beta;
  return beta.length <= 64 ? JSON.stringify(beta) : 'a long string';
}

/**
 * Given the headers as a list, Node builds the request's head as the request is made, one
 * concatenation per header line, and keeps it for the request's life: a rope of ~30 string pieces
 * (sending it joins a copy with the body, the rope stays) where one flat string does: ~1 KB less per
 * call in flight, megabytes with thousands in flight. Only read: a Node that keeps the head elsewhere
 * is left as it is.
 */
export function flattenHead(request: ClientRequest): void {
  const head: unknown = (request as { _header?: unknown })._header;
  if (typeof head === 'string') flattenInPlace(head);
}

/** The error a call's request or response is destroyed with when it is aborted: an AbortError, as fetch's. */
function abortError(): DOMException {
  return new DOMException('This operation was aborted', 'AbortError');
}

/**
 * One call: the request, then its response's body. The caller's signal aborts it at any point; the
 * endpoint's time limit only until the response's headers arrive. An attempt's limit (`limitMs`, the
 * time-limited decorator's, see KeepsItsOwnTimeLimit) runs from the exchange's making to its release
 * and cuts the call off wherever it is, its headers or its body. `abort` closes a response the client
 * gives up on, `release` lets go of the caller's signal and the limit: a long-lived signal must not
 * collect one listener per call.
 *
 * The exchange is itself the signal's listener (`handleEvent`) and its headers timer's argument, and
 * its attempt's limit is an entry in the endpoint's DeadlineList, not a timer of its own.
 */
export class MessagesExchange {
  /** The request being sent (after a retry on a stale connection, the latest). */
  private request: ClientRequest | null = null;
  /** The response, once its headers arrived. */
  private response: IncomingMessage | null = null;
  /** Set by the endpoint's limit on the wait for headers; read when the request fails. */
  private expired = false;
  /** The endpoint's limit on the wait for headers, armed by `post` until they arrive or the request fails. */
  private headersLimit: NodeJS.Timeout | undefined = undefined;
  /** Where the attempt's limit is kept until `release` (the endpoint's, for its length); null when the exchange keeps none. */
  private readonly limit: DeadlineList<MessagesExchange> | null;
  /** The attempt's limit ran out: whatever came of the call counts as none. */
  private outOfTime = false;

  /** The endpoint's time limit ran out while the request waited for its response's headers. A function, not a closure per call. */
  private static expire(exchange: MessagesExchange): void {
    exchange.expired = true;
    exchange.request?.destroy();
  }

  /** The attempt's limit ran out: the call is cut off where it is. */
  static runOut(exchange: MessagesExchange): void {
    exchange.outOfTime = true;
    exchange.abort();
  }

  /** @param limitMs the attempt's limit (at most MAX_TIMER_MS); null: none but the endpoint's on the headers */
  constructor(
    private readonly endpoint: MessagesEndpoint,
    private readonly signal: AbortSignal | undefined,
    private readonly limitMs: number | null = null,
  ) {
    signal?.addEventListener('abort', this, { once: true });
    this.limit = limitMs === null ? null : endpoint.deadlines(limitMs);
    this.limit?.add(this);
  }

  /** The caller's signal was aborted. */
  handleEvent(): void {
    this.abort();
  }

  /**
   * What a call that was cut off fails with, its response counting as none: the caller's abort (the
   * caller's decision, passed on as it is) or the attempt's limit; null when it was not cut off.
   */
  cut(): LlmError | null {
    if (this.signal?.aborted) return aborted();
    return this.outOfTime ? stepTimeout(null) : null;
  }

  /**
   * Sends the JSON `body` returns and waits for the response's headers. Resolves with a 2xx response, its
   * body unread; an error response is read and thrown as an LlmError with the API's status and message,
   * as is a request that got no response (refused, reset, timed out, aborted).
   *
   * `body` is called for each send (again only when a stale connection makes one resend): the text is
   * made as it goes out and not kept while the response is awaited, which is most of a call's life. It is
   * the whole conversation, kilobytes a call, while what `body` needs to make it again (the request)
   * is the conversation's objects, which the run holds anyway.
   */
  post(body: () => string): Promise<IncomingMessage> {
    return promised(() => {
      this.endpoint.check();
      const cut = this.cut();
      if (cut) throw cut;
      // The endpoint's limit only when it would end the wait before the attempt's does.
      if (this.limitMs === null || this.endpoint.timeoutMs < this.limitMs) {
        this.headersLimit = setTimeout(MessagesExchange.expire, this.endpoint.timeoutMs, this);
      }
      return this.responded(body);
    });
  }

  /**
   * The response's headers to the request `body` makes, as `post` promises them. When the request met a
   * kept-alive connection the server had just closed, it is sent again on another (each stale socket is
   * gone once it failed, so this ends; the time limit and the caller's abort still apply). Not an async
   * function: a call waits for its answer nearly all its life, and a suspended frame here would be one
   * per call in flight, thousands of them.
   */
  private responded(body: () => string): Promise<IncomingMessage> {
    let responding: Promise<IncomingMessage>;
    try {
      // What fails before anything is sent (the body's JSON, a header Node refuses) is thrown from
      // here as it is: it is no connection's fault, and sending again would fail the same way.
      responding = this.sent(body());
    } catch (error) {
      this.headersAnswered();
      return Promise.reject(error);
    }
    return responding.then(
      (response) => {
        this.headersAnswered();
        this.response = response;
        const status = response.statusCode ?? 0;
        if (status < 200 || status > 299) return errorOfResponse(response).then((error) => Promise.reject(error));
        return response;
      },
      (error: unknown) => {
        const failure = this.unanswered(error);
        if (failure === null) return this.responded(body);
        this.headersAnswered();
        throw failure;
      },
    );
  }

  /** The wait for headers is over: its limit goes, not kept with the exchange while the body is read. */
  private headersAnswered(): void {
    clearTimeout(this.headersLimit);
    this.headersLimit = undefined;
  }

  /** What a request that got no response fails with; null when it met a stale connection, to be sent again. */
  private unanswered(error: unknown): LlmError | null {
    const cut = this.cut();
    if (cut) return cut;
    if (this.expired) return timedOut();
    // Before the timeout's test, which reads the message: the host in a refusal's might say "timeout".
    if (error instanceof ProxyRefusal) return proxyRefused(error);
    // The pool's limit on opening a connection (directly or through the proxy), or the system's.
    if (isTimeout(error)) return timedOut();
    return isStaleConnection(this.request!, error) ? null : connectionFailed(error);
  }

  /**
   * Opens a request and sends `text` on it; settles with its response's headers or its error. Not an
   * async function: nothing suspended here holds the text once it is handed to the socket.
   */
  private sent(text: string): Promise<IncomingMessage> {
    const request = this.endpoint.open(Buffer.byteLength(text));
    this.request = request;
    return new Promise<IncomingMessage>((resolve, reject) => {
      // Stays for the request's life: a socket error after the headers comes here too (and to
      // the response, where it is read), and an 'error' nobody listens to would crash the process.
      request.on('error', reject);
      // `on`, not `once`: a request has one response, and once's wrapper would be kept with each call in flight.
      request.on('response', resolve);
      request.end(text);
    });
  }

  /** Closes the request, or the response if it is still being sent: the call was aborted or the client gave up on it. */
  abort(): void {
    if (this.response) this.response.destroy(abortError());
    else this.request?.destroy(abortError());
  }

  release(): void {
    this.signal?.removeEventListener('abort', this);
    this.limit?.delete(this);
  }
}

/** An error response as an LlmError. A body that is not the API's JSON (or that broke) leaves "HTTP <status>". */
async function errorOfResponse(response: IncomingMessage): Promise<LlmError> {
  const text = await readText(response).catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
  return fromErrorResponse({ status: response.statusCode, ...errorBodyFields(parseJson(text)), headers: headerSource(response.headers) });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The body of a non-streamed 2xx response: parsed when it says it is JSON (an empty one is undefined),
 * else the text, for the wire code to reject as not a message. JSON that does not parse throws.
 */
export async function readBody(response: IncomingMessage): Promise<unknown> {
  if (response.statusCode === 204) {
    discard(response);
    return null; // no body, by definition
  }
  const mediaType = response.headers['content-type']?.split(';')[0]?.trim();
  if (mediaType?.includes('application/json') || mediaType?.endsWith('+json')) {
    if (response.headers['content-length'] === '0') {
      discard(response);
      return undefined;
    }
    return JSON.parse(await readText(response));
  }
  return readText(response);
}

/**
 * Reads a streamed 2xx response to its end and passes each of its events, parsed, to `onEvent`, in
 * order and as they arrive; what `onEvent` throws stops the reading (the response is closed) and comes
 * out of here. `ping` and events without a name are skipped; an `error` event throws as the error its
 * type stands for. Data that is not JSON throws JSON's SyntaxError. When the call is aborted it
 * returns quietly, whatever was left unread: the client tells an aborted response by its signal. Not
 * an async function: a streamed answer is read for as long as the model writes it, and a suspended
 * frame here would be one per call in flight.
 */
export function readEvents(response: IncomingMessage, onEvent: (event: unknown) => void): Promise<void> {
  // The statuses that have no body (as fetch treats them, whatever was sent).
  if (response.statusCode === 204 || response.statusCode === 205) {
    return Promise.reject(new Error('Attempted to iterate over a response with no body'));
  }
  const headers = response.headers;
  const sse = new SseReader((event, data) => {
    if (event === null || event === 'ping') return;
    if (event === 'error')
      throw fromErrorResponse({ status: undefined, ...errorBodyFields(parseJson(data)), headers: headerSource(headers) });
    if (data === '') return;
    onEvent(JSON.parse(data));
  });
  // Buffers are Uint8Arrays: the reader decodes them as one UTF-8 stream, whatever their boundaries.
  return forEachChunk(response, (chunk) => sse.push(chunk)).then((whole) => {
    if (whole) sse.end();
  });
}
