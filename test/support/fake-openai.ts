import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  chat,
  completionChunks,
  DONE,
  encodeChunk,
  type FakeChatError,
  type FakeChatResponse,
  type FakeChatUsage,
  type FakeToolCall,
} from './fake-openai-script.ts';

export { chat, type FakeChatResponse, type FakeChatUsage, type FakeToolCall } from './fake-openai-script.ts';

/**
 * A local stand-in for the Chat Completions API (POST /v1/chat/completions), speaking its wire format
 * (JSON, and Server-Sent Events for `stream: true`), so the real `openai` SDK and real worker processes
 * can be tested offline. Replies are scripted in a queue; every request is recorded; a request the real
 * API would refuse gets its kind of 400 (or 401) instead of a scripted reply.
 */

export interface RecordedChatRequest {
  seq: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** The status answered; null until answered (and forever if the client went away first). */
  status: number | null;
  /** The connection closed before the whole response was sent. */
  aborted: boolean;
  /** The refusal's message when the request failed the checks. */
  invalid: string | null;
  streamed: boolean;
  /** The error message sent back, when there was one. */
  errorMessage: string | null;
}

export interface FakeOpenAi {
  /** The server's origin; the SDK's base URL is `${url}/v1` (see `baseUrl`). */
  url: string;
  /** What OPENAI_BASE_URL is set to. */
  baseUrl: string;
  requests: RecordedChatRequest[];
  enqueue(...responses: FakeChatResponse[]): FakeOpenAi;
  text(text: string, usage?: FakeChatUsage): FakeOpenAi;
  toolCalls(calls: FakeToolCall[], usage?: FakeChatUsage, content?: string): FakeOpenAi;
  error(status: number, error: FakeChatError, opts?: { retryAfter?: string | number }): FakeOpenAi;
  /** Makes the next queued response wait `ms` first. */
  delay(ms: number): FakeOpenAi;
  pending(): number;
  reset(): FakeOpenAi;
  close(): Promise<void>;
}

export interface FakeOpenAiOptions {
  /** When set, requests must carry exactly this key (401 otherwise). */
  apiKey?: string;
  /** Every error message sent ends with the key the request carried, as a careless proxy might. */
  echoKey?: boolean;
}

const refuse = (status: number, message: string, code: string | null = null, type = 'invalid_request_error') =>
  chat.error(status, { message, type, code });

/** The checks the real API makes that our mapping could get wrong; null when the request passes. */
function check(
  req: { method: string; path: string; headers: IncomingHttpHeaders; body: any },
  apiKey: string | undefined,
): FakeChatResponse | null {
  if (req.method !== 'POST' || req.path.split('?')[0] !== '/v1/chat/completions')
    return refuse(404, `Invalid URL (${req.method} ${req.path})`, 'unknown_url');
  const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  if (!key) return refuse(401, "You didn't provide an API key.", null);
  if (apiKey !== undefined && key !== apiKey) return refuse(401, 'Incorrect API key provided.', 'invalid_api_key');
  const b = req.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) return refuse(400, 'We could not parse the JSON body of your request.');
  if (typeof b.model !== 'string') return refuse(400, 'you must provide a model parameter');
  if (/^(gpt-5|o\d)/.test(b.model) && b.max_tokens !== undefined) {
    return refuse(
      400,
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      'unsupported_parameter',
    );
  }
  if (b.stream_options !== undefined && b.stream !== true)
    return refuse(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length === 0) return refuse(400, "Invalid 'messages': empty array.");
  let open: string[] = []; // tool_call ids of the last assistant message still to be answered
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!['system', 'developer', 'user', 'assistant', 'tool'].includes(m?.role))
      return refuse(400, `Invalid value for 'messages[${i}].role'.`);
    if (m.role === 'tool') {
      if (!open.includes(m.tool_call_id))
        return refuse(400, `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.`);
      if (typeof m.content !== 'string') return refuse(400, `Invalid type for 'messages[${i}].content'.`);
      open = open.filter((id) => id !== m.tool_call_id);
      continue;
    }
    if (open.length > 0) {
      return refuse(
        400,
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`,
      );
    }
    if (m.role === 'assistant') {
      const calls = m.tool_calls ?? [];
      if ((m.content === null || m.content === undefined) && calls.length === 0)
        return refuse(400, `Invalid value for 'messages[${i}].content': expected a string, got null.`);
      for (const c of calls) {
        if (
          c.type !== 'function' ||
          typeof c.id !== 'string' ||
          typeof c.function?.name !== 'string' ||
          typeof c.function?.arguments !== 'string'
        ) {
          return refuse(
            400,
            `Invalid 'messages[${i}].tool_calls': each needs an id, type "function" and a function with a name and string arguments.`,
          );
        }
      }
      open = calls.map((c: { id: string }) => c.id);
    } else if (typeof m.content !== 'string' && !Array.isArray(m.content)) {
      return refuse(400, `Invalid type for 'messages[${i}].content'.`);
    }
  }
  if (open.length > 0)
    return refuse(
      400,
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`,
    );
  for (const t of b.tools ?? []) {
    if (t?.type !== 'function' || typeof t.function?.name !== 'string')
      return refuse(400, 'Invalid \'tools\': each needs type "function" and a function name.');
  }
  return null;
}

export async function startFakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  const queue: FakeChatResponse[] = [];
  const requests: RecordedChatRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let nextDelay = 0;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => (timers.delete(timer), resolve()), ms);
      timers.add(timer);
    });
  const write = (res: http.ServerResponse, chunk: string) => new Promise<void>((resolve) => res.write(chunk, () => resolve()));

  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(parts).toString('utf8');
      let body: any = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        /* recorded raw; the checks refuse it */
      }
      const recorded: RecordedChatRequest = {
        seq: requests.length + 1,
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        status: null,
        aborted: false,
        invalid: null,
        streamed: body?.stream === true,
        errorMessage: null,
      };
      requests.push(recorded);
      res.on('close', () => {
        if (!res.writableFinished) recorded.aborted = true;
      });
      const rejection = check(recorded, options.apiKey);
      if (rejection) recorded.invalid = (rejection.body as any).error.message;
      const response =
        rejection ??
        queue.shift() ??
        chat.error(500, { message: `fake-openai: no scripted response left for request #${recorded.seq}`, type: 'server_error' });
      const echo = (error: FakeChatError) => {
        const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? 'none';
        const message = options.echoKey ? `${error.message} (key: ${key})` : error.message;
        recorded.errorMessage = message;
        return { ...error, message };
      };
      const send = async () => {
        if (res.destroyed) return;
        if (response.hangUp) return void req.socket.destroy();
        const headers = { 'x-request-id': `req_fake_${recorded.seq}`, ...response.headers };
        if (response.raw) {
          res.writeHead(response.status, { 'content-type': response.raw.contentType, ...headers }).end(response.raw.text);
          recorded.status = response.status;
          return;
        }
        let payload: any = response.body;
        if (payload?.error) payload = { error: echo(payload.error) };
        if (payload?.object === 'chat.completion' && payload.model === null) payload = { ...payload, model: body.model };
        recorded.status = response.status;
        if (recorded.streamed && response.status === 200 && payload?.object === 'chat.completion') {
          res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
          const script = response.stream ?? {};
          let deltas = 0;
          for (const chunk of completionChunks(payload, body.stream_options?.include_usage === true)) {
            if (chunk.delta) {
              if (script.errorAfter && deltas >= script.errorAfter.deltas)
                return void res.end(encodeChunk({ error: echo(script.errorAfter.error) }));
              if (script.cutAfterDeltas !== undefined && deltas >= script.cutAfterDeltas) return void res.socket?.destroy();
              if (script.endAfterDeltas !== undefined && deltas >= script.endAfterDeltas) return void res.end();
              if (script.deltaDelayMs) await pause(script.deltaDelayMs);
              deltas++;
            }
            if (res.destroyed) return;
            await write(res, encodeChunk(chunk.data));
          }
          return void res.end(DONE);
        }
        const text = JSON.stringify(payload);
        res.writeHead(response.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
        if (response.cutAfterBytes === undefined) return void res.end(text);
        await write(res, text.slice(0, response.cutAfterBytes));
        res.socket?.destroy();
      };
      void (response.delayMs ? pause(response.delayMs) : Promise.resolve()).then(send);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const self: FakeOpenAi = {
    url: `http://127.0.0.1:${port}`,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    enqueue(...responses) {
      for (const r of responses) {
        queue.push({ ...r, delayMs: r.delayMs ?? nextDelay });
        nextDelay = 0;
      }
      return self;
    },
    text: (text, usage) => self.enqueue(chat.text(text, usage)),
    toolCalls: (calls, usage, content) => self.enqueue(chat.toolCalls(calls, usage, content)),
    error: (status, error, opts) => self.enqueue(chat.error(status, error, opts)),
    delay(ms) {
      nextDelay = ms;
      return self;
    },
    pending: () => queue.length,
    reset() {
      queue.length = 0;
      requests.length = 0;
      nextDelay = 0;
      return self;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return self;
}
