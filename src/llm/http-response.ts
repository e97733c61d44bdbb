/**
 * Reading a response of `node:http` (an IncomingMessage): a header's value, and the body, chunk by
 * chunk or whole, with "read to its end", "closed by our abort" and "cut off" told apart.
 *
 * A body must be read to its end or destroyed: only then does its kept-alive socket go back to the
 * pool (or away).
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { isAbortError, type HeaderSource } from './anthropic-failures.ts';

/**
 * A header's value, by lower-case name. Node has already joined a repeated header with ", " (as
 * fetch's Headers do), except one that may not repeat (content-type, retry-after …), of which it kept
 * the first; a list (set-cookie) is joined here.
 */
export function header(headers: IncomingHttpHeaders, name: string): string | null {
  const value = headers[name];
  return value === undefined ? null : typeof value === 'string' ? value : value.join(', ');
}

/** The headers as the failure classification reads them. */
export function headerSource(headers: IncomingHttpHeaders): HeaderSource {
  return { get: (name) => header(headers, name) };
}

/**
 * Passes each chunk of `message`'s body to `onChunk` as it arrives. Resolves with true at the body's
 * end, with false when the body was destroyed with an AbortError (the call's abort, see
 * MessagesExchange). Rejects with what `onChunk` throws (the body is then destroyed: nothing more is
 * wanted of it) or, when the connection closed before the end, with an Error "terminated" whose cause
 * is the HTTP stack's (usually "aborted", ECONNRESET).
 *
 * Once settled it takes its listeners off the body. Node may hold a finished response a while longer:
 * the parser of its connection, past the 1,000 Node keeps for reuse, is closed on the next turn of the
 * event loop and holds the request and its response until then. With thousands of responses read in one
 * turn that is thousands of responses, and through these listeners each would hold what reads it (the
 * stream parser, the message being assembled, the call's callbacks and, through them, its step).
 */
export function forEachChunk(message: IncomingMessage, onChunk: (chunk: Buffer) => void): Promise<boolean> {
  return new Promise((resolve, reject) => {
    // Each outcome takes every listener off first, so none of them runs after another has settled.
    const settle = (): void => {
      message.off('data', onData);
      message.off('end', onEnd);
      message.off('close', closed);
      // Node's response emits 'error' only to listeners, but another Readable (or a direct emit) would
      // crash the process with one nobody hears: one that comes after this is ignored.
      message.off('error', closed);
      message.on('error', ignore);
    };
    const closed = (): void => {
      settle();
      const error = message.errored;
      if (isAbortError(error)) resolve(false);
      else reject(new Error('terminated', { cause: error ?? undefined }));
    };
    const onData = (chunk: Buffer): void => {
      try {
        onChunk(chunk);
      } catch (error) {
        settle();
        reject(error);
        message.destroy();
      }
    };
    const onEnd = (): void => {
      settle();
      resolve(true);
    };
    // Ended or destroyed while nobody listened (between the headers and this read): no event will say so.
    if (message.destroyed) {
      if (message.readableEnded) onEnd();
      else closed();
      return;
    }
    message.on('data', onData);
    message.on('end', onEnd);
    message.on('error', closed);
    message.on('close', closed);
  });
}

/** What a response's 'error' comes to once its reader has settled: nothing (the reader has its outcome). */
function ignore(): void {}

/** Reads the rest of the body, without looking at it: its socket can then serve the next call. */
export function discard(message: IncomingMessage): void {
  message.resume();
}

/** The body as UTF-8 text (a leading byte-order mark dropped, as fetch's `text()`); rejects as `forEachChunk`, and with the AbortError when aborted. */
export async function readText(message: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  if (!(await forEachChunk(message, (chunk) => chunks.push(chunk)))) throw message.errored;
  const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
