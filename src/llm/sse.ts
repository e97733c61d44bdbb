/**
 * A reader of Server-Sent Events (`text/event-stream`): bytes in, one callback per event out. Pure
 * (no I/O), so the byte-level corner cases can be tested without a server.
 *
 * It follows the event-stream format: lines end with LF, CR or CRLF; a blank line ends an event;
 * `event:` names it, each `data:` line adds a line to its data (joined with LF); one space after the
 * colon is dropped; lines starting with a colon are comments; other fields (`id`, `retry`) and an
 * unfinished event at the end of the stream are dropped. Bytes are decoded as one UTF-8 stream, so a
 * chunk may end anywhere, even inside a character or between the CR and LF of one line end.
 *
 * Two choices are left to the caller instead of the format's defaults: an event without `event:`
 * is passed on with a null name (not "message"), and an event with a name but no data is passed on
 * with empty data (not dropped). The Messages API client skips the first and must see the second
 * (an `error` event ends the response whatever its data).
 *
 * Hot path: a chunk usually holds several whole events. Lines are found with indexOf and read in
 * place, so an event costs the strings its name and data are made of, nothing more.
 */

/** Called for every event; what it throws comes out of `push` or `end`. */
export type SseListener = (event: string | null, data: string) => void;

const LF = 10;
const COLON = 58;
const SPACE = 32;

export class SseReader {
  private readonly decoder = new TextDecoder();
  /** The start of a line whose end has not arrived yet. */
  private pending = '';
  /** The last text ended with CR: an LF opening the next one ends no line of its own. */
  private afterCr = false;
  private event: string | null = null;
  private data: string | null = null;

  constructor(private readonly listener: SseListener) {}

  /** Reads one chunk of the stream; the events it completes are passed on before it returns. */
  push(chunk: Uint8Array): void {
    this.read(this.decoder.decode(chunk, { stream: true }));
  }

  /** The stream has ended: an unfinished line, and an event no blank line ended, are dropped. */
  end(): void {
    this.read(this.decoder.decode());
    this.pending = '';
    this.afterCr = false;
    this.event = null;
    this.data = null;
  }

  private read(text: string): void {
    const length = text.length;
    let start = 0;
    if (this.afterCr) {
      this.afterCr = false;
      if (length > 0 && text.charCodeAt(0) === LF) start = 1;
    }
    // Line ends are found with indexOf, each kind searched again only once passed; most streams
    // have no CR at all, and then only LF is searched.
    let lf = text.indexOf('\n', start);
    let cr = text.indexOf('\r', start);
    while (lf !== -1 || cr !== -1) {
      const end = cr === -1 || (lf !== -1 && lf < cr) ? lf : cr;
      if (this.pending === '') {
        this.line(text, start, end);
      } else {
        const line = this.pending + text.slice(start, end);
        this.pending = '';
        this.line(line, 0, line.length);
      }
      start = end + 1;
      if (end === cr) {
        if (start === length) this.afterCr = true;
        else if (text.charCodeAt(start) === LF) start++;
      }
      if (lf !== -1 && lf < start) lf = text.indexOf('\n', start);
      if (cr !== -1 && cr < start) cr = text.indexOf('\r', start);
    }
    if (start < length) this.pending += start === 0 ? text : text.slice(start);
  }

  /** One line, `text` from `start` to `end` (exclusive). */
  private line(text: string, start: number, end: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    if (text.charCodeAt(start) === COLON) return; // a comment (the API's keep-alive, say)
    const length = end - start;
    if (length >= 4 && text.startsWith('data', start)) {
      const value = this.value(text, start + 4, end);
      if (value !== null) this.data = this.data === null ? value : `${this.data}\n${value}`;
    } else if (length >= 5 && text.startsWith('event', start)) {
      const value = this.value(text, start + 5, end);
      if (value !== null) this.event = value;
    }
  }

  /** The value of a field whose name ends at `at`; null when the name goes on ("database:"). */
  private value(text: string, at: number, end: number): string | null {
    if (at === end) return ''; // the name alone: an empty value
    if (text.charCodeAt(at) !== COLON) return null;
    let from = at + 1;
    if (from < end && text.charCodeAt(from) === SPACE) from++;
    return text.slice(from, end);
  }

  private dispatch(): void {
    const { event, data } = this;
    if (event === null && data === null) return;
    this.event = null;
    this.data = null;
    this.listener(event, data ?? '');
  }
}
