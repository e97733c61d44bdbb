import type { IncomingMessage } from 'node:http';
import type Anthropic from '@anthropic-ai/sdk';
import { classifyFailure } from './anthropic-failures.ts';
import { MessagesEndpoint, MessagesExchange, readBody, readEvents } from './anthropic-http.ts';
import { header } from './http-response.ts';
import { StreamAssembler } from './anthropic-stream.ts';
import { anthropicRefusal, toLlmResponse, toMessageParams } from './anthropic-wire.ts';
import { MAX_TIMER_MS } from '../util/sleep.ts';
import type { KeepsItsOwnTimeLimit } from './time-limited.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ModelOptions } from './types.ts';
import type { Call } from './failure.ts';

export interface AnthropicClientOptions {
  apiKey: string;
  /** The API's endpoint; null or absent means https://api.anthropic.com. */
  baseUrl?: string | null;
  /**
   * @unit milliseconds — how long one request may wait for its response to begin (its headers), a
   * backstop only: the time-limited decorator aborts sooner. Default 10 minutes.
   */
  timeoutMs?: number;
  /** Ask for the answer as a stream of events (`stream: true`) and report its text as it comes. Default true. */
  streaming?: boolean;
  /**
   * More headers for every request (a gateway's own, say). The ones the client sets itself are
   * refused (see anthropic-http.ts's OWN_HEADERS), as is `anthropic-beta` together with `betas`.
   */
  headers?: Readonly<Record<string, string>>;
  /** Beta features to ask for, sent as one `anthropic-beta: a,b` header. */
  betas?: readonly string[];
}

/**
 * Unknown stream event and delta types already said in this process (see `sayUnknown`), so a stream of
 * them does not repeat the same line at every step. Bounded: a server that made up a type per answer
 * could otherwise grow it for the life of the process.
 */
const saidUnknown = new Set<string>();
const MAX_SAID_UNKNOWN = 256;

/**
 * The Anthropic Messages API, over node:http with kept-alive connections (anthropic-http.ts) rather
 * than the official SDK or fetch, whose per-call CPU was the largest single cost of a step outside
 * the database. One call, no retries: those are the decorator's. Through the proxy the environment
 * names (HTTPS_PROXY, NO_PROXY …, see http-pool.ts), read when the client is made. It keeps the
 * time-limited decorator's limit on its own exchange (`sendWithin`).
 */
export class AnthropicClient implements LlmClient, KeepsItsOwnTimeLimit {
  readonly provider = 'anthropic';
  private readonly endpoint: MessagesEndpoint;
  private readonly apiKey: string;
  private readonly streaming: boolean;

  constructor(options: AnthropicClientOptions) {
    this.apiKey = options.apiKey;
    this.streaming = options.streaming ?? true;
    this.endpoint = new MessagesEndpoint({
      apiKey: options.apiKey,
      baseUrl: options.baseUrl,
      timeoutMs: Math.min(options.timeoutMs ?? 10 * 60 * 1000, MAX_TIMER_MS),
      headers: options.headers,
      betas: options.betas,
    });
  }

  checkOptions(options: ModelOptions): { path: string; message: string } | null {
    return anthropicRefusal(options);
  }

  send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    return this.sendWithin(request, options, null);
  }

  /** One attempt of at most `limitMs` (null: no limit but the transport's on the headers); see KeepsItsOwnTimeLimit. */
  sendWithin(request: LlmRequest, options: LlmCallOptions, limitMs: number | null): Promise<LlmResponse> {
    const call: Call = { responded: false, requestId: null, usage: null, callbackError: undefined };
    const exchange = new MessagesExchange(this.endpoint, options.signal, limitMs);
    // Each of the two ends its exchange itself: no frame of this one waits above theirs.
    return this.streaming ? this.stream(request, options, call, exchange) : this.create(request, call, exchange);
  }

  /** What a failed call throws, the exchange closed. */
  private failure(error: unknown, call: Call, exchange: MessagesExchange): unknown {
    // Whatever is left of the response is not wanted: close it rather than leave the connection busy.
    exchange.abort();
    // The caller's own callback failed: not the provider's fault, so not classified as one.
    if (call.callbackError !== undefined && error === call.callbackError) return error;
    // Cut off (the caller's abort, the attempt's limit): that, whatever it broke on the way.
    return classifyFailure(exchange.cut() ?? error, { apiKey: this.apiKey, ...call });
  }

  /**
   * One exchange: the request `body` makes, then `read` of its response. What fails comes out as
   * `failure` makes it, and the exchange is released whatever the outcome. Not an async function: a call
   * waits for its answer nearly all its life, and a suspended frame here would be one per call in flight.
   */
  private exchanged<T>(
    exchange: MessagesExchange,
    call: Call,
    body: () => string,
    read: (response: IncomingMessage) => Promise<T>,
  ): Promise<T> {
    const failed = (error: unknown): never => {
      const failure = this.failure(error, call, exchange);
      exchange.release();
      throw failure;
    };
    const answered = (answer: T) => {
      exchange.release();
      return answer;
    };
    // The reading is chained inside, once the headers are there: while they are awaited (all of the
    // model's time to its first token), one reaction waits here, not two.
    return exchange.post(body).then((response) => {
      try {
        call.responded = true;
        call.requestId = header(response.headers, 'request-id');
        return read(response).then(answered, failed);
      } catch (error) {
        return failed(error);
      }
    }, failed);
  }

  private create(request: LlmRequest, call: Call, exchange: MessagesExchange): Promise<LlmResponse> {
    return this.exchanged(
      exchange,
      call,
      () => JSON.stringify(toMessageParams(request)),
      // An HTML page or an empty body comes back as a string or undefined, not a message.
      async (response) => toLlmResponse(await readBody(response), call.requestId, request.model),
    );
  }

  private stream(request: LlmRequest, options: LlmCallOptions, call: Call, exchange: MessagesExchange): Promise<LlmResponse> {
    return this.exchanged(
      exchange,
      call,
      () => JSON.stringify(streamed(request)),
      (response) => this.readStream(response, request.model, options, call, exchange),
    );
  }

  /** A streamed answer, read to its end and assembled; its text and thinking passed on as they come (not an async function, as readEvents). */
  private readStream(
    response: IncomingMessage,
    model: string,
    options: LlmCallOptions,
    call: Call,
    exchange: MessagesExchange,
  ): Promise<LlmResponse> {
    const assembler = new StreamAssembler(model);
    const { onText, onThinking, onUsage } = options;
    const reading = readEvents(response, (data) => {
      // Fed as the API sent it; the assembler checks what it relies on and skips kinds it does not know.
      const event = data as Anthropic.RawMessageStreamEvent;
      const streamed = assembler.add(event);
      const usage = event.type === 'message_start' || event.type === 'message_delta' ? (call.usage = assembler.usage()) : null;
      // As failure.ts's `report`, inline: no closure per event. What the caller's callbacks throw is
      // remembered as theirs, so it is passed on unclassified.
      try {
        if (usage && onUsage) onUsage(usage);
        if (streamed !== null) {
          if (streamed.type === 'text_delta') onText?.(streamed.text, 1);
          else onThinking?.(streamed.thinking, 1);
        }
      } catch (error) {
        call.callbackError = error;
        throw error;
      }
    });
    return reading.then(() => {
      // A response cut off counts as none, however much of it came.
      const cut = exchange.cut();
      if (cut) throw cut;
      const answer = assembler.finish(call.requestId);
      sayUnknown(answer, assembler.unknownTypes());
      return answer;
    });
  }
}

/**
 * Tells of the stream's unknown event and delta types in the answer's warnings, which the engine logs
 * at warn level (as a step warning, with the run and step): the first time each is seen in this
 * process only, and by its type alone, never with what the event held. A type that is not a short name
 * is not repeated either: it is outside data, and could be anything.
 */
function sayUnknown(answer: LlmResponse, types: readonly string[]): void {
  for (const type of types) {
    if (saidUnknown.has(type) || saidUnknown.size >= MAX_SAID_UNKNOWN) continue;
    saidUnknown.add(type);
    const kind = type.slice(0, type.indexOf(' '));
    const name = type.slice(kind.length + 1);
    const shown = /^[A-Za-z0-9_.:-]{1,64}$/.test(name) ? `"${name}"` : 'one whose type is not a short name';
    (answer.warnings ??= []).push(
      kind === 'event'
        ? `the stream sent an event of a type this client does not know (${shown}): skipped (said once per process)`
        : `the stream sent a delta of a type this client does not know (${shown}): its fields were merged into its block (said once per process)`,
    );
  }
}

/** The request's parameters, streamed. toMessageParams makes a fresh object: the flag is set on it rather than spread into a copy. */
function streamed(request: LlmRequest): { stream?: boolean } {
  const params: { stream?: boolean } = toMessageParams(request);
  params.stream = true;
  return params;
}
