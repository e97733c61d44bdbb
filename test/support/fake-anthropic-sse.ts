/**
 * The Messages API's streaming wire format (`stream: true`), for the fake server: a finished message
 * turned into the Server-Sent Events the real API sends for it — message_start, then per content
 * block content_block_start / content_block_delta… / content_block_stop, a ping, message_delta with
 * the stop reason and usage, message_stop. Pure: the server writes the events and applies the faults.
 */

export interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/** Faults scripted into a streamed response. Deltas are counted over all content blocks, from 1. */
export interface StreamScript {
  /** Sends an `error` event after this many deltas and ends the stream, as the API does when overloaded mid-response. */
  errorAfter?: { deltas: number; type: string; message: string };
  /** Drops the connection after this many deltas (no message_stop, no error event). */
  cutAfterDeltas?: number;
  /** @unit milliseconds — a pause before each delta, to make a stream slow. */
  deltaDelayMs?: number;
}

/** Words with their trailing space, so the deltas concatenate back to the text exactly. */
export function textChunks(text: string): string[] {
  const chunks = text.match(/\s*\S+\s*/g) ?? [];
  return chunks.length > 0 ? chunks : text === '' ? [] : [text];
}

/** JSON cut into pieces of at most `size` characters, as the API streams a tool's input. */
export function jsonChunks(json: string, size = 12): string[] {
  const chunks: string[] = [];
  for (let i = 0; i < json.length; i += size) chunks.push(json.slice(i, i + size));
  return chunks;
}

const delta = (index: number, d: Record<string, unknown>): SseEvent => ({
  event: 'content_block_delta',
  data: { type: 'content_block_delta', index, delta: d },
});

/** The start event and the deltas that rebuild `block`; blocks the API sends whole have no deltas. */
function blockEvents(block: any, index: number): SseEvent[] {
  const start = (content_block: unknown): SseEvent => ({
    event: 'content_block_start',
    data: { type: 'content_block_start', index, content_block },
  });
  switch (block?.type) {
    case 'text': {
      const { text, citations, ...rest } = block;
      const events = [start({ ...rest, type: 'text', text: '', ...(Array.isArray(citations) ? { citations: [] } : {}) })];
      events.push(...textChunks(String(text ?? '')).map((t) => delta(index, { type: 'text_delta', text: t })));
      if (Array.isArray(citations))
        events.push(...citations.map((citation: unknown) => delta(index, { type: 'citations_delta', citation })));
      return events;
    }
    case 'tool_use':
    case 'server_tool_use': {
      const json = JSON.stringify(block.input ?? {});
      const events = [start({ ...block, input: {} })];
      // An empty input ({}) is sent as no delta at all: the start block's {} stands.
      if (json !== '{}') events.push(...jsonChunks(json).map((partial_json) => delta(index, { type: 'input_json_delta', partial_json })));
      return events;
    }
    case 'thinking': {
      const events = [start({ type: 'thinking', thinking: '', signature: '' })];
      events.push(...textChunks(String(block.thinking ?? '')).map((thinking) => delta(index, { type: 'thinking_delta', thinking })));
      events.push(delta(index, { type: 'signature_delta', signature: String(block.signature ?? '') }));
      return events;
    }
    default:
      return [start(block)];
  }
}

/** Every event of a streamed response to `message` (a Messages API body), in order. */
export function messageEvents(message: any): SseEvent[] {
  const usage = message.usage ?? {};
  const content: unknown[] = Array.isArray(message.content) ? message.content : [];
  const events: SseEvent[] = [
    {
      event: 'message_start',
      data: {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          // As the API does: input and cache counts up front, output counted as it is produced.
          usage: { ...usage, output_tokens: Math.min(1, usage.output_tokens ?? 0) },
        },
      },
    },
  ];
  content.forEach((block, index) => {
    const [first, ...rest] = blockEvents(block, index);
    events.push(first!);
    if (index === 0) events.push({ event: 'ping', data: { type: 'ping' } });
    events.push(...rest, { event: 'content_block_stop', data: { type: 'content_block_stop', index } });
  });
  if (content.length === 0) events.push({ event: 'ping', data: { type: 'ping' } });
  events.push(
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: message.stop_reason ?? null, stop_sequence: message.stop_sequence ?? null },
        usage,
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  );
  return events;
}

export function errorEvent(type: string, message: string): SseEvent {
  return { event: 'error', data: { type: 'error', error: { type, message } } };
}

/** One event on the wire. */
export function encode(e: SseEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}
