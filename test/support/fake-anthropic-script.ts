/** Scripted responses of the fake Messages API: what one request gets, and builders for the usual ones. */
import type { StreamScript } from './fake-anthropic-sse.ts';

export interface FakeUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

/** One scripted HTTP response. */
export interface FakeResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** @unit milliseconds — wait before answering (the client may give up meanwhile). */
  delayMs?: number;
  /** Close the connection without answering, as a dropped network would. */
  hangUp?: boolean;
  /** Answer with this text instead of JSON: a proxy's HTML page, an empty body. */
  raw?: { contentType: string; text: string };
  /** Send only this many bytes of the JSON body, then drop the connection: a reply cut off mid-body. */
  cutAfterBytes?: number;
  /** Faults of the response when it is streamed (the request said `stream: true`). */
  stream?: StreamScript;
}

let messageCounter = 0;

/** Builders of scripted responses, usable with `enqueue` and in a `fallback` responder. */
export const fake = {
  reply(opts: { content: unknown[]; stopReason?: string; usage?: FakeUsage; model?: string }): FakeResponse {
    const u = opts.usage ?? {};
    return {
      status: 200,
      body: {
        id: `msg_fake_${++messageCounter}`,
        type: 'message',
        role: 'assistant',
        model: opts.model ?? null, // null: echo the request's model
        content: opts.content,
        stop_reason: opts.stopReason ?? 'end_turn',
        stop_sequence: null,
        usage: {
          input_tokens: u.input_tokens ?? 10,
          output_tokens: u.output_tokens ?? 5,
          cache_creation_input_tokens: u.cache_creation_input_tokens ?? 0,
          cache_read_input_tokens: u.cache_read_input_tokens ?? 0,
        },
      },
    };
  },
  text(text: string, usage?: FakeUsage): FakeResponse {
    return fake.reply({ content: [{ type: 'text', text }], stopReason: 'end_turn', usage });
  },
  toolUse(id: string, name: string, input: unknown, usage?: FakeUsage): FakeResponse {
    return fake.reply({ content: [{ type: 'tool_use', id, name, input }], stopReason: 'tool_use', usage });
  },
  error(status: number, type: string, message: string, opts: { retryAfter?: string | number; retryAfterMs?: number } = {}): FakeResponse {
    const headers: Record<string, string> = {};
    if (opts.retryAfter !== undefined) headers['retry-after'] = String(opts.retryAfter);
    if (opts.retryAfterMs !== undefined) headers['retry-after-ms'] = String(opts.retryAfterMs);
    return { status, body: { type: 'error', error: { type, message } }, headers };
  },
  /** A page that is not the API's response, e.g. a proxy's or captive portal's HTML, with this status. */
  html(status = 200): FakeResponse {
    return {
      status,
      body: null,
      raw: { contentType: 'text/html; charset=utf-8', text: '<!DOCTYPE html><html><body><h1>Service Unavailable</h1></body></html>' },
    };
  },
  /** A 200 with an empty JSON body. */
  empty(): FakeResponse {
    return { status: 200, body: null, raw: { contentType: 'application/json', text: '' } };
  },
  /** `response` cut off after half its body (non-streamed) or after `deltas` deltas (streamed). */
  cut(response: FakeResponse, deltas = 1): FakeResponse {
    const bytes = Math.floor(JSON.stringify(response.body).length / 2);
    return { ...response, cutAfterBytes: bytes, stream: { ...response.stream, cutAfterDeltas: deltas } };
  },
  /** `response` streamed until `deltas` deltas were sent, then an `error` event (e.g. overloaded_error) ends it. */
  streamError(response: FakeResponse, deltas: number, type = 'overloaded_error', message = 'Overloaded'): FakeResponse {
    return { ...response, stream: { ...response.stream, errorAfter: { deltas, type, message } } };
  },
};
