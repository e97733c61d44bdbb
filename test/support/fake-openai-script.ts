/**
 * Scripted responses of the fake Chat Completions API, and the chunks a streamed response is sent as:
 * a first chunk with the role, the text word by word, each tool call as its id and name then its
 * arguments in pieces, a chunk with the finish reason, the usage chunk (`choices: []`) when the request
 * asked for it, and `data: [DONE]`.
 */
import { jsonChunks, textChunks } from './fake-anthropic-sse.ts';

export interface FakeChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** prompt_tokens_details.cached_tokens: the part of prompt_tokens read from the cache. */
  cached_tokens?: number;
}

export interface FakeToolCall {
  id: string;
  name: string;
  /** An object is sent as its JSON; a string is sent as it is (e.g. arguments that are not JSON). */
  arguments: unknown;
}

/** An error object as the API sends it, in an error body or in the middle of a stream. */
export interface FakeChatError {
  message: string;
  type?: string | null;
  code?: string | number | null;
}

/** Faults of a streamed response. Deltas (text pieces and argument pieces) are counted from 1. */
export interface ChatStreamScript {
  /** Sends `data: {"error": …}` after this many deltas and ends the stream. */
  errorAfter?: { deltas: number; error: FakeChatError };
  /** Drops the connection after this many deltas. */
  cutAfterDeltas?: number;
  /** Ends the response cleanly after this many deltas, without a finish reason or [DONE] (a proxy that gave up). */
  endAfterDeltas?: number;
  /** @unit milliseconds — a pause before each delta. */
  deltaDelayMs?: number;
}

export interface FakeChatResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** @unit milliseconds — wait before answering. */
  delayMs?: number;
  hangUp?: boolean;
  raw?: { contentType: string; text: string };
  /** Non-streamed: send this many bytes of the JSON body, then drop the connection. */
  cutAfterBytes?: number;
  stream?: ChatStreamScript;
}

let counter = 0;

export const chat = {
  reply(opts: {
    content?: string | null;
    toolCalls?: FakeToolCall[];
    finishReason?: string | null;
    usage?: FakeChatUsage;
    model?: string;
    refusal?: string;
  }): FakeChatResponse {
    const u = opts.usage ?? {};
    const calls = opts.toolCalls ?? [];
    return {
      status: 200,
      body: {
        id: `chatcmpl-fake${++counter}`,
        object: 'chat.completion',
        created: 1_760_000_000,
        model: opts.model ?? null, // null: echo the request's model
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: opts.content ?? null,
              refusal: opts.refusal ?? null,
              ...(calls.length
                ? {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: 'function',
                      function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
                    })),
                  }
                : {}),
            },
            finish_reason: opts.finishReason === undefined ? (calls.length ? 'tool_calls' : 'stop') : opts.finishReason,
          },
        ],
        usage: {
          prompt_tokens: u.prompt_tokens ?? 10,
          completion_tokens: u.completion_tokens ?? 5,
          total_tokens: (u.prompt_tokens ?? 10) + (u.completion_tokens ?? 5),
          prompt_tokens_details: { cached_tokens: u.cached_tokens ?? 0 },
        },
      },
    };
  },
  text(text: string, usage?: FakeChatUsage): FakeChatResponse {
    return chat.reply({ content: text, usage });
  },
  toolCalls(calls: FakeToolCall[], usage?: FakeChatUsage, content?: string): FakeChatResponse {
    return chat.reply({ content: content ?? null, toolCalls: calls, usage });
  },
  error(status: number, error: FakeChatError, opts: { retryAfter?: string | number } = {}): FakeChatResponse {
    const headers: Record<string, string> = {};
    if (opts.retryAfter !== undefined) headers['retry-after'] = String(opts.retryAfter);
    return { status, body: { error: { type: null, code: null, param: null, ...error } }, headers };
  },
  html(status = 200): FakeChatResponse {
    return {
      status,
      body: null,
      raw: { contentType: 'text/html; charset=utf-8', text: '<!DOCTYPE html><html><body><h1>Bad Gateway</h1></body></html>' },
    };
  },
  /** `response` cut off after half its body (non-streamed) or after `deltas` deltas (streamed). */
  cut(response: FakeChatResponse, deltas = 1): FakeChatResponse {
    const bytes = Math.floor(JSON.stringify(response.body).length / 2);
    return { ...response, cutAfterBytes: bytes, stream: { ...response.stream, cutAfterDeltas: deltas } };
  },
  /** `response` streamed until `deltas` deltas were sent, then an error object ends it. */
  streamError(response: FakeChatResponse, deltas: number, error: FakeChatError): FakeChatResponse {
    return { ...response, stream: { ...response.stream, errorAfter: { deltas, error } } };
  },
};

export interface ChatChunk {
  /** A piece of text or of a tool call's arguments (what the fault scripts count). */
  delta: boolean;
  data: Record<string, unknown>;
}

/** Every chunk of a streamed response to `completion` (a non-streamed body), in order. */
export function completionChunks(completion: any, includeUsage: boolean): ChatChunk[] {
  const choice = completion.choices[0];
  const message = choice.message;
  const head = { id: completion.id, object: 'chat.completion.chunk', created: completion.created, model: completion.model };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, isDelta = false): ChatChunk => ({
    delta: isDelta,
    data: { ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] },
  });
  const calls: any[] = message.tool_calls ?? [];
  const chunks: ChatChunk[] = [chunk({ role: 'assistant', content: calls.length && !message.content ? null : '', refusal: null })];
  for (const piece of textChunks(message.content ?? '')) chunks.push(chunk({ content: piece }, null, true));
  for (const piece of textChunks(message.refusal ?? '')) chunks.push(chunk({ refusal: piece }, null, true));
  calls.forEach((call, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }));
    for (const piece of jsonChunks(call.function.arguments))
      chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }, null, true));
  });
  chunks.push(chunk({}, choice.finish_reason));
  if (includeUsage) chunks.push({ delta: false, data: { ...head, choices: [], usage: completion.usage } });
  return chunks;
}

export const encodeChunk = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
export const DONE = 'data: [DONE]\n\n';
