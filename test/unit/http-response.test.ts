/**
 * Reading a response's body chunk by chunk (http-response.ts): the outcome, and that once it is settled
 * the reader holds nothing through the body it read (Node may keep a finished response a while longer).
 */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { forEachChunk } from '../../src/llm/http-response.ts';

/** A body as forEachChunk reads it: a Readable is all of an IncomingMessage it uses. */
const body = () => new Readable({ read() {} }) as unknown as IncomingMessage & Readable;

const readers = (message: Readable) => ({
  data: message.listenerCount('data'),
  end: message.listenerCount('end'),
  close: message.listenerCount('close'),
  error: message.listenerCount('error'),
});
/** What a settled reader leaves on the body: one listener that ignores a later error, nothing else. */
const SETTLED = { data: 0, end: 0, close: 0, error: 1 };

describe('forEachChunk', () => {
  it('passes each chunk, resolves true at the end and leaves only a listener that ignores a later error', async () => {
    const message = body();
    const chunks: string[] = [];
    const reading = forEachChunk(message, (c) => chunks.push(c.toString()));
    message.push('a');
    message.push('b');
    message.push(null);
    await expect(reading).resolves.toBe(true);
    expect(chunks.join('')).toBe('ab');
    expect(readers(message)).toEqual(SETTLED);
    expect(() => message.emit('error', new Error('late'))).not.toThrow();
    // The same function for every body: it holds nothing of the call it was left by.
    const other = body();
    const otherReading = forEachChunk(other, () => {});
    other.push(null);
    await otherReading;
    expect(other.listeners('error')).toEqual(message.listeners('error'));
  });

  it('rejects with what onChunk throws, destroys the body and takes its listeners off', async () => {
    const message = body();
    const reading = forEachChunk(message, () => {
      throw new Error('not an event');
    });
    message.push('x');
    await expect(reading).rejects.toThrow('not an event');
    expect(message.destroyed).toBe(true);
    expect(readers(message)).toEqual(SETTLED);
  });

  it('resolves false when the body is destroyed with an AbortError, and "terminated" for any other cut', async () => {
    const aborted = body();
    const reading = forEachChunk(aborted, () => {});
    aborted.destroy(new DOMException('This operation was aborted', 'AbortError'));
    await expect(reading).resolves.toBe(false);
    expect(readers(aborted)).toEqual(SETTLED);

    const cut = body();
    const cutReading = forEachChunk(cut, () => {});
    cut.destroy(new Error('socket hang up'));
    await expect(cutReading).rejects.toMatchObject({ message: 'terminated', cause: { message: 'socket hang up' } });
    expect(readers(cut)).toEqual(SETTLED);
  });

  it('resolves true at once on a body that ended, and was closed, before it is read', async () => {
    const message = body();
    message.on('data', () => {});
    message.push('a');
    message.push(null);
    await new Promise((resolve) => message.once('close', resolve));
    await expect(forEachChunk(message, () => {})).resolves.toBe(true);
  });

  it('settles at once on a body destroyed before it is read: false for an abort, "terminated" for anything else', async () => {
    const aborted = body();
    aborted.destroy(new DOMException('This operation was aborted', 'AbortError'));
    await expect(forEachChunk(aborted, () => {})).resolves.toBe(false);
    expect(readers(aborted)).toEqual(SETTLED);

    const cut = body();
    cut.on('error', () => {});
    cut.destroy(new Error('socket hang up'));
    await new Promise((resolve) => cut.once('close', resolve));
    await expect(forEachChunk(cut, () => {})).rejects.toMatchObject({ message: 'terminated', cause: { message: 'socket hang up' } });
  });
});
