import { describe, expect, it } from 'vitest';
import { SseReader } from '../../src/llm/sse.ts';

type Seen = [string | null, string];

/** The events `text` holds, fed as `chunks` (byte lengths, cycled) of its UTF-8 encoding. */
function read(text: string | Uint8Array, chunks: number[] = []): Seen[] {
  const seen: Seen[] = [];
  const reader = new SseReader((event, data) => seen.push([event, data]));
  const bytes = typeof text === 'string' ? new TextEncoder().encode(text) : text;
  if (chunks.length === 0) {
    reader.push(bytes);
  } else {
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const size = chunks[i % chunks.length]!;
      reader.push(bytes.subarray(at, at + size));
      at += size;
    }
  }
  reader.end();
  return seen;
}

/** Every way of cutting `text` in two, and byte by byte: the events must not depend on the chunks. */
function everySplit(text: string): Seen[][] {
  const bytes = new TextEncoder().encode(text);
  const results = [read(bytes, [1])];
  for (let cut = 0; cut <= bytes.length; cut++) {
    const seen: Seen[] = [];
    const reader = new SseReader((event, data) => seen.push([event, data]));
    reader.push(bytes.subarray(0, cut));
    reader.push(bytes.subarray(cut));
    reader.end();
    results.push(seen);
  }
  return results;
}

const STREAM =
  'event: message_start\ndata: {"type":"message_start"}\n\n' +
  ': a comment\n' +
  'event: ping\ndata: {"type": "ping"}\n\n' +
  'event: content_block_delta\ndata: {"text":"naïve café 日本語 🎉"}\n\n' +
  'event: message_stop\ndata: {"type":"message_stop"}\n\n';
const EVENTS: Seen[] = [
  ['message_start', '{"type":"message_start"}'],
  ['ping', '{"type": "ping"}'],
  ['content_block_delta', '{"text":"naïve café 日本語 🎉"}'],
  ['message_stop', '{"type":"message_stop"}'],
];

describe('SseReader', () => {
  it('reads events, their names and data, and skips comments', () => {
    expect(read(STREAM)).toEqual(EVENTS);
  });

  it('gives the same events whatever the chunks, even inside a multi-byte character', () => {
    for (const seen of everySplit(STREAM)) expect(seen).toEqual(EVENTS);
    expect(read(STREAM, [2, 3, 5, 7])).toEqual(EVENTS);
  });

  it('takes CRLF and CR line ends as LF, even when a CRLF is split between chunks', () => {
    for (const end of ['\r\n', '\r']) {
      const text = STREAM.replaceAll('\n', end);
      for (const seen of everySplit(text)) expect(seen).toEqual(EVENTS);
    }
    // Mixed in one stream.
    expect(read('event: a\r\ndata: 1\n\rdata: 2\r\r\n')).toEqual([
      ['a', '1'],
      [null, '2'],
    ]);
  });

  it('joins the data lines of one event with LF', () => {
    expect(read('data: {"a":\ndata: 1}\ndata:\ndata\n\n')).toEqual([[null, '{"a":\n1}\n\n']]);
    for (const seen of everySplit('event: x\r\ndata: one\r\ndata: two\r\n\r\n')) expect(seen).toEqual([['x', 'one\ntwo']]);
  });

  it('drops one space after the colon, no more, and keeps colons in the value', () => {
    expect(read('event:tight\ndata:  two spaces\ndata: a: b\n\n')).toEqual([['tight', ' two spaces\na: b']]);
  });

  it('ignores other fields and names that only begin like a known one', () => {
    expect(read('id: 7\nretry: 1000\ndatabase: x\neventual: y\nevent: e\ndata: d\n\n')).toEqual([['e', 'd']]);
    expect(read('dat\na: x\n\n')).toEqual([]);
  });

  it('passes on an event without a name (null) and one with a name but no data (empty)', () => {
    expect(read('data: x\n\nevent: error\n\n')).toEqual([
      [null, 'x'],
      ['error', ''],
    ]);
  });

  it('dispatches nothing for blank lines alone, comments alone, or an event never ended', () => {
    expect(read('\n\n\r\n: keep-alive\n\n')).toEqual([]);
    expect(read('event: message_stop\ndata: {"type":"message_stop"}')).toEqual([]);
    expect(read('event: message_stop\ndata: {"type":"message_stop"}\n')).toEqual([]);
    // A CR at the very end is a line end: the blank line that ends the event.
    expect(read('data: x\n\r')).toEqual([[null, 'x']]);
  });

  it('drops a byte-order mark at the start of the stream', () => {
    expect(read(new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('data: x\n\n')]), [1])).toEqual([[null, 'x']]);
  });

  it('decodes a character cut off by the end of the stream as U+FFFD, into no event', () => {
    const bytes = new TextEncoder().encode('data: é');
    expect(read(bytes.subarray(0, bytes.length - 1))).toEqual([]);
    expect(read(new Uint8Array([...new TextEncoder().encode('data: '), 0xc3, 0x0a, 0x0a]))).toEqual([[null, '\uFFFD']]);
  });

  it('lets what the listener throws out of push, with the events before it passed on', () => {
    const seen: string[] = [];
    const reader = new SseReader((event) => {
      if (event === 'bad') throw new Error('listener failed');
      seen.push(event!);
    });
    expect(() => reader.push(new TextEncoder().encode('event: a\ndata: 1\n\nevent: bad\ndata: 2\n\nevent: c\ndata: 3\n\n'))).toThrow(
      'listener failed',
    );
    expect(seen).toEqual(['a']);
  });
});
