import http, { type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { AddressInfo } from 'node:net';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { check, credentialOf } from './fake-anthropic-checks.ts';
import { fake, type FakeResponse, type FakeUsage } from './fake-anthropic-script.ts';
import { encode, errorEvent, messageEvents, type StreamScript } from './fake-anthropic-sse.ts';

export { credentialOf } from './fake-anthropic-checks.ts';
export { fake, type FakeResponse, type FakeUsage } from './fake-anthropic-script.ts';
export type { StreamScript } from './fake-anthropic-sse.ts';

/**
 * A local stand-in for the Anthropic Messages API (POST /v1/messages), speaking its wire format, so
 * the real client and real worker processes can be tested offline. Replies are scripted in a queue;
 * every request is recorded; requests the real API would reject get the real API's kind of 400. A
 * request with `stream: true` gets every scripted message as the API's Server-Sent Events.
 */

export interface RecordedRequest {
  seq: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (the raw text when it was not JSON). */
  body: any;
  /** The status answered; null until answered, and forever if the client went away first. */
  status: number | null;
  /** The connection closed before the whole response was sent: the client went away, or a scripted cut. */
  aborted: boolean;
  /** The whole response was sent (for a stream: its last event). */
  finished: boolean;
  /** The 400 message when the request failed validation (no scripted reply was used for it). */
  invalid: string | null;
  /** The request asked for a streamed response (`stream: true`). */
  streamed: boolean;
  /** The error message sent back (in an error body or a stream's error event), when there was one. */
  errorMessage: string | null;
}

export type Responder = (request: RecordedRequest) => FakeResponse;

export interface FakeAnthropic {
  /** The base URL to give the client (ANTHROPIC_BASE_URL). */
  url: string;
  requests: RecordedRequest[];
  /** Queues responses, used in order, one per valid request. */
  enqueue(...responses: FakeResponse[]): FakeAnthropic;
  reply(opts: Parameters<typeof fake.reply>[0]): FakeAnthropic;
  text(text: string, usage?: FakeUsage): FakeAnthropic;
  toolUse(id: string, name: string, input: unknown, usage?: FakeUsage): FakeAnthropic;
  error(status: number, type: string, message: string, opts?: Parameters<typeof fake.error>[3]): FakeAnthropic;
  /** Makes the next queued response wait `ms` first: `delay(5000).text("late")`. */
  delay(ms: number): FakeAnthropic;
  /** Queues a dropped connection: that request gets no response at all. */
  hangUp(): FakeAnthropic;
  /** How requests are answered once the queue is empty; default: a 500 saying the script ran out. */
  fallback(responder: Responder | FakeResponse | null): FakeAnthropic;
  /** Scripted responses not used yet. */
  pending(): number;
  /** TCP connections accepted since the start or the last reset (a kept-alive one serves many requests). */
  connections(): number;
  /** Closes every connection that is between requests, as a server's keep-alive timeout does. */
  closeIdleConnections(): void;
  /** Forgets the queue, the recorded requests, the connection count and the fallback: a clean server for the next test. */
  reset(): FakeAnthropic;
  close(): Promise<void>;
}

export interface FakeAnthropicOptions {
  /** When set, requests must carry exactly this key (401 otherwise), as with a real key. */
  apiKey?: string;
  fallback?: Responder | FakeResponse;
  /**
   * Every error message sent (refusals, scripted errors, stream error events) ends with the key the
   * request carried, as a careless proxy might: lets a test prove the client redacts it.
   */
  echoKey?: boolean;
}

export async function startFakeAnthropic(options: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  const queue: FakeResponse[] = [];
  const requests: RecordedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let nextDelay = 0;
  let fallback: Responder | null = null;
  let connections = 0;

  /** Waits `ms` unless the server closes first (then never resolves: the response is abandoned). */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        /* recorded raw; validation answers it */
      }
      const recorded: RecordedRequest = {
        seq: requests.length + 1,
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        status: null,
        aborted: false,
        finished: false,
        invalid: null,
        streamed: body?.stream === true,
        errorMessage: null,
      };
      requests.push(recorded);
      res.on('finish', () => (recorded.finished = true));
      res.on('close', () => {
        if (!res.writableFinished) recorded.aborted = true;
      });
      const rejection = check(recorded, options.apiKey);
      if (rejection?.status === 400) recorded.invalid = rejection.body.error.message;
      const response: FakeResponse = rejection ?? queue.shift() ?? fallback?.(recorded) ?? scriptExhausted(recorded);
      const echo = (message: string) => {
        const text = options.echoKey ? `${message} (key: ${credentialOf(req.headers) ?? 'none'})` : message;
        recorded.errorMessage = text;
        return text;
      };
      const send = async () => {
        if (res.destroyed) return;
        if (response.hangUp) {
          req.socket.destroy();
          return;
        }
        const headers = { 'request-id': `req_fake_${recorded.seq}`, ...response.headers };
        if (response.raw) {
          res.writeHead(response.status, { 'content-type': response.raw.contentType, ...headers });
          res.end(response.raw.text);
          recorded.status = response.status;
          return;
        }
        const payload = withEchoedKey(withModel(response.body, body), echo);
        if (recorded.streamed && response.status === 200 && isMessage(payload)) {
          recorded.status = 200;
          await streamMessage(res, payload, response.stream ?? {}, headers, echo, pause);
          return;
        }
        const text = JSON.stringify(payload);
        res.writeHead(response.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
        recorded.status = response.status;
        if (response.cutAfterBytes === undefined) {
          res.end(text);
          return;
        }
        await write(res, text.slice(0, response.cutAfterBytes));
        res.socket?.destroy();
      };
      void (response.delayMs ? pause(response.delayMs) : Promise.resolve()).then(send);
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const self: FakeAnthropic = {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue(...responses) {
      for (const r of responses) {
        queue.push({ ...r, delayMs: r.delayMs ?? nextDelay });
        nextDelay = 0;
      }
      return self;
    },
    reply: (opts) => self.enqueue(fake.reply(opts)),
    text: (text, usage) => self.enqueue(fake.text(text, usage)),
    toolUse: (id, name, input, usage) => self.enqueue(fake.toolUse(id, name, input, usage)),
    error: (status, type, message, opts) => self.enqueue(fake.error(status, type, message, opts)),
    delay(ms) {
      nextDelay = ms;
      return self;
    },
    hangUp() {
      return self.enqueue({ status: 0, body: null, hangUp: true });
    },
    fallback(responder) {
      fallback = responder === null ? null : typeof responder === 'function' ? responder : () => responder;
      return self;
    },
    pending: () => queue.length,
    connections: () => connections,
    closeIdleConnections: () => server.closeIdleConnections(),
    reset() {
      queue.length = 0;
      requests.length = 0;
      connections = 0;
      nextDelay = 0;
      fallback = null;
      if (options.fallback) self.fallback(options.fallback);
      return self;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  if (options.fallback) self.fallback(options.fallback);
  return self;
}

/**
 * One call in each mode, then a clean server. The first request of a test process pays for loading
 * the HTTP client (a second or more on a busy machine): a test with a short step timeout must not
 * spend that inside its limit, or its request never reaches the server.
 */
export async function warmUp(server: FakeAnthropic, apiKey: string): Promise<void> {
  for (const streaming of [true, false]) {
    server.text('warm');
    await new AnthropicClient({ apiKey, baseUrl: server.url, streaming }).send({
      model: 'warm-up',
      maxTokens: 1,
      system: null,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
    });
  }
  server.reset();
}

function scriptExhausted(request: RecordedRequest): FakeResponse {
  return fake.error(500, 'api_error', `fake-anthropic: no scripted response left for request #${request.seq}`);
}

/** A reply scripted without a model answers with the model the request asked for, as the API does. */
function withModel(payload: unknown, requestBody: any): unknown {
  if (payload && typeof payload === 'object' && (payload as { type?: unknown }).type === 'message') {
    const message = payload as { model: unknown };
    if (message.model === null) return { ...message, model: requestBody?.model ?? 'unknown' };
  }
  return payload;
}

function isMessage(payload: unknown): boolean {
  return !!payload && typeof payload === 'object' && (payload as { type?: unknown }).type === 'message';
}

/** An error body with its message passed through `echo` (which may append the request's key). */
function withEchoedKey(payload: any, echo: (message: string) => string): unknown {
  if (payload?.type !== 'error' || typeof payload.error?.message !== 'string') return payload;
  return { ...payload, error: { ...payload.error, message: echo(payload.error.message) } };
}

function write(res: http.ServerResponse, chunk: string): Promise<void> {
  return new Promise((resolve) => res.write(chunk, () => resolve()));
}

/** Streams `message` as the API's events, with the scripted faults; stops quietly if the client leaves. */
async function streamMessage(
  res: http.ServerResponse,
  message: unknown,
  script: StreamScript,
  headers: Record<string, string>,
  echo: (message: string) => string,
  pause: (ms: number) => Promise<void>,
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
  let deltas = 0;
  for (const event of messageEvents(message)) {
    // A fault "after N deltas" fires before the next delta, or before message_delta when there are fewer.
    const boundary = event.event === 'content_block_delta' || event.event === 'message_delta';
    if (boundary && script.errorAfter && deltas >= script.errorAfter.deltas) {
      res.end(encode(errorEvent(script.errorAfter.type, echo(script.errorAfter.message))));
      return;
    }
    if (boundary && script.cutAfterDeltas !== undefined && deltas >= script.cutAfterDeltas) {
      res.socket?.destroy();
      return;
    }
    if (event.event === 'content_block_delta') {
      if (script.deltaDelayMs) await pause(script.deltaDelayMs);
      deltas++;
    }
    if (res.destroyed) return;
    await write(res, encode(event));
  }
  res.end();
}

/**
 * The fake server of a test file: started and warmed up before its tests, its script and recorded
 * requests cleared before each, closed after them. What it returns stands for the started server.
 */
export function useFakeAnthropic(apiKey: string): FakeAnthropic {
  let started: FakeAnthropic | undefined;
  const current = (): FakeAnthropic => {
    if (!started) throw new Error('the fake Messages API is used before its beforeAll started it');
    return started;
  };
  beforeAll(async () => {
    started = await startFakeAnthropic({ apiKey });
    await warmUp(started, apiKey);
  });
  afterAll(async () => {
    await started?.close();
  });
  beforeEach(() => current().reset());
  return new Proxy({} as FakeAnthropic, {
    get(_, key) {
      const value = Reflect.get(current(), key) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(current()) : value;
    },
  });
}
